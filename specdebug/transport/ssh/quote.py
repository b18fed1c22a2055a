"""The one place where argv becomes shell text: sshd hands the command string to the login shell,
so every word is quoted (user text only ever appears as a quoted word)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def sh_join(argv: Sequence[str]) -> str:
    """Quote an argv list for a POSIX shell (each word survives byte for byte)."""
    if not argv:
        raise ValueError("empty argv")
    return shlex.join(str(a) for a in argv)
