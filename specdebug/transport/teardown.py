"""Best-effort teardown steps that must not hide what went wrong.

Closing a channel whose peer is already gone raises (EOF on a closed pipe, a channel the server
dropped, a wait that times out). Such a step must not stop the rest of the teardown, but the
error is kept in the debug log with its traceback instead of vanishing: `--debug` shows it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)


@contextlib.contextmanager
def best_effort(what: str, *args: object) -> Iterator[None]:
    """Run a teardown step; an Exception is logged at debug level (with traceback), not raised.

    CancelledError is a BaseException and passes through: a cancelled close stays cancelled.
    """
    try:
        yield
    except Exception:
        log.debug("teardown step failed: " + what, *args, exc_info=True)
