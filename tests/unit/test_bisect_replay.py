"""The engine replaying a session whose every config is already measured: no launch at all, so the
search, the judgements by hand, pause, and the verdicts can be checked without a box (the remote is
never touched; a launch would fail the test)."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from specdebug.core.bisect import models as bm
from specdebug.core.bisect.knobs import Candidates
from specdebug.core.bisect.plan import Plan
from specdebug.core.bisect.rules import PlanResult
from specdebug.core.bisect.run import Bisection, settings_for
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile_text
from specdebug.core.records import BisectTrialRecord
from tests.boxes import UntouchableBox

GOOD = """\
name = "fast"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--port", "30001", "--speculative-num-steps", "2"]
env = { NCCL_PROTO = "LL" }
"""
BAD = """\
name = "slow"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--port", "30001", "--speculative-num-steps", "3",
        "--disable-cuda-graph", "--schedule-policy", "lpm"]
"""


NoRemote = UntouchableBox  # a replay never touches the box


def session(
    tmp_path: Path,
    rate,
    *,
    failed: set[str] = frozenset(),
    options: bm.BisectOptions | None = None,
    bad_fails: bool = False,
) -> tuple[Journal, Candidates]:
    """A journal of this bisection with one measurement of every subset of knobs and two of each end
    (0.2 % apart: the noise); `rate(names)` gives its tok/s."""
    good = load_profile_text(GOOD, tmp_path / "fast.toml")
    bad = load_profile_text(BAD, tmp_path / "slow.toml")
    c = Candidates(good, bad, (options or bm.BisectOptions()).groups)
    bisect_id = Bisection(NoRemote(), good, bad, options).id
    key = settings_for(good, bm.BisectOptions()).key()
    journal = Journal(tmp_path / "session")
    units = range(len(c.units))
    now = time.time()
    for r in range(len(c.units) + 1):
        for subset in itertools.combinations(units, r):
            profile, fp = c.profile(frozenset(subset))
            names = c.knob_names(frozenset(subset))
            end = not subset or len(subset) == len(c.units)
            for run in range(2 if end else 1):
                m = bm.Measurement(
                    bisect=bisect_id,
                    config=profile.name,
                    fingerprint=fp,
                    settings=key,
                    role=bm.Role.CANDIDATE,
                    applied=names,
                    started_at=now,
                    finished_at=now,
                )
                if not subset:
                    m.role = bm.Role.GOOD
                elif len(subset) == len(c.units):
                    m.role = bm.Role.BAD
                if set(names) & failed and (
                    m.role is bm.Role.CANDIDATE or bad_fails and m.role is bm.Role.BAD
                ):
                    m.status, m.reason = bm.Status.FAILED_START, "failed to start: CUDA out of memory"
                else:
                    m.metrics = {"output_tok_s": rate(set(names)) * (1 + 0.002 * run)}
                journal.append(BisectTrialRecord(trial=m))
    return journal, c


def measured_again(journal: Journal, c: Candidates, names: set[str], rate, options=None) -> None:
    """One more journaled run of the config with these knobs applied (the noise: 0.2 % apart)."""
    units = frozenset(i for i, u in enumerate(c.units) if set(u.knobs) <= names)
    profile, fp = c.profile(units)
    good, bad = c.good, c.bad
    journal.append(
        BisectTrialRecord(
            trial=bm.Measurement(
                bisect=Bisection(NoRemote(), good, bad, options).id, config=profile.name, fingerprint=fp,
                settings=settings_for(good, bm.BisectOptions()).key(), role=bm.Role.CANDIDATE,
                applied=c.knob_names(units), started_at=time.time(), finished_at=time.time(),
                metrics={"output_tok_s": rate(names) * 1.002},
            )
        )
    )  # fmt: skip


def slow_if(*culprits: str):
    return lambda names: 60.0 if set(culprits) <= names else 94.0


async def run(engine: Bisection, on_event=None) -> bm.Result:
    async for ev in engine.events():
        if on_event is not None:
            on_event(engine, ev)
        if isinstance(ev, bm.Finished):
            return ev.result
    raise AssertionError("no Finished event")


async def test_replay_finds_the_culprit_without_a_launch(tmp_path: Path) -> None:
    journal, c = session(tmp_path, slow_if("--disable-cuda-graph"))
    engine = Bisection(NoRemote(), c.good, c.bad, journal=journal)
    result = await run(engine)
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"] and result.launches == 0
    assert result.confirmed and result.explained == pytest.approx(1.0, abs=0.01)
    assert result.effects["--disable-cuda-graph"].share == pytest.approx(1.0, abs=0.01)
    assert all(t.cached for t in result.trials) and result.naive_launches == 8
    assert journal.events({bm.RESULT_EVENT})[-1]["culprits"] == ["--disable-cuda-graph"]


async def test_replay_additive_culprits_are_several_with_their_shares(tmp_path: Path) -> None:
    def rate(names: set[str]) -> float:  # each of two knobs adds 1/2 of the time per token
        return 1 / (1 / 94 + (1 / 60 - 1 / 94) / 2 * len(names & {"NCCL_PROTO", "--disable-cuda-graph"}))

    journal, c = session(tmp_path, rate)
    result = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))
    assert result.verdict == "several" and set(result.culprits) == {"NCCL_PROTO", "--disable-cuda-graph"}
    for name in result.culprits:
        e = result.effects[name]
        assert e.share == pytest.approx(0.5, abs=0.02) and e.low < 0.5 < e.high and e.basis == "alone"
    assert result.explained == pytest.approx(1.0, abs=0.02) and result.launches == 0


async def test_no_difference_and_no_culprit(tmp_path: Path) -> None:
    journal, c = session(tmp_path, lambda names: 94.0 - len(names))  # 3 % apart: inside --min-gap
    result = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))
    assert result.verdict == "no-difference" and "--min-gap 5%" in result.notes[0]
    pair = {"--disable-cuda-graph", "NCCL_PROTO"}
    journal, c = session(tmp_path / "b", lambda names: 60.0 if pair <= names else 94.0)
    result = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))
    assert result.verdict == "interaction" and set(result.culprits) == pair  # only together
    assert all(result.effects[k].share == pytest.approx(0.0, abs=0.01) for k in pair)
    assert [s.share for s in result.sets if set(s.knobs) == pair] == [pytest.approx(1.0, abs=0.01)]


async def test_failed_start_skip_or_bad(tmp_path: Path) -> None:
    journal, c = session(tmp_path, slow_if("NCCL_PROTO"), failed={"--schedule-policy"})
    skip = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))
    assert skip.verdict == "found" and skip.culprits == ["NCCL_PROTO"]
    assert any(t.judged == "skip" and "memory" in (t.reason or "") for t in skip.trials)
    assert "could not be measured alone" not in skip.effects["NCCL_PROTO"].basis


async def test_hand_judgements_drive_the_search_and_are_journaled(tmp_path: Path) -> None:
    asked: list[list[str]] = []

    def on_event(engine: Bisection, ev) -> None:
        if isinstance(ev, bm.AwaitJudgement):
            applied = engine.book.rows[
                next(fp for fp, r in engine.book.rows.items() if r.index == ev.index)
            ].applied
            asked.append(applied)
            verdict = bm.Judged.BAD if "--disable-cuda-graph" in applied else bm.Judged.GOOD
            asyncio.get_running_loop().call_soon(engine.judge, verdict)

    # the ends differ; every candidate measures the same, so only the hand judgements decide
    journal2, c2 = session(tmp_path, lambda names: 60.0 if len(names) == 4 else 77.0)
    engine = Bisection(NoRemote(), c2.good, c2.bad, bm.BisectOptions(hand=True), journal=journal2)
    result = await run(engine, on_event)
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"] and asked
    hand = journal2.events({bm.JUDGEMENT_EVENT})
    assert len(hand) == len(asked) and {e["judged"] for e in hand} <= {"good", "bad"}
    asked.clear()
    again = Bisection(NoRemote(), c2.good, c2.bad, bm.BisectOptions(hand=True), journal=journal2)
    assert not again.book.hand  # journaled judgements by hand are never replayed as automatic
    assert (await run(again, on_event)).culprits == ["--disable-cuda-graph"] and asked
    assert not engine.judge(bm.Judged.GOOD)  # nothing waits any more


async def test_pause_holds_before_the_next_question(tmp_path: Path) -> None:
    journal, c = session(tmp_path, slow_if("--disable-cuda-graph"))
    engine = Bisection(NoRemote(), c.good, c.bad, journal=journal)
    engine.pause()
    seen: list = []

    def on_event(engine: Bisection, ev) -> None:
        seen.append(ev)
        if isinstance(ev, bm.Paused) and ev.paused:
            asyncio.get_running_loop().call_later(0.05, engine.pause, False)

    result = await asyncio.wait_for(run(engine, on_event), 60)
    paused = [e.paused for e in seen if isinstance(e, bm.Paused)]
    assert paused[:2] == [True, False] and result.verdict == "found"


@pytest.mark.parametrize("groups", [["--speculative-*", "--disable-*"]])
async def test_groups_move_together(tmp_path: Path, groups: list[str]) -> None:
    journal, c = session(tmp_path, slow_if("--disable-cuda-graph"), options=bm.BisectOptions(groups=groups))
    result = await run(Bisection(NoRemote(), c.good, c.bad, bm.BisectOptions(groups=groups), journal=journal))
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"]


async def test_a_metric_missing_from_the_results_is_a_skip_not_a_loop(tmp_path: Path) -> None:
    journal, c = session(tmp_path, slow_if("--disable-cuda-graph"))
    key = settings_for(c.good, bm.BisectOptions()).key()
    options = bm.BisectOptions(metric="verify_ms")  # only the ends' results have it
    bisect_id = Bisection(NoRemote(), c.good, c.bad, options).id
    for role, fp, value in ((bm.Role.GOOD, c.good_fp, 16.0), (bm.Role.BAD, c.bad_fp, 30.0)) * 2:
        m = bm.Measurement(
            bisect=bisect_id,
            config="e",
            fingerprint=fp,
            settings=key,
            role=role,
            metrics={"verify_ms": value},
            started_at=time.time(),
            finished_at=time.time(),
        )
        journal.append(BisectTrialRecord(trial=m))
    result = await asyncio.wait_for(run(Bisection(NoRemote(), c.good, c.bad, options, journal=journal)), 60)
    assert result.verdict == "inconclusive" and result.launches == 0
    skipped = [t for t in result.trials if t.role == "candidate"]
    assert skipped and all(t.judged == "skip" and "no verify_ms" in t.reason for t in skipped)


async def test_a_bad_end_that_does_not_start_is_searched_by_start_or_no_start(tmp_path: Path) -> None:
    journal, c = session(tmp_path, lambda names: 94.0, failed={"--disable-cuda-graph"}, bad_fails=True)
    engine = Bisection(NoRemote(), c.good, c.bad, journal=journal)
    profile, fp = c.profile(frozenset({2}))  # --schedule-policy alone: once a flaky timeout, not an exit
    flake = bm.Measurement(
        bisect=engine.id, config=profile.name, fingerprint=fp, settings=engine.settings.key(),
        role=bm.Role.CANDIDATE, applied=c.knob_names(frozenset({2})), status=bm.Status.FAILED_START,
        reason="failed to start: timed out after 60 s", finished_at=time.time(),
    )  # fmt: skip
    journal.append(BisectTrialRecord(trial=flake))
    rest = {"--speculative-num-steps", "NCCL_PROTO", "--schedule-policy"}  # the bad end without the crash
    measured_again(journal, c, rest, lambda names: 94.0)
    result = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))
    assert result.verdict == "found" and result.culprits == ["--disable-cuda-graph"] and result.confirmed
    assert result.metric_used == "failed_start" and result.launches == 0
    assert any("does not start" in n and "memory" in n for n in result.notes)  # with the failure reason
    # the bad profile without the crash's knob was compared with the good end by the metric: the same
    assert any("without --disable-cuda-graph (it starts) measures as the good end" in n for n in result.notes)


async def test_a_slowdown_behind_a_crash_is_reported_with_it(tmp_path: Path) -> None:
    """Issue 39: the bad profile minus the crash's knob read 25 % slower, and the result said "the
    culprits explain 100%" with the crash's knob alone.  Now the start failure's culprits and the
    slowdown's come in one answer, each from its own search."""
    rate = slow_if("--schedule-policy")
    journal, c = session(tmp_path, rate, failed={"--disable-cuda-graph"}, bad_fails=True)
    rest = {"--speculative-num-steps", "NCCL_PROTO", "--schedule-policy"}
    measured_again(journal, c, rest, rate)
    result = await run(Bisection(NoRemote(), c.good, c.bad, journal=journal))
    assert result.verdict == "several" and result.confirmed and result.launches == 0, result.notes
    assert result.culprits == ["--disable-cuda-graph", "--schedule-policy"]
    assert result.effects["--schedule-policy"].direction == "hurts"
    assert result.effects["--speculative-num-steps"].direction in ("no effect", "")
    assert any("is slower than the good end" in n for n in result.notes)


