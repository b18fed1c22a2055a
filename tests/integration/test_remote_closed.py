"""A closed box client says so: it never reads as connected again, and what follows a log on it
stops asking instead of retrying in a hot loop.

Found by the suite hanging for 30 minutes in an event loop's teardown: close() cancelled the
supervisor inside its watch, before it cleared `connected`, so `wait_connected()` returned at once
while every open failed with NotConnected.  The startup watcher's log follower then reconnected
without ever sleeping, and the loop's final cancel was swallowed by `wait_for` (its inner call was
already done each time), so the loop never closed.
"""

from __future__ import annotations

import asyncio

import pytest

from specdebug.core.logs.follow import Follower
from specdebug.remote.api import NotConnected
from specdebug.remote.client import BoxClient
from tests.boxes import ssh_box


async def closed_remote(sshd) -> BoxClient:
    remote = ssh_box(sshd.alias, ssh_config=sshd.config_path, keepalive_interval=1.0, connect_timeout=5.0)
    await remote.start()
    await remote.wait_connected(15)
    await remote.close()
    return remote


async def test_a_closed_remote_is_not_connected(sshd) -> None:
    remote = await closed_remote(sshd)
    with pytest.raises(NotConnected, match="closed"):
        await asyncio.wait_for(remote.wait_connected(), 60)  # raised, not waited for, not "connected"
    with pytest.raises(NotConnected):
        await remote.run(["true"], timeout=10)


async def test_a_follower_on_a_closed_remote_stops_and_can_be_cancelled(sshd, tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a line\n")
    remote = await closed_remote(sshd)
    events: list[str] = []

    async def follow() -> None:
        async for item in Follower(remote, str(log), offset=0).lines():
            events.append(getattr(item, "kind", "line"))

    task = asyncio.create_task(follow())
    await asyncio.sleep(1.0)  # a hot loop yields thousands of "reconnecting" events in this time
    assert len(events) < 5, events[:10]
    task.cancel()
    with pytest.raises((asyncio.CancelledError, NotConnected)):
        await asyncio.wait_for(task, 60)  # ended, not hanging on (a deadline, not a clock)
