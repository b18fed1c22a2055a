"""A bisection on a contended CPU says so once per side, with how many of its runs and how much (a warning
per launch was up to two lines a launch: stop 50's note), and keeps each run's figures in its journal."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bench import cpuwait
from specdebug.core.bench.models import BenchResult
from specdebug.core.bisect import models as bm
from specdebug.core.bisect import run as bisect_run
from specdebug.core.bisect.run import Bisection
from specdebug.core.bisect.trial import take_result
from tests.unit.test_bisect_replay import NoRemote, run, session

METRIC = "output_tok_s"


@pytest.fixture(autouse=True)
def _no_box_state(box_state_dir: Path) -> None:
    return None


def test_many_runs_are_said_in_one_line_per_side_with_the_count_and_the_spread() -> None:
    [box, client] = cpuwait.over_runs([0.02, 0.43, None, 0.99], [0.5, 0.01, 0.02, 0.03], "gpubox")
    assert box.startswith("CPU contended on gpubox during 2 of 3 benchmark runs") and "43% to 99%" in box
    assert "this machine (the benchmark client) during 1 of 4 benchmark runs" in client and "50%" in client
    assert cpuwait.over_runs([0.02, None], [None], "gpubox") == []  # quiet, or not measured: nothing


def test_a_trial_keeps_the_figures_and_the_gpu_warnings_not_a_cpu_line() -> None:
    item = BenchResult(output_tok_s=90.0, box_cpu_wait=0.6, client_cpu_wait=0.02)
    item.warnings = ["GPU0 hot after the run: 91 C", *cpuwait.warnings(0.6, 0.02, "gpubox")]
    m = bm.Measurement(bisect="b", config="c", fingerprint="f", settings="s", role=bm.Role.GOOD)
    take_result(m, item)
    assert m.warnings == ["GPU0 hot after the run: 91 C"]
    assert (m.box_cpu_wait, m.client_cpu_wait) == (0.6, 0.02)


async def test_a_bisection_on_a_busy_box_says_it_once(tmp_path: Path, monkeypatch) -> None:
    journal, c = session(tmp_path, lambda names: 94.0)
    journal.path.write_text("")
    launched: list[str] = []

    async def trial(remote, spec, *, journal=None, clock=None, nodes=None):
        launched.append(spec.role.value)
        rate = 70.0 if "--disable-cuda-graph" in spec.applied or spec.role is bm.Role.BAD else 94.0
        now = 1000.0 + 60 * len(launched)
        yield bm.Measurement(
            bisect=spec.bisect, config=spec.profile.name, fingerprint=spec.fingerprint,
            settings=spec.settings.key(), role=spec.role, applied=list(spec.applied),
            metrics={METRIC: rate * (1 + 0.002 * (len(launched) % 3))}, started_at=now, finished_at=now,
            box_cpu_wait=0.5 if len(launched) % 2 else 0.03, client_cpu_wait=0.01,
        )  # fmt: skip

    monkeypatch.setattr(bisect_run, "run_trial", trial)
    options = bm.BisectOptions(metric=METRIC, max_age_s=None)
    result = await run(Bisection(NoRemote(), c.good, c.bad, options, journal=journal))
    cpu = [w for w in result.warnings if "CPU contended" in w]
    busy = (len(launched) + 1) // 2
    assert len(cpu) == 1 and f"on {NoRemote().name} during" in cpu[0] and "50%" in cpu[0], result.warnings
    assert f"during {busy} of {len(launched)} benchmark runs" in cpu[0]
