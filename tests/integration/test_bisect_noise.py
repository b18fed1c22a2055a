"""Bisection on a noisy box: the sim's --noise 0.03 varies the step cost per launch; with --repeats 3
the ends are measured interleaved until their gap is clearly beyond the spread, the spread is
reported as evidence, the good end is measured again at the end (drift check), and the culprit is
still the right one."""

from __future__ import annotations

from pathlib import Path

from specdebug.core.bisect.models import BisectOptions, Finished, TrialStarted
from specdebug.core.bisect.run import Bisection
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile
from specdebug.core.servers import forget_record
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, write_pair


async def test_noise_003_with_three_repeats_finds_the_right_culprit(remote, tmp_path: Path) -> None:
    good, bad = write_pair(
        tmp_path, bad_flags=[CULPRIT, HARMLESS_FLAGS[0]], sim_extra=["--noise", "0.03"], tag="bxnoise-"
    )
    g, b = load_profile(good), load_profile(bad)
    engine = Bisection(remote, g, b, BisectOptions(repeats=3), journal=Journal(tmp_path / "session"))
    try:
        events = [ev async for ev in engine.events()]
    finally:
        for name in (g.name, b.name):
            await forget_record(remote, name)
    done = events[-1]
    assert isinstance(done, Finished)
    result = done.result
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"], result.notes
    ev = result.evidence
    assert ev is not None and ev.spread is not None and ev.band is not None  # noise estimated
    assert 2 <= len(ev.good_samples) <= 3 and 2 <= len(ev.bad_samples) <= 3
    assert len(set(ev.good_samples)) == len(ev.good_samples)  # every launch drew its own noise
    assert ev.distinguishable and "standard errors" in ev.why
    assert ev.drift is not None and ev.drift.after > ev.threshold  # the good end measured again
    # interleaved: good, bad, good, bad ... then the candidates, then the good end once more
    roles = [e.role.value for e in events if isinstance(e, TrialStarted)]
    assert roles[:4] == ["good", "bad", "good", "bad"] and roles[-1] == "drift"
    assert result.naive_launches == (len(result.knobs) + 2) * 3
