"""Talking to the box: connections, remote commands (argv quoted in one place), streams and forwards."""

from specdebug.remote.libsearch import install as _fast_library_lookup

_fast_library_lookup()  # before any module here imports asyncssh (see libsearch.py)
