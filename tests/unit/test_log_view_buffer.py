"""ViewBuffer: the bounded path from a follower to the log view (pure: no screen, no clock)."""

from __future__ import annotations

import pytest

from specdebug.core.logs.viewbuffer import MAX_VIEW, ViewBuffer


def pushed(n: int, limit: int = 10, start: int = 0) -> ViewBuffer[int]:
    buf: ViewBuffer[int] = ViewBuffer(limit)
    for i in range(start, start + n):
        buf.push(i)
    return buf


def test_following_drain_returns_everything_in_order_once() -> None:
    buf = pushed(5)
    assert buf.has_incoming and buf.received == 5
    assert buf.drain() == [0, 1, 2, 3, 4]
    assert not buf.has_incoming and buf.drain() == []
    assert buf.dropped == 0 and buf.pending_count == 0


def test_full_inbox_lets_the_oldest_go_and_counts_them() -> None:
    buf = pushed(25, limit=10)
    assert buf.received == 25 and buf.dropped == 15
    assert buf.drain() == list(range(15, 25))  # the newest `limit`, oldest first


def test_paused_items_wait_in_pending_and_come_back_first_on_resume() -> None:
    buf = pushed(3)
    assert buf.drain() == [0, 1, 2]
    buf.pause()
    assert not buf.following
    for i in range(3, 7):
        buf.push(i)
    assert buf.drain() == []  # nothing shown while paused
    assert buf.pending == (3, 4, 5, 6) and buf.pending_count == 4
    buf.push(7)  # arrives after the pause, still in the inbox at resume
    assert buf.resume() == [3, 4, 5, 6]
    assert buf.following and buf.pending_count == 0
    assert buf.drain() == [7]
    assert buf.dropped == 0


def test_pending_is_bounded_and_counts_what_it_cannot_hold() -> None:
    buf: ViewBuffer[int] = ViewBuffer(10)
    buf.pause()
    for chunk in range(3):  # 3 x 6 items drained while paused: pending holds the newest 10
        for i in range(chunk * 6, chunk * 6 + 6):
            buf.push(i)
        assert buf.drain() == []
    assert buf.pending == tuple(range(8, 18))
    assert buf.dropped == 8 and buf.received == 18


def test_pending_then_inbox_on_drain_after_resume_by_flag() -> None:
    """Following again with items pending and new ones in the inbox: pending first, capped at limit."""
    buf: ViewBuffer[int] = ViewBuffer(10)
    buf.pause()
    for i in range(8):
        buf.push(i)
    buf.drain()
    buf.following = True  # e.g. a front end that resumes on its next drain instead of at once
    for i in range(8, 16):
        buf.push(i)
    assert buf.drain() == list(range(6, 16))
    assert buf.dropped == 6 and buf.pending_count == 0


def test_resume_without_pending_returns_nothing() -> None:
    buf = pushed(2)
    buf.drain()
    buf.pause()
    assert buf.resume() == []
    assert buf.following


def test_clear_starts_a_new_follow() -> None:
    buf = pushed(30, limit=10)
    buf.drain()
    buf.pause()
    buf.push(99)
    buf.drain()
    buf.push(100)
    buf.clear()
    assert buf.following and not buf.has_incoming and buf.pending_count == 0
    assert buf.received == 0 and buf.dropped == 0
    assert buf.drain() == []


def test_items_of_any_type_and_the_default_limit() -> None:
    buf: ViewBuffer[str] = ViewBuffer()
    assert buf.limit == MAX_VIEW
    for i in range(3 * MAX_VIEW):
        buf.push(f"line {i}")
    out = buf.drain()
    assert len(out) == MAX_VIEW and out[0] == f"line {2 * MAX_VIEW}"
    assert buf.dropped == 2 * MAX_VIEW


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit"):
        ViewBuffer(0)
