"""Talking to the box: connections, remote commands (argv quoted in one place), streams and forwards."""
