"""One bisection per box: the second one is refused, naming the first (issue 40).

Two bisections on one box (one user's or two users') fought for its GPUs, and each read its trials'
failures as "not enough memory".  A bisection now holds the box's lock for its whole run: a process
on the box (specdebug/box/bisect_lock.py, under the stream watchdog, so it ends with the link) that
keeps a record of who runs it, in a folder per box user under /tmp (0711 folder, 0644 record,
O_NOFOLLOW, owner-checked; a record whose holder process is gone counts for nothing).  The second
bisection reads the first's record and stops before it launches anything.

The lock is a courtesy between specdebug runs, not a guard against other programs: where it cannot
be taken (no python3, no writable /tmp) the bisection goes on with a warning.
SPECDEBUG_BISECT_LOCKS (on this machine) names another folder on the box for the records (the test
suite gives each test its own, as it does the server records).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

from specdebug.core.bisect.trial import TrialError
from specdebug.core.sanitize import visible
from specdebug.remote.api import Remote, RemoteError
from specdebug.remote.boxcode import python_argv

LOCK_ROOT_ENV = "SPECDEBUG_BISECT_LOCKS"
DEFAULT_ROOT = "/tmp"
ANSWER_WAIT_S = 30.0  # the holder's first line (a busy box's python3 start included)


class BoxBusy(TrialError):
    """Another bisection runs on the box; the message names it."""


def lock_root() -> str:
    return os.environ.get(LOCK_ROOT_ENV) or DEFAULT_ROOT


def _asked(bisect: str, good: str, bad: str) -> dict[str, Any]:
    """What this run tells a second one about itself."""
    return {
        "bisect": bisect,
        "good": good,
        "bad": bad,
        "client_host": socket.gethostname(),
        "client_user": getpass.getuser(),
        "pid": os.getpid(),
    }


def describe(record: dict[str, Any], host: str) -> str:
    """The holder's record as one sentence (its fields are another user's text: made visible)."""

    def field(key: str) -> str:
        return visible(str(record.get(key, "?")))[:200]

    since = record.get("since")
    when = time.strftime(" since %H:%M:%S UTC", time.gmtime(since)) if isinstance(since, int | float) else ""
    return (
        f"another bisection runs on {host} and holds its GPUs: {field('good')} vs {field('bad')} "
        f"(bisection {field('bisect')}), started by {field('client_user')}@{field('client_host')} "
        f"PID {field('pid')} as box user {field('box_user')}{when}; trials beside it would only fail for "
        "memory: wait for it to end, or stop it there"
    )


@contextlib.asynccontextmanager
async def hold_box(
    remote: Remote, host: str, bisect: str, good: str, bad: str, warnings: list[str]
) -> AsyncIterator[None]:
    """The box's bisection lock for the block; BoxBusy naming the holder when another run has it.
    Where no lock can be taken the block runs all the same, with a warning in `warnings`."""
    argv = python_argv("bisect_lock.py", lock_root(), json.dumps(_asked(bisect, good, bad)))
    lines = remote.stream(argv).__aiter__()
    try:
        try:
            first = await asyncio.wait_for(anext(lines, ""), ANSWER_WAIT_S)
        except (RemoteError, OSError, TimeoutError) as exc:
            first = f"error {exc or type(exc).__name__}"
        word, _, rest = str(first).partition(" ")
        if word == "busy":
            try:
                record = json.loads(rest)
            except ValueError:
                record = {}
            raise BoxBusy(describe(record if isinstance(record, dict) else {}, host))
        if word != "held":
            warnings.append(
                f"the box's bisection lock could not be taken ({visible(rest or 'no answer')[:300]}): "
                "a second bisection on this box would not be told of this one"
            )
        yield
    finally:
        with contextlib.suppress(RemoteError, OSError):
            await lines.aclose()  # type: ignore[attr-defined]
