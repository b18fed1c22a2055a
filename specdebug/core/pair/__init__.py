"""Pairing: the tmux session and its seats (session), ACLs, finding and owning sessions, the
read-only view."""
