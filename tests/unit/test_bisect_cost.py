"""Launches that decide nothing are not made (issue 39): the culprit's own reading is the confirmation,
the other half's share is inferred, ends whose settling is far beyond --repeats stop repeating; and a
set is an interaction only when each part short of one knob reads clearly less than it."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bisect import models as bm
from specdebug.core.bisect import run as bisect_run
from specdebug.core.bisect.run import Bisection
from tests.unit.test_bisect_plan import drive, single
from tests.unit.test_bisect_replay import NoRemote, run, session


def test_the_rest_is_measured_once_beside_the_culprit_alone() -> None:
    """One culprit among 4: every knob applied (the bad end), a half, a quarter, the culprit alone, and
    the bad profile with it restored, once: the culprit alone reading as the bad end hid a 10 % knob
    beside a 90 % one (test_bisect_fit's 90/10 shape); the rest measures what is left directly."""
    plan, launches = drive(4, single(1))
    r = plan.result
    assert r.verdict == "found" and r.culprits == {1} and r.confirmed, r
    assert launches == 5 and frozenset({0, 2, 3}) in plan.readings


def test_the_other_half_of_a_split_effect_is_inferred_not_launched() -> None:
    """Three equal additive knobs among 4: the first half reads a third, so the other half carries two
    thirds (shares add): its knobs are measured alone, the half itself is not (was 7 questions, now 6)."""
    plan, launches = drive(4, lambda q: sum(1 / 3 for u in q if u in (1, 2, 3)))
    r = plan.result
    assert r.verdict == "several" and r.culprits == {1, 2, 3} and r.confirmed, r
    assert frozenset({2, 3}) not in plan.readings
    assert launches == 6


def test_a_set_within_the_noise_of_one_part_is_not_an_interaction() -> None:
    """The noise scenario's failure: the rest read +30 % of the gap, one knob of it +23 % (not
    significant) and the other nothing; delta debugging named both "together".  A part of the set
    within the noise of the set's effect is undecided: cannot-tell, no neutral knob named."""

    def effect(q: frozenset[int]) -> float:
        return 0.7 * (0 in q) + (0.3 if {1, 2} <= q else 0.23 if 2 in q else -0.02 if 1 in q else 0.0)

    plan, _ = drive(3, effect, se=0.08)
    r = plan.result
    assert not plan.together and 1 not in r.culprits, r
    assert r.verdict == "cannot-tell", r


async def test_ends_whose_settling_is_far_beyond_the_repeats_stop_repeating(
    tmp_path: Path, monkeypatch
) -> None:
    """Ends 0.5 % apart with 2 % run-to-run noise: about 30 runs of each would settle it, far beyond
    --repeats 4; after two of each the bisection says so (was: 8 launches to the same answer)."""
    journal, c = session(tmp_path, lambda names: 94.0)
    journal.path.write_text("")  # nothing measured yet
    # no trend with time (a steady one is drift, said otherwise): good falls, bad rises, 0.5 % apart
    values = {"good": iter([95.0, 93.0, 94.8, 93.2]), "bad": iter([93.4, 95.6, 93.6, 95.4])}
    launched: list[str] = []

    async def trial(remote, spec, *, journal=None, clock=None, nodes=None):
        launched.append(spec.role.value)
        now = 1000.0 + 60 * len(launched)
        yield bm.Measurement(
            bisect=spec.bisect, config=spec.profile.name, fingerprint=spec.fingerprint,
            settings=spec.settings.key(), role=spec.role, applied=list(spec.applied),
            metrics={"output_tok_s": next(values[spec.role.value])}, started_at=now, finished_at=now,
        )  # fmt: skip

    monkeypatch.setattr(bisect_run, "run_trial", trial)
    options = bm.BisectOptions(max_age_s=None)
    result = await run(Bisection(NoRemote(), c.good, c.bad, options, journal=journal))
    assert result.verdict == "cannot-tell" and launched == ["good", "bad", "good", "bad"], (result, launched)
    assert any("runs of each end would settle it" in n for n in result.notes), result.notes


@pytest.fixture(autouse=True)
def _no_box_state(box_state_dir: Path) -> None:
    """The trial runner is a stand-in here: nothing is launched, nothing recorded on the box."""


def test_a_small_set_is_searched_one_knob_at_a_time_until_its_effect_is_explained() -> None:
    """Issue 39: several culprits among a few knobs cost more launches than one knob at a time (a half,
    then its members).  A set of 3 is measured knob by knob; once the members measured explain its
    effect, the rest is cleared unmeasured (shares add): two culprits of 3 in 2 questions and the
    confirmation besides the bad end (was 4), one culprit in the middle of 3 in 2, its own reading the
    confirmation (was 3); the bad profile with it restored is measured once more (the rest)."""
    plan, launches = drive(3, lambda q: 0.5 * (0 in q) + 0.5 * (1 in q))
    r = plan.result
    assert r.verdict == "several" and r.culprits == {0, 1} and r.confirmed, r
    assert frozenset({0, 1}) not in plan.readings and launches == 4
    plan, launches = drive(3, single(1))
    assert plan.result.culprits == {1} and plan.result.confirmed and launches == 4  # the rest, once
    assert frozenset({2}) not in plan.readings


async def test_the_confirmation_stops_repeating_once_it_closes_the_gap(tmp_path: Path, monkeypatch) -> None:
    """Issue 39: the bad profile with the culprits restored was measured 3-4 times after one reading
    already closed the gap within the bounds (a fixed width asked of it).  A sequential test: once it
    reads as the good end within them (or clearly does not), it stops."""
    journal, c = session(tmp_path, lambda names: 94.0)
    journal.path.write_text("")
    culprits = {"NCCL_PROTO", "--speculative-num-steps"}
    launched: list[tuple[str, ...]] = []
    wobble = iter([0.8, 0.8, -0.8, -0.8] + [0.0] * 40)  # the ends scatter, the rest reads true

    async def trial(remote, spec, *, journal=None, clock=None, nodes=None):
        launched.append(tuple(spec.applied) if spec.role is bm.Role.CANDIDATE else (spec.role.value,))
        hit = (
            len(culprits & set(spec.applied))
            if spec.role is bm.Role.CANDIDATE
            else 2 * (spec.role is bm.Role.BAD)
        )
        rate = 1 / (1 / 94 + (1 / 60 - 1 / 94) / 2 * hit) * (1 + next(wobble) / 100)
        now = 1000.0 + 60 * len(launched)
        yield bm.Measurement(
            bisect=spec.bisect, config=spec.profile.name, fingerprint=spec.fingerprint,
            settings=spec.settings.key(), role=spec.role, applied=list(spec.applied),
            metrics={"output_tok_s": rate}, started_at=now, finished_at=now,
        )  # fmt: skip

    monkeypatch.setattr(bisect_run, "run_trial", trial)
    result = await run(
        Bisection(NoRemote(), c.good, c.bad, bm.BisectOptions(max_age_s=None), journal=journal)
    )
    assert result.verdict == "several" and set(result.culprits) == culprits and result.confirmed, result
    rest = [a for a in launched if a and not culprits & set(a) and a not in (("good",), ("bad",))]
    assert rest and all(rest.count(a) == 1 for a in rest), launched
