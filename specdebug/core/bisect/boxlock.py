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
ORPHAN_WAIT_S = 15.0  # a holder whose client here is gone is waited for this long (its link's watchdog)
ORPHAN_POLL_S = 0.5


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
    when = ""
    if isinstance(since, int | float) and 0 < since < 1e11:  # another user's number: a time, or nothing
        when = time.strftime(" since %H:%M:%S UTC", time.gmtime(since))
    return (
        f"another bisection runs on {host} and holds its GPUs: {field('good')} vs {field('bad')} "
        f"(bisection {field('bisect')}), started by {field('client_user')}@{field('client_host')} "
        f"PID {field('pid')} as box user {field('box_user')}{when}; trials beside it would only fail for "
        "memory: wait for it to end, or stop it there"
    )


@contextlib.asynccontextmanager
async def hold_box(
    remote: Remote,
    host: str,
    bisect: str,
    good: str,
    bad: str,
    warnings: list[str],
    root: str | None = None,
) -> AsyncIterator[None]:
    """The box's bisection lock for the block; BoxBusy naming the holder when another run has it.
    Where no lock can be taken the block runs all the same, with a warning in `warnings`.  `root`:
    the box folder of the records (default lock_root())."""
    argv = python_argv("bisect_lock.py", root or lock_root(), json.dumps(_asked(bisect, good, bad)))
    deadline = time.monotonic() + ORPHAN_WAIT_S
    while True:
        lines = remote.stream(argv).__aiter__()
        try:
            word, record, said = await _answer(lines)
            if word == "busy" and _orphaned(record) and time.monotonic() < deadline:
                await asyncio.sleep(ORPHAN_POLL_S)  # its link is gone: the box's watchdog ends it
                continue
            if word == "busy":
                raise BoxBusy(describe(record, host))
            if word != "held":
                warnings.append(
                    f"the box's bisection lock could not be taken ({visible(said or 'no answer')[:300]}): "
                    "a second bisection on this box would not be told of this one"
                )
            yield
            return
        finally:
            with contextlib.suppress(RemoteError, OSError):
                await lines.aclose()  # type: ignore[attr-defined]


async def running_bisections(remote: Remote, root: str | None = None) -> list[dict[str, Any]] | None:
    """The live holders of the box's bisection lock (any user's), read only; None: cannot tell."""
    try:
        res = await remote.run(python_argv("bisect_lock.py", root or lock_root(), "--peek"), timeout=30)
    except RemoteError:
        return None
    word, _, rest = res.out.strip().partition(" ")
    if not res.ok or word != "holders":
        return None
    try:
        holders = json.loads(rest)
    except ValueError:
        return None
    return [h for h in holders if isinstance(h, dict)] if isinstance(holders, list) else None


async def _answer(lines: AsyncIterator[str]) -> tuple[str, dict[str, Any], str]:
    """The holder's first line: (held|busy|error, the holder's record when busy, the rest)."""
    try:
        first = await asyncio.wait_for(anext(lines, ""), ANSWER_WAIT_S)
    except (RemoteError, OSError, TimeoutError) as exc:
        first = f"error {exc or type(exc).__name__}"
    word, _, rest = str(first).partition(" ")
    record: Any = {}
    if word == "busy":
        with contextlib.suppress(ValueError):
            record = json.loads(rest)
    return word, record if isinstance(record, dict) else {}, rest


def _orphaned(record: dict[str, Any]) -> bool:
    """The holder was started from this machine by a specdebug that is gone (a kill -9), or by this
    very process (a bisection just ended here): its box process ends once the box sees the link
    closed, so the lock is waited for a little, not refused."""
    if record.get("client_host") != socket.gethostname():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
