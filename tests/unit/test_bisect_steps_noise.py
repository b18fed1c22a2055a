"""The server's own per-step figure as a run's noise (issue 39: "where the server reports its own per-step
figure with less noise than the client, use it to decide and say so"), and why it does not decide alone.

The noise of one run is the standard error of the mean of the server's log lines within it (its
generation tok/s every few decode steps); repeats, once there, measure the run-to-run noise itself and
win.  Each end runs once when they are 15 % apart or more by the noise known then; the additive fit over
every reading of the run measures the run-to-run noise before any culprit is named (verify.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bench.serverlog import busy_lines, mean_se, server_metrics
from specdebug.core.bisect import models as bm
from specdebug.core.bisect import run as bisect_run
from specdebug.core.bisect.judge import Judge, Within
from specdebug.core.bisect.run import Bisection
from tests.unit.test_bisect_replay import NoRemote, run, session

METRIC = "gen_throughput"


def test_ends_many_noise_widths_apart_after_one_run_each_are_decided() -> None:
    """94 vs 70 tok/s, each run's lines placing its mean to 0.3 %: one run of each decides."""
    judge = Judge(METRIC, [94.0], [70.0], within=[Within(0.003, 12), Within(0.003, 12)])
    state, why, _ = judge.ends()
    assert state == "distinct" and judge.decisive(), why
    assert "per-step figure" in why and "log lines" in why, why


def test_one_run_each_is_not_enough_on_the_floor_or_on_noisy_lines() -> None:
    """No per-step figure: the noise is not measured (a floor), so the ends run twice.  Lines that
    scatter 3.5 % per run (the sim's acceptance pattern) cannot place a config to a fifth of the gap."""
    assert not Judge(METRIC, [94.0], [70.0]).decisive()
    assert not Judge(METRIC, [94.0], [70.0], within=[Within(0.035, 12), Within(0.035, 12)]).decisive()
    # close ends: distinct, perhaps, but not by twice the margin
    assert not Judge(METRIC, [94.0], [92.0], within=[Within(0.003, 12), Within(0.003, 12)]).decisive()


def test_repeats_win_over_the_lines() -> None:
    """Once a config is measured twice its run-to-run spread is the noise, whatever the lines say: a box
    that moves between launches more than within one is not hidden by quiet lines."""
    judge = Judge(METRIC, [94.0, 90.0], [70.0, 72.0], within=[Within(0.003, 12)] * 4)
    assert judge.noise.source == "runs" and judge.rel > 0.02


def test_the_real_tiers_ends_still_read_distinct() -> None:
    """The real vLLM tier's client readings (speculation 415-440 tok/s, none 79-106), no per-step figure:
    distinct as before (the log-space test that called them so once and lost the planner stays out)."""
    judge = Judge("output_tok_s", [415.0, 440.0, 428.0], [79.0, 106.0, 92.0])
    assert judge.ends()[0] == "distinct" and judge.noise.source == "runs"
    assert judge.classify([95.0]) == "bad" and judge.classify([430.0]) == "good"


def test_a_line_over_an_idle_gap_is_neither_the_runs_rate_nor_its_noise() -> None:
    """SGLang's gen throughput line after a pause between two requests reads the idle time (7.5 beside
    59-74 tok/s, by how long the client paused: the sim's figure moved 1-2 % between identical runs)."""
    lines = [74.07, 66.67, 74.07, 59.26, 74.07, 74.07, 7.54, 74.07, 66.67, 74.07, 59.26, 74.07]
    busy = busy_lines(lines)
    assert 7.54 not in busy and len(busy) == len(lines) - 1
    se = mean_se(busy)
    assert se is not None and se < 2.0
    assert mean_se([74.0, 70.0]) is None and busy_lines([7.0, 70.0]) == [7.0, 70.0]
    text = "".join(
        f"[2026-01-01 00:00:0{i}] Decode batch. #running-req: 1, #token: 9, gen throughput (token/s): {x:.2f}\n"
        for i, x in enumerate([7.0, 94.0, 93.0, 9.0, 95.0, 94.0])
    )
    metrics, _ = server_metrics(text.encode(), {}, "sglang")
    assert metrics.gen_throughput == pytest.approx(94.0) and metrics.se["gen_throughput"] < 1.0


