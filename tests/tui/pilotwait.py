"""Waiting for an in-process app to settle: one `pilot.pause()` is not enough on a loaded machine
(a table measures and scrolls on later idles)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def until(pilot: Any, cond: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Pause until `cond()` holds, at most `timeout_s` (a bound, not an expected time): whether it held."""
    return await _poll(cond, timeout_s, lambda: pilot.pause(0.02))


async def until_slept(cond: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """`until` for tests that must not let the pilot wait for idle between checks (keys queued at once)."""
    return await _poll(cond, timeout_s, lambda: asyncio.sleep(0.02))


async def _poll(cond: Callable[[], bool], timeout_s: float, wait: Callable[[], Awaitable[Any]]) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        await wait()
    return True
