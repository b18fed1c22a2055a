"""An end that failed to start once is launched again before the bisection believes it.

The accuracy bench caught this: the bad end's only launch failed (its box broke for a moment), the
bisection switched to start / no start, every candidate started, and it named all four knobs an
"interaction" with exit 0, "confirmed" by the good end measured again.  The box here is the journal
(every other config replayed) and a stand-in for the trial runner that answers the relaunch.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from specdebug.core.bisect import models as bm
from specdebug.core.bisect import run as bisect_run
from specdebug.core.bisect.run import Bisection
from specdebug.core.records import BisectTrialRecord
from tests.unit.test_bisect_replay import NoRemote, measured_again, run, session, slow_if


def one_failed_bad_end(journal: Any, c: Any, bisect_id: str) -> None:
    """The journal as that run left it: the bad end's measurements replaced by one failed start."""
    lines = journal.path.read_text().splitlines()
    kept = [ln for ln in lines if (json.loads(ln).get("trial") or json.loads(ln)).get("role") != "bad"]
    journal.path.write_text("\n".join(kept) + "\n")
    key = bisect_run.settings_for(c.good, bm.BisectOptions()).key()
    failed = bm.Measurement(
        bisect=bisect_id, config=c.bad.name, fingerprint=c.bad_fp, settings=key, role=bm.Role.BAD,
        status=bm.Status.FAILED_START, reason="failed to start: HTTP 500 at warmup", finished_at=time.time(),
    )  # fmt: skip
    journal.append(BisectTrialRecord(trial=failed))


async def test_a_bad_end_that_failed_once_is_launched_again(tmp_path: Path, monkeypatch) -> None:
    journal, c = session(tmp_path, slow_if("--disable-cuda-graph"))
    bisect_id = Bisection(NoRemote(), c.good, c.bad).id
    one_failed_bad_end(journal, c, bisect_id)
    launched: list[str] = []

    async def relaunch(remote, spec, *, journal=None, clock=time.time, nodes=None):
        launched.append(spec.role.value)
        now = time.time()
        yield bm.Measurement(
            bisect=spec.bisect, config=spec.profile.name, fingerprint=spec.fingerprint,
            settings=spec.settings.key(), role=spec.role, applied=list(spec.applied),
            metrics={"output_tok_s": slow_if("--disable-cuda-graph")(set(spec.applied)) if spec.role is bm.Role.CANDIDATE
                     else 60.0 * (1 + 0.002 * len(launched))}, started_at=now, finished_at=now,
        )  # fmt: skip

    monkeypatch.setattr(bisect_run, "run_trial", relaunch)
    result = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))
    # once more after the failure; not a second time: the good end journaled twice decides the gap, and
    # the fit over every reading measures the noise (issue 39: no launch only to measure it)
    assert launched[:1] == ["bad"] and "bad" not in launched[1:], launched
    assert result.metric_used == "output_tok_s"  # not start / no start on one failure
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"] and result.confirmed
    assert result.launches == len(launched) <= 2


async def test_a_bad_end_that_failed_twice_is_searched_by_start_or_no_start(tmp_path: Path) -> None:
    journal, c = session(tmp_path, lambda names: 94.0, failed={"--disable-cuda-graph"}, bad_fails=True)
    rest = {"--speculative-num-steps", "NCCL_PROTO", "--schedule-policy"}  # compared with the good end too
    measured_again(journal, c, rest, lambda names: 94.0)
    result = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))  # both ends journaled twice
    assert result.metric_used == "failed_start" and result.launches == 0
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"]


@pytest.fixture(autouse=True)
def _no_box_state(box_state_dir: Path) -> None:
    """The trial runner is a stand-in here: nothing is launched, nothing recorded on the box."""
