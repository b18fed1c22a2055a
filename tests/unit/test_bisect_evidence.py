"""A culprit named with exit 0 never stands beside ends said to be within the noise (CI, 2026-12-06).

The ends are measured once each and judged on the noise known then; three repeats of a harmless knob
later measure the run-to-run noise from 2 dof (t99 9.9), and the ends' own 1+1 runs fall short of it,
while the additive fit over every reading (4 dof: every config the model predicts equal) proves the gap
and confirms the culprit.  The evidence says both figures, and that the ends are apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bisect import models as bm
from specdebug.core.bisect import run as bisect_run
from specdebug.core.bisect.run import Bisection
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile_text
from tests.boxes import UntouchableBox
from tests.unit.test_bisect_replay import run

GOOD = 'name = "fast"\n[server]\nargv = ["python3", "-m", "sglang.launch_server", "--port", "30001"]\n'
BAD = (
    'name = "slow"\n[server]\nargv = ["python3", "-m", "sglang.launch_server", "--port", "30001",'
    ' "--disable-cuda-graph", "--schedule-policy", "lpm"]\n'
)
# one seeded run of the noise scenario's shape (the culprit +35 % time per token, 3 % per launch)
READINGS = {
    "good": [88.3752],
    "bad": [66.0247],
    "--disable-cuda-graph": [68.1039],
    "--schedule-policy": [84.8374, 94.525, 89.8986],
}


async def test_a_found_culprit_has_ends_proven_apart(tmp_path: Path, monkeypatch) -> None:
    good = load_profile_text(GOOD, tmp_path / "fast.toml")
    bad = load_profile_text(BAD, tmp_path / "slow.toml")
    left = {k: iter(v) for k, v in READINGS.items()}
    launched = 0

    async def trial(remote, spec, *, journal=None, clock=None, nodes=None):
        nonlocal launched
        launched += 1
        key = spec.role.value if spec.role is not bm.Role.CANDIDATE else "+".join(spec.applied)
        now = 1000.0 + 60 * launched
        yield bm.Measurement(
            bisect=spec.bisect, config=spec.profile.name, fingerprint=spec.fingerprint,
            settings=spec.settings.key(), role=spec.role, applied=list(spec.applied),
            metrics={"output_tok_s": next(left[key])}, started_at=now, finished_at=now,
        )  # fmt: skip

    monkeypatch.setattr(bisect_run, "run_trial", trial)
    options = bm.BisectOptions(repeats=3, max_age_s=None)
    result = await run(Bisection(UntouchableBox(), good, bad, options, journal=Journal(tmp_path / "s")))
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"], result
    ev = result.evidence
    assert ev is not None and ev.noise_dof == 2 and "needs 9.9 at 99 %" in ev.why  # the ends alone: short
    assert ev.distinguishable and "apart by the additive fit over every reading (6)" in ev.why, ev.why


@pytest.fixture(autouse=True)
def _no_box_state(box_state_dir: Path) -> None:
    """The trial runner is a stand-in here: nothing is launched, nothing recorded on the box."""
