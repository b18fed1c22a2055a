"""The startup watch's log follower never ends silently on an error it does not know (a library's
race): it is tried again, and after a few it says the log cannot be followed.  A silent end left a
server that came up healthy timing out unseen ("ready line not seen"; a busy run, stop 49)."""

from __future__ import annotations

import asyncio

from specdebug.core.control import watch
from specdebug.core.logs.follow import RawLine


class Flaky:
    """A follower whose first `faults` starts fail with an error nobody expects."""

    path = "/l/server.log"

    def __init__(self, faults: int) -> None:
        self.faults = faults

    async def lines(self):
        if self.faults:
            self.faults -= 1
            raise AttributeError("'NoneType' object has no attribute 'session_started'")
        yield RawLine(0, b"The server is fired up and ready to roll!")
        await asyncio.Event().wait()  # following: nothing more


async def _first(faults: int, monkeypatch) -> object:
    monkeypatch.setattr(watch, "FOLLOW_RETRY_S", 0.0)
    queue: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(watch._follow_log(None, Flaky(faults), queue, lambda: 0.0))  # type: ignore[arg-type]  # noqa: SLF001
    try:
        return await asyncio.wait_for(queue.get(), 10)
    finally:
        task.cancel()


async def test_a_fault_is_tried_again_and_the_line_comes(monkeypatch) -> None:
    got = await _first(2, monkeypatch)
    assert "fired up" in getattr(got, "text", "")


async def test_faults_that_keep_coming_are_said_not_swallowed(monkeypatch) -> None:
    got = await _first(10, monkeypatch)
    assert type(got).__name__ == "_Unreadable" and "AttributeError" in str(got)
