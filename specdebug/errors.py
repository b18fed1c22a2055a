"""One error root: every error specdebug raises for a user to read is a `SpecdebugError`.

Callers that only say what went wrong catch this one type instead of tuples such as
`(ProfileError, OSError, GroupError, GateError, ValueError)` (issue 23).  Today's families stay
beneath it with their own bases too (a `HostSpecError` is still a ValueError, a `JournalError`
still an OSError), so no existing `except` changes meaning and every message reads as before.
`hint` is what to do about it, when known (None otherwise); `exit_code` what the command line exits
with (1: the thing failed; 2: a usage or config error the user must fix first).  Each front end
catches the root once and renders it (CLI: verbs.common.fail, one `specdebug: MESSAGE` line, a
`specdebug: hint: HINT` line, the exit code; TUI: tui.pane.error_toast, a notification).
Families that keep a builtin base first (ValueError, OSError) take no `hint` argument (the builtin's
constructor runs): they set the attribute after construction, or carry a class-level hint.
A leaf: imports nothing of specdebug.
"""

from __future__ import annotations


class SpecdebugError(Exception):
    """`SpecdebugError(message, hint)`: the message is what `str()` shows; the hint is separate."""

    hint: str | None = None  # families that keep a builtin base first (ValueError, OSError) have it too
    exit_code: int = 1  # the CLI's exit code for it: 1 the thing failed, 2 usage or config

    def __init__(self, message: object = "", hint: str | None = None, *rest: object) -> None:
        super().__init__(message, *rest)
        self.hint = hint

    @property
    def message(self) -> str:
        return str(self)
