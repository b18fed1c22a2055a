"""`specdebug demo`: the TUI on the simulated box, reached over a loopback SSH server."""
