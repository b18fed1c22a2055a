"""specdebug: debug speculative-decoding inference servers on remote GPU boxes over SSH."""

import warnings as _warnings

__version__ = "0.1.0"


class _LazyPattern:
    """A regex for a warnings filter, compiled when a warning first asks: `warnings` only calls
    `.match`, and `re` costs 7 ms of a verb the warm agent answers (13 ms: the interpreter's start)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags
        self._compiled = None

    def match(self, text: str) -> object:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.pattern, self.flags)  # type: ignore[assignment]
        return self._compiled.match(text)  # type: ignore[attr-defined]


# asyncssh 2.24 still names DSA as it is imported, and cryptography 51 deprecates DSA: every process
# that imported asyncssh printed five CryptographyDeprecationWarning lines on stderr, in front of a
# `--json` piped with 2>&1 (the acceptance story's bench output no longer parsed).  They are about
# asyncssh's code, nothing a user can act on.  Here, because every entry point (CLI, TUI, the demo's
# in-process sshd) imports this package before asyncssh.  Only deprecation notices attributed to
# asyncssh's own modules are dropped; every other warning shows as before.  This is what
# `filterwarnings("ignore", message=r".*\bdeprecated\b", module=r"asyncssh(\.|$)")` adds, without
# importing `re` at start (each warning reads the list afresh; the registry version filterwarnings
# also bumps only forgets warnings already shown, and an ignore filter shows none).
_warnings.filters.insert(  # type: ignore[attr-defined]
    0,
    ("ignore", _LazyPattern(r".*\bdeprecated\b", 2), Warning, _LazyPattern(r"asyncssh(\.|$)"), 0),  # 2: re.I
)
