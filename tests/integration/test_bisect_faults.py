"""Bisection when candidates misbehave: one that fails to start (CUDA OOM while capturing graphs:
--mem-fraction-static 0.99 without --disable-cuda-graph) is skipped with its reason by default, or
judged bad with --failed-start bad; and a verify gate (verify_ms<=19, read from the server's log
after a short probe) judges the slow candidate bad without spending a benchmark."""

from __future__ import annotations

from pathlib import Path

from specdebug.core.bisect.models import BisectOptions, Finished, Phase, TrialProgress
from specdebug.core.bisect.run import Bisection
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile
from specdebug.core.servers import forget_record
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, write_pair

OOM = ["--mem-fraction-static", "0.99"]  # no room for cuda graphs, fine without them


async def test_failed_start_skip_then_bad_and_a_gate_without_benchmark(remote, tmp_path: Path) -> None:
    good, bad = write_pair(tmp_path, bad_flags=[OOM, HARMLESS_FLAGS[0], CULPRIT], tag="bxfault-")
    g, b = load_profile(good), load_profile(bad)
    journal = Journal(tmp_path / "session")
    try:
        skip = Bisection(remote, g, b, BisectOptions(gate="verify_ms<=19"), journal=journal)
        events = [ev async for ev in skip.events()]
        as_bad = Bisection(
            remote, g, b, BisectOptions(gate="verify_ms<=19", failed_start="bad"), journal=journal
        )
        events_bad = [ev async for ev in as_bad.events()]
    finally:
        for name in (g.name, b.name):
            await forget_record(remote, name)

    assert isinstance(events[-1], Finished)
    result = events[-1].result
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"], result.notes
    failed = next(t for t in result.trials if t.applied == ["--mem-fraction-static", "--schedule-policy"])
    assert failed.judged == "skip" and "failed to start" in failed.reason and failed.metric is None
    assert "memory" in failed.reason.lower()  # the reason is kept: the OOM line
    gated = next(t for t in result.trials if t.applied == ["--disable-cuda-graph"])
    assert gated.judged == "bad" and gated.gated and gated.metric is None
    assert gated.gate_value is not None and gated.gate_value > 19 and "gate verify_ms<=19" in gated.reason
    index = gated.index
    phases = {e.phase for e in events if isinstance(e, TrialProgress) and e.index == index}
    assert Phase.GATE in phases and Phase.BENCH not in phases  # judged without a benchmark

    # the same session with --failed-start bad: the failed start is now the culprit, one new launch
    result_bad = events_bad[-1].result
    assert result_bad.verdict == "found" and result_bad.culprits == ["--mem-fraction-static"]
    assert result_bad.launches == 1
    cached_fail = next(t for t in result_bad.trials if t.fingerprint == failed.fingerprint)
    assert cached_fail.cached and cached_fail.judged == "bad"
