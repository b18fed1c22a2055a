"""specdebug: debug speculative-decoding inference servers on remote GPU boxes over SSH."""

import warnings as _warnings

__version__ = "0.1.0"

# asyncssh 2.24 still names DSA as it is imported, and cryptography 51 deprecates DSA: every process
# that imported asyncssh printed five CryptographyDeprecationWarning lines on stderr, in front of a
# `--json` piped with 2>&1 (the acceptance story's bench output no longer parsed).  They are about
# asyncssh's code, nothing a user can act on.  Here, because every entry point (CLI, TUI, the demo's
# in-process sshd) imports this package before asyncssh.  Only deprecation notices attributed to
# asyncssh's own modules are dropped; every other warning shows as before.
_warnings.filterwarnings("ignore", message=r".*\bdeprecated\b", module=r"asyncssh(\.|$)")
