"""Waiting out a dropped link: what a drop broke says nothing about the box, so it is asked again once
the link is back on a new generation (a reconnect), within a deadline.

A check the user did not ask for (the Env pane's, when the server turns ready) that a drop broke
stayed "failed" with the link back a second later (a busy run: "env check failed: probe channel
write failed: Channel not open for sending", the demo's Env pane empty for good).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from specdebug.remote.api import ConnState, Remote
from specdebug.transport.base import ConnectionDropped

T = TypeVar("T")
TRIES = 2  # a drop, then once more on the new link; a second drop is shown


def link_of(remote: Remote) -> int | None:
    """Which link the remote is on (a Connection counts its connects); None where it does not say."""
    return getattr(remote, "generation", None)


def generations(remotes: Sequence[Remote]) -> list[int | None]:
    """Each link's generation now (None: a remote without a lifecycle, e.g. a one-shot)."""
    return [link_of(r) for r in remotes]


async def reconnected(remotes: Sequence[Remote], before: Sequence[int | None], timeout: float) -> None:
    """Until every link that was at `before` is connected on a later generation (TimeoutError past
    `timeout`); a remote without a lifecycle is waited for as connected."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for remote, gen in zip(remotes, before, strict=True):
        subscribe = getattr(remote, "subscribe", None)
        if gen is None or subscribe is None:
            await remote.wait_connected(max(0.0, deadline - loop.time()))
            continue
        changed = asyncio.Event()
        unsubscribe = subscribe(lambda _status, changed=changed: changed.set())
        try:
            while link_of(remote) == gen or remote.status.state is not ConnState.CONNECTED:
                if remote.status.state in (ConnState.FAILED, ConnState.CLOSED):  # gone for good
                    raise ConnectionDropped(
                        f"{remote.name}: the link did not come back ({remote.status.state})"
                    )
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError(f"{remote.name}: not connected again within {timeout:.0f} s")
                changed.clear()
                await asyncio.wait_for(changed.wait(), left)
        finally:
            unsubscribe()


async def across_drops(
    remotes: Sequence[Remote],
    call: Callable[[], Awaitable[T]],
    *,
    timeout: float,
    on_drop: Callable[[ConnectionDropped], None] | None = None,
) -> T:
    """`call()`, and once more after the reconnect where a dropped link broke it (`on_drop` says so
    meanwhile); a second drop, or no reconnect within `timeout`, propagates."""
    for attempt in range(TRIES):
        before = generations(remotes)
        try:
            return await call()
        except ConnectionDropped as exc:
            if attempt == TRIES - 1:
                raise
            if on_drop is not None:
                on_drop(exc)
            await reconnected(remotes, before, timeout)
    raise AssertionError("unreachable")