async def test_journal_records_of_another_bisection_or_stale_are_not_replayed(tmp_path: Path) -> None:
    journal, c = session(tmp_path, slow_if("--disable-cuda-graph"))
    forged = bm.Measurement(
        bisect="someone-else", config="x", fingerprint=c.profile(frozenset({0}))[1], settings="s",
        role=bm.Role.CANDIDATE, metrics={"output_tok_s": 1.0}, finished_at=time.time(),
    )  # fmt: skip
    settings = settings_for(c.good, bm.BisectOptions()).key()
    journal.append(BisectTrialRecord(trial=forged.model_copy(update={"settings": settings})))
    wrong = forged.model_copy(
        update={"bisect": Bisection(NoRemote(), c.good, c.bad).id, "applied": ["NCCL_PROTO"]}
    )
    settings = settings_for(c.good, bm.BisectOptions()).key()
    journal.append(BisectTrialRecord(trial=wrong.model_copy(update={"settings": settings})))
    engine = Bisection(NoRemote(), c.good, c.bad, journal=journal)
    assert engine.book.dropped == {
        "written by another bisection": 1,
        "its knobs do not give its fingerprint": 1,
    }
    result = await run(engine)
    assert result.culprits == ["--disable-cuda-graph"]
    assert any("not replayed: written by another bisection" in n for n in result.notes)
    later = Bisection(NoRemote(), c.good, c.bad, journal=journal, clock=lambda: time.time() + 1200)
    assert not later.book.cache and later.book.dropped["older than --max-age 900 s"] > 0


