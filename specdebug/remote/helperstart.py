"""How many resident helpers start at once, and how often one is tried.

Why: with 64 hosts on a box whose login shell is slow to start, every helper started at the same moment
and half of them ran past their start timeout while the box was busy starting the others.  Starts go
through a gate (a few at a time per event loop; waiting in line does not count against the timeout),
and a start that times out is tried again before the host falls back to exec channels.
"""

from __future__ import annotations

import asyncio
import weakref

HELPER_START_S = 15.0  # one start: the box's python3 up and its greeting read
HELPER_ATTEMPTS = 2
CONCURRENT_STARTS = 8

_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def helper_start_gate() -> asyncio.Semaphore:
    """This event loop's gate (a Semaphore is bound to the loop it is first used on)."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(CONCURRENT_STARTS)
    return gate
