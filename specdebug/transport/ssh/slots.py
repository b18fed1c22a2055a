"""The session-slot limiter for exec channels.

sshd caps sessions per connection (MaxSessions) and never says the number; this counter learns it
from refusals and queues the rest.  Its own module: pure counting, no SSH.
"""

from __future__ import annotations

import asyncio
import time


class SlotLimiter:
    """Counts open exec channels; shrinks its limit to what the server really allows.

    A refusal right after one of our channels closed is sshd still tearing that session down,
    not a lower MaxSessions, so it only waits; the learned limit starts over on each connection."""

    RELEASE_GRACE_S = 1.0

    def __init__(self, limit: int) -> None:
        self.initial = self.limit = max(1, limit)
        self.open = 0
        self._last_release = 0.0
        self._cond = asyncio.Condition()

    async def acquire(self) -> bool:
        """Take a slot; True when it had to wait for one (every slot was taken)."""
        async with self._cond:
            waited = self.open >= self.limit
            await self._cond.wait_for(lambda: self.open < self.limit)
            self.open += 1
            return waited

    async def release(self) -> None:
        async with self._cond:
            self.open -= 1
            self._last_release = time.monotonic()
            self._cond.notify_all()

    async def server_refused(self) -> None:
        """An open failed with 'open failed': a session is still closing, or MaxSessions is lower."""
        async with self._cond:
            self.open -= 1
            if time.monotonic() - self._last_release > self.RELEASE_GRACE_S:
                self.limit = max(1, min(self.limit, self.open))
            self._cond.notify_all()

    async def reset(self) -> None:
        """A new connection: the limit starts over, and an open waiting under the old one goes on."""
        async with self._cond:
            self.limit = self.initial
            self._cond.notify_all()
