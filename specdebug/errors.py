"""One error root: every error specdebug raises for a user to read is a `SpecdebugError`.

Callers that only say what went wrong catch this one type instead of tuples such as
`(ProfileError, OSError, GroupError, GateError, ValueError)` (issue 23).  Today's families stay
beneath it with their own bases too (a `HostSpecError` is still a ValueError, a `JournalError`
still an OSError), so no existing `except` changes meaning and every message reads as before.
`hint` is what to do about it, when known (None otherwise).  A leaf: imports nothing of specdebug.
"""

from __future__ import annotations


class SpecdebugError(Exception):
    """`SpecdebugError(message, hint)`: the message is what `str()` shows; the hint is separate."""

    hint: str | None = None  # families that keep a builtin base first (ValueError, OSError) have it too

    def __init__(self, message: object = "", hint: str | None = None, *rest: object) -> None:
        super().__init__(message, *rest)
        self.hint = hint

    @property
    def message(self) -> str:
        return str(self)
