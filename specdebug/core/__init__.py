"""The core: what specdebug knows and does, with no screen (the TUI and the verbs are thin front ends)."""
