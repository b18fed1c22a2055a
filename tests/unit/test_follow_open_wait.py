"""The log follower's open: slow is waited for, only a queue for an SSH session slot turns to polling.

Pure logic (`follow._open_stream`) with a stand-in stream and link: under load an SSH or Slurm
process can take over 5 s to start, and until stop 33 the follower then fell back to polling with
a false "MaxSessions is used up" message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from specdebug.core.logs import follow
from specdebug.remote.api import ConnState, ConnStatus


@dataclass
class Link:
    full: bool = False
    status: ConnStatus = field(default_factory=lambda: ConnStatus(ConnState.CONNECTED))
    generation: int = 1

    def sessions_full(self) -> bool:
        return self.full


@dataclass
class SlowStream:
    delay: float
    opened: bool = False
    closed: bool = False

    async def __aenter__(self) -> SlowStream:
        await asyncio.sleep(self.delay)
        self.opened = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def short_waits(monkeypatch) -> None:
    monkeypatch.setattr(follow, "OPEN_WAIT_S", 0.05)
    monkeypatch.setattr(follow, "OPEN_SLOW_S", 1.0)


async def test_a_slow_open_is_waited_for() -> None:
    stream = SlowStream(0.3)  # six times the wait for a slot
    assert await follow._open_stream(Link(), stream) is None
    assert stream.opened and not stream.closed


async def test_an_open_queued_for_a_session_slot_polls_and_says_maxsessions() -> None:
    stream = SlowStream(0.3)
    why = await follow._open_stream(Link(full=True), stream)
    assert why is not None and "MaxSessions" in why
    assert not stream.opened


async def test_an_open_past_the_slow_bound_polls_without_blaming_maxsessions() -> None:
    why = await follow._open_stream(Link(), SlowStream(5.0))
    assert why is not None and "MaxSessions" not in why and "within 1 s" in why


async def test_a_link_that_went_while_opening_is_down() -> None:
    link = Link(status=ConnStatus(ConnState.RECONNECTING))
    assert await follow._open_stream(link, SlowStream(0.3)) == "down"


async def test_an_open_still_pending_after_a_reconnect_is_made_again() -> None:
    """The link dropped and came back while the open waited (the watch-drop test's rare 60 s "ready
    line not seen"): the open is not waited for up to OPEN_SLOW_S on the old link."""
    link, stream = Link(), SlowStream(5.0)

    async def reconnect() -> None:
        await asyncio.sleep(0.02)
        link.generation += 1  # connected again, on a new link

    task = asyncio.ensure_future(reconnect())
    assert await follow._open_stream(link, stream) == "down"
    await task
    assert not stream.opened


async def test_a_cancelled_follow_closes_a_stream_that_opened_meanwhile() -> None:
    stream = SlowStream(0.1)
    task = asyncio.ensure_future(follow._open_stream(Link(full=True), stream))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not stream.opened or stream.closed
