"""The bounded path from a log follower to a screen: inbox, pending-while-paused, dropped counts.

Why a class of its own: a follower can deliver tens of thousands of lines per second, a screen
draws a few times per second, and the user may pause the view for minutes. Every line still
feeds the statistics (the caller does that before `push`); this buffer only decides which lines
get *shown*, keeps at most `limit` of them waiting at any stage, and counts the ones it had to let
go so the view can say "N dropped from view" instead of losing them silently. It knows nothing of
Textual (a second seat or a headless follower can drive the same accounting) and is pure: no
clock, no I/O, items of any type.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["MAX_VIEW", "ViewBuffer"]

MAX_VIEW = 5000  # lines kept for display (stats keep every sample regardless)

T = TypeVar("T")


class ViewBuffer(Generic[T]):
    """Items wait in an inbox until `drain()`; while paused they wait in `pending` instead.

    Each stage keeps at most `limit` items (the oldest go first) and every item let go that way
    is counted in `dropped`; `received` counts every item pushed since the last `clear()`.
    """

    def __init__(self, limit: int = MAX_VIEW) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._inbox: deque[T] = deque(maxlen=limit)
        self._pending: deque[T] = deque(maxlen=limit)
        self.following = True  # False while the user has paused the view
        self.received = 0
        self.dropped = 0

    # -- what the screen asks ----------------------------------------------------------------------
    @property
    def has_incoming(self) -> bool:
        """True when a `drain()` would move something (into the view or into pending)."""
        return bool(self._inbox)

    @property
    def pending(self) -> Sequence[T]:
        """What waits for the user to resume, oldest first (read-only view)."""
        return tuple(self._pending)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # -- feeding -----------------------------------------------------------------------------------
    def push(self, item: T) -> None:
        """Queue one item for display; a full inbox lets its oldest item go (counted)."""
        self.received += 1
        if len(self._inbox) == self.limit:
            self.dropped += 1
        self._inbox.append(item)

    def drain(self) -> list[T]:
        """Empty the inbox: following, return what to show now (pending first, at most `limit`);
        paused, move it into pending (counting what pending cannot hold) and return nothing."""
        batch = list(self._inbox)
        self._inbox.clear()
        if not batch:
            return []
        if self.following:
            if self._pending:
                batch = list(self._pending) + batch
                self._pending.clear()
            if len(batch) > self.limit:
                self.dropped += len(batch) - self.limit
                batch = batch[-self.limit :]
            return batch
        self.dropped += max(0, len(self._pending) + len(batch) - self.limit)
        self._pending.extend(batch)
        return []

    # -- the user ----------------------------------------------------------------------------------
    def pause(self) -> None:
        """Stop showing new items; they collect in pending until `resume()`."""
        self.following = False

    def resume(self) -> list[T]:
        """Follow again; returns what was pending (to show now), oldest first."""
        self.following = True
        out = list(self._pending)
        self._pending.clear()
        return out

    def clear(self) -> None:
        """A new follow: nothing waiting, counts from zero, following."""
        self._inbox.clear()
        self._pending.clear()
        self.received = self.dropped = 0
        self.following = True