async def test_a_box_that_speeds_up_steadily_is_drift_not_noise(tmp_path: Path) -> None:
    """Issue 39: both ends' readings rose steadily (the box sped up during the run) and the result
    said the ends were within the noise, "about 4 runs of each end would settle it".  A steady move
    of both ends with time is drift: said so, and no more runs of the ends are spent on it."""
    good = load_profile_text(GOOD, tmp_path / "fast.toml")
    bad = load_profile_text(BAD, tmp_path / "slow.toml")
    engine = Bisection(NoRemote(), good, bad)
    c, key, t0 = engine.cands, engine.settings.key(), time.time() - 600
    journal = Journal(tmp_path / "session")
    for n, (fp, role, value) in enumerate(
        [(c.good_fp, bm.Role.GOOD, 100.0), (c.bad_fp, bm.Role.BAD, 82.0)] * 2
    ):
        value += 4.0 * (n // 2) + 2.0 * (n % 2)  # +2 tok/s a launch, whichever end
        m = bm.Measurement(
            bisect=engine.id, config=good.name if role is bm.Role.GOOD else bad.name, fingerprint=fp,
            settings=key, role=role, metrics={"output_tok_s": value}, started_at=t0 + 60 * n,
            finished_at=t0 + 60 * n + 30,
        )  # fmt: skip
        journal.append(BisectTrialRecord(trial=m))
    result = await run(Bisection(NoRemote(), good, bad, journal=journal))
    assert result.verdict == "cannot-tell" and result.launches == 0, result.notes
    said = " ".join(result.notes)
    assert "the box drifted" in said and "faster with time" in said and "not noise" in said, said
    assert "would settle it" not in said


def test_knobs_of_a_set_said_unresolved_are_shown_unresolved_not_cleared(tmp_path: Path) -> None:
    """A culprit named beside a set the budget left unresolved (its share said, its knobs neither named
    nor cleared): the Bisect pane's knob table said "cleared" for that set's knobs."""
    _journal, c = session(tmp_path, slow_if("--disable-cuda-graph"))
    engine = Bisection(NoRemote(), c.good, c.bad)
    index = {u.name: i for i, u in enumerate(c.units)}
    engine.plan = Plan(len(c.units))
    engine.plan.result = PlanResult("found", frozenset({index["--disable-cuda-graph"]}), confirmed=True)
    engine.plan.unresolved = frozenset({index["NCCL_PROTO"], index["--schedule-policy"]})
    states = engine._states().states  # noqa: SLF001  (what the engine's KnobStates event carries)
    assert states["--disable-cuda-graph"] == "culprit"
    assert states["NCCL_PROTO"] == states["--schedule-policy"] == "unresolved"
    assert states["--speculative-num-steps"] == "cleared"
    engine.plan.result.confirmed = False  # an answer that does not stand says nothing unresolved
    assert engine._states().states["NCCL_PROTO"] == "cleared"  # noqa: SLF001
