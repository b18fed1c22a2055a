"""The sim's serving frames keep the cost model's shares when the host wakes it late (virtual time)."""

from __future__ import annotations

import pytest

from specdebug.sim.server.sglang import sched_frames


class LateClock:
    """time.monotonic / time.sleep on a virtual clock; every sleep wakes `late` seconds late."""

    def __init__(self, late: float) -> None:
        self.now, self.late = 100.0, late

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + self.late


def frame_times(monkeypatch: pytest.MonkeyPatch, late: float, cycles: int = 200) -> tuple[float, float]:
    clock = LateClock(late)
    monkeypatch.setattr(sched_frames, "time", clock)
    monkeypatch.setattr(sched_frames, "_SCHEDULE", sched_frames._Schedule())
    draft = verify = 0.0
    for _ in range(cycles):
        t = clock.now
        sched_frames.draft(0.0062)
        draft += clock.now - t
        t = clock.now
        sched_frames.verify(0.0407)
        verify += clock.now - t
    return draft, verify


def test_a_late_wake_up_is_taken_from_the_next_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    quiet_d, quiet_v = frame_times(monkeypatch, late=0.0)
    assert quiet_v / (quiet_d + quiet_v) == pytest.approx(0.0407 / 0.0469)
    d, v = frame_times(monkeypatch, late=0.004)  # a loaded host: every wake-up 4 ms late
    assert v / (d + v) == pytest.approx(0.0407 / 0.0469, abs=0.01)
    assert d + v == pytest.approx(quiet_d + quiet_v, rel=0.01)  # the cycle keeps its length


def test_a_long_gap_starts_the_schedule_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = LateClock(0.0)
    monkeypatch.setattr(sched_frames, "time", clock)
    monkeypatch.setattr(sched_frames, "_SCHEDULE", sched_frames._Schedule())
    sched_frames.replay(0.01)
    clock.now += 5.0  # idle on the pipe
    t = clock.now
    sched_frames.replay(0.01)
    assert clock.now - t == pytest.approx(0.01)
