"""SIGTERM as an abort a verb cleans up after, as Ctrl+C is (asyncio cancels the verb's task).

Why: Python's default TERM ends the process at once, so `kill PID` on a `bisect` left its trial's
server running with no word, and on a `launch --wait` said nothing of the server that keeps
running.  Inside `on_term`, TERM prints one line, cancels the verb's task (its `finally` blocks
run: a bisection trial stops its server) and the verb exits 143 (128 + TERM).  Ctrl+C is left to
asyncio's own handling (and the verbs' messages for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable

from specdebug.verbs.common import VerbExit, err

TERM_EXIT = 128 + signal.SIGTERM


@contextlib.asynccontextmanager
async def on_term(said: Callable[[], str], after: Callable[[], str] | None = None) -> AsyncIterator[None]:
    """While inside: TERM says `said()`, cancels this task, and (once the task has cleaned up)
    says `after()` and exits TERM_EXIT.  A second TERM while cleaning up is ignored (the first
    one's cleanup is what stops the servers); KILL still ends it at once."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    got = False

    def handler() -> None:
        nonlocal got
        if got or task is None:
            return
        got = True
        err(said())
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        yield
        return
    try:
        yield
    except asyncio.CancelledError:
        if not got or task is None:
            raise
        task.uncancel()
        if after is not None:
            err(after())
        raise VerbExit(TERM_EXIT) from None
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
