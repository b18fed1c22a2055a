"""A launch that fails with `No module named 'specdebug'` says how to fix it (verdict reason)."""

from __future__ import annotations

from specdebug.core.control.events import Verdict
from specdebug.core.control.tracker import StartupTracker
from specdebug.core.logs.hints import SPECDEBUG_MISSING, hint_for, with_hint

T0 = 1000.0
LINE = (
    "/usr/bin/python3: Error while finding module specification for 'specdebug.sim' "
    "(ModuleNotFoundError: No module named 'specdebug')"
)


def test_hint_for_missing_specdebug_and_other_modules() -> None:
    assert hint_for([LINE]) == SPECDEBUG_MISSING
    assert "examples/README.md" in SPECDEBUG_MISSING and "sim install-box" in SPECDEBUG_MISSING
    assert "'sglang'" in (hint_for(["ModuleNotFoundError: No module named 'sglang.srt'"]) or "")
    assert hint_for(["RuntimeError: CUDA error"]) is None
    assert with_hint("boom") == "boom"


def test_exited_verdict_carries_the_fix() -> None:
    t = StartupTracker(kind="sglang", started_at=T0, timeout_s=60.0, profile="p", pid=7, pgid=7)
    t.feed_line(LINE, T0 + 0.2)
    t.group([], T0 + 0.5)
    t.group([], T0 + 1.0)
    verdicts = [e for e in t.tick(T0 + 1.0 + t.EXIT_SETTLE_S + 5) if isinstance(e, Verdict)]
    if not verdicts:  # an error pattern may have claimed the line first: let it settle
        verdicts = [e for e in t.tick(T0 + 120) if isinstance(e, Verdict)]
    (v,) = verdicts
    assert v.verdict == "failed"
    assert "No module named 'specdebug'" in v.reason
    assert "Fix: the box's python3 cannot import specdebug" in v.reason