async def engine_run(tmp_path: Path, monkeypatch, rate_of, lines_se: float) -> tuple[bm.Result, list[str]]:
    journal, c = session(tmp_path, lambda names: 94.0)
    journal.path.write_text("")
    launched: list[str] = []

    async def trial(remote, spec, *, journal=None, clock=None, nodes=None):
        launched.append(spec.role.value)
        rate = rate_of(spec, len(launched))
        now = 1000.0 + 60 * len(launched)
        yield bm.Measurement(
            bisect=spec.bisect, config=spec.profile.name, fingerprint=spec.fingerprint,
            settings=spec.settings.key(), role=spec.role, applied=list(spec.applied),
            metrics={METRIC: rate, f"{METRIC}.se": rate * lines_se, f"{METRIC}.lines": 14.0},
            started_at=now, finished_at=now,
        )  # fmt: skip

    monkeypatch.setattr(bisect_run, "run_trial", trial)
    options = bm.BisectOptions(metric=METRIC, max_age_s=None)
    result = await run(Bisection(NoRemote(), c.good, c.bad, options, journal=journal))
    return result, launched


def slow(spec: bm.TrialSpec) -> bool:
    return "--disable-cuda-graph" in spec.applied or spec.role is bm.Role.BAD


async def test_each_end_runs_once_and_the_fit_measures_the_noise(tmp_path: Path, monkeypatch) -> None:
    """Issue 39: the ends ran twice before any knob, only to measure the noise.  94 vs 70 tok/s, lines at
    0.3 %: one run of each, then the knobs; the fit over every reading (replicates the model predicts
    equal) measures the run-to-run noise before the culprit is named, and says so."""
    result, launched = await engine_run(
        tmp_path, monkeypatch, lambda spec, n: (70.0 if slow(spec) else 94.0) * (1 + 0.002 * (n % 2)), 0.003
    )
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"] and result.confirmed, (
        result
    )
    assert launched[:3] == ["good", "bad", "candidate"] and launched.count("good") == 1, launched
    assert result.launches < result.naive_launches
    assert any("additive fit" in n and "dof" in n for n in result.notes), result.notes


async def test_launches_noisier_than_their_lines_name_nothing_on_the_lines(
    tmp_path: Path, monkeypatch
) -> None:
    """The launch-to-launch noise the lines cannot see (the sim's --noise 0.05: lines at 0.3 %, launches
    5 %) beside a 3 % change: a gap under 15 % runs the ends again, and no culprit is named on the lines."""
    import random

    rng = random.Random(7)
    result, launched = await engine_run(
        tmp_path,
        monkeypatch,
        lambda spec, n: (91.0 if slow(spec) else 94.0) * (1 + rng.gauss(0, 0.05)),
        0.003,
    )
    assert not (result.verdict in ("found", "several", "interaction") and result.confirmed), result
    assert launched[:4] == ["good", "bad", "good", "bad"] or result.verdict == "no-difference", launched


@pytest.fixture(autouse=True)
def _no_box_state(box_state_dir: Path) -> None:
    """The trial runner is a stand-in here: nothing is launched, nothing recorded on the box."""


async def test_a_box_that_speeds_up_names_nothing_and_claims_no_share(tmp_path: Path, monkeypatch) -> None:
    """Issue 39's box that speeds up during the run (every launch 4 % faster): no culprit with exit 0, and
    no "the culprits explain 174 % of the gap" beside a verdict that names none (the bench's note)."""
    result, _ = await engine_run(
        tmp_path, monkeypatch, lambda spec, n: (70.0 if slow(spec) else 94.0) * (1 + 0.04 * n), 0.003
    )
    assert not (result.verdict in ("found", "several", "interaction") and result.confirmed), result
    if not result.culprits:
        assert result.explained is None, result
        assert not any(n.startswith("confirmation: the culprits explain") for n in result.notes), result.notes
