"""The SSH transport: asyncssh, host keys, host specs and ssh config, the MaxSessions slot limiter."""

from specdebug.transport.ssh.libsearch import install as _fast_library_lookup

_fast_library_lookup()  # before any module here imports asyncssh (see libsearch.py)
