"""The pure search on synthetic effects (no launch): one culprit within the binary bound, additive
contributors each with its share, knobs that only hurt together (ddmin), the confirmation that
must close the gap, drift caught by the good end measured again, undecided readings -> cannot-tell."""

from __future__ import annotations

import itertools
import math

import pytest

from specdebug.core.bisect.judge import Reading
from specdebug.core.bisect.plan import Plan
from specdebug.core.bisect.rules import split

SE, T = 0.01, 3.0


def drive(n: int, effect, *, missing=lambda q: False, drift: float = 0.0, se: float = SE, se_of=None):
    """Run a plan against an oracle: `effect(units)` is the true share (`se_of(units)`: its standard
    error, else `se`); returns (plan, launches)."""
    plan = Plan(n)
    asked: list[frozenset[int]] = []
    launches = 0
    while not plan.done:
        q = plan.query
        assert q is not None
        if q.fresh or q.units not in asked:
            launches += 1
            asked.append(q.units)
        if missing(q.units):
            plan.answer(None)
            continue
        share = effect(q.units) + (drift if q.fresh or len(asked) > 3 else 0.0)
        plan.answer(Reading(share, se_of(q.units) if se_of else se, T, 1))
    return plan, launches


def single(c: int):
    return lambda q: 1.0 if c in q else 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 15, 16])
def test_one_culprit_within_log2_plus_two(n: int) -> None:
    for culprit in range(n):
        plan, launches = drive(n, single(culprit))
        r = plan.result
        assert r.verdict == "found" and r.culprits == {culprit}, r
        assert r.confirmed and r.explained.share == pytest.approx(1.0)
        # the bad end (all knobs) is cached; the confirmation is one launch
        assert launches - 1 <= (math.ceil(math.log2(n)) + 1 if n > 1 else 0) + 1


def test_three_equal_additive_knobs_are_several_each_with_its_share() -> None:
    plan, _ = drive(6, lambda q: sum(1 / 3 for u in q if u in (1, 3, 5)))
    r = plan.result
    assert r.verdict == "several" and r.culprits == {1, 3, 5}
    assert all(plan.found[u].share == pytest.approx(1 / 3) for u in (1, 3, 5))
    assert r.explained.share == pytest.approx(1.0)


def test_the_story_shape_nccl_each_a_third_of_the_rest_and_spec_flags() -> None:
    shares = {0: 0.1, 1: 0.05, 2: 0.1, 3: 0.25, 4: 0.25, 5: 0.25}
    plan, _ = drive(6, lambda q: sum(shares[u] for u in q))
    r = plan.result
    assert r.verdict == "several" and {3, 4, 5} <= r.culprits
    assert r.explained.share == pytest.approx(1.0, abs=0.06)


def test_a_small_fourth_contributor_is_named() -> None:
    shares = {1: 0.3, 2: 0.3, 4: 0.3, 6: 0.1}
    plan, _ = drive(8, lambda q: sum(shares.get(u, 0) for u in q))
    assert plan.result.verdict == "several" and plan.result.culprits == {1, 2, 4, 6}


@pytest.mark.parametrize(("n", "pair"), [(2, (0, 1)), (4, (0, 3)), (8, (2, 5)), (7, (5, 6))])
def test_pair_that_only_hurts_together_is_an_interaction(n: int, pair: tuple[int, int]) -> None:
    plan, _ = drive(n, lambda q: 1.0 if set(pair) <= q else 0.0)
    r = plan.result
    assert r.verdict == "interaction" and r.culprits == set(pair), r
    assert r.search == "split+ddmin"
    assert plan.together[frozenset(pair)].share == pytest.approx(1.0)


def test_confirmation_that_does_not_close_the_gap_searches_the_rest() -> None:
    # unit 0 carries 0.6 alone; units 2 and 3 together another 0.4 (found on the second round)
    def effect(q):
        return 0.6 * (0 in q) + 0.4 * ({2, 3} <= q)

    plan, _ = drive(4, effect)
    assert plan.result.verdict == "several" and plan.result.culprits == {0, 2, 3}, plan.result


def test_drift_makes_it_cannot_tell() -> None:
    # the box moves from the 4th launch on: the culprit alone reads +130 %, no confirmation from the
    # good side; the bad profile with it restored reads +30 %, and so does the good end again
    plan, _ = drive(8, single(6), drift=0.3)
    assert plan.result.verdict == "cannot-tell" and plan.result.drift
    # the data cannot tell a moved box from ends' first readings that were off by chance: both said
    told = [n for n in plan.result.notes if "measured again reads" in n]
    assert told and "the box drifted" in told[0] and "off by chance" in told[0] and "--repeats" in told[0]


def test_undecided_within_the_noise_is_cannot_tell() -> None:
    plan, _ = drive(3, lambda q: 1.0 if q == {0, 1, 2} else 0.5, se=0.3)
    assert plan.result.verdict == "cannot-tell"
    assert any("within the noise" in n and "runs would settle it" in n for n in plan.result.notes)


def test_knobs_that_do_nothing_are_inconclusive() -> None:
    plan, launches = drive(3, lambda q: 0.0)
    assert plan.result.verdict == "inconclusive" and launches == 1


def test_a_half_that_cannot_be_measured_is_inferred_from_the_other() -> None:
    plan, _ = drive(4, single(3), missing=lambda q: q == {0, 1})
    assert plan.result.verdict == "found" and plan.result.culprits == {3}


def test_confirmation_from_the_good_side_when_the_rest_cannot_start() -> None:
    plan, _ = drive(3, single(2), missing=lambda q: 0 in q and 2 not in q)
    r = plan.result
    assert r.verdict == "found" and r.culprits == {2}
    assert any("from the good side" in n for n in r.notes)


def test_estimate_never_below_what_is_left() -> None:
    plan = Plan(8)
    left = []
    while not plan.done:
        left.append(plan.remaining_estimate())
        q = plan.query
        plan.answer(Reading(1.0 if 5 in q.units else 0.0, SE, T, 1))
    assert left[0] >= len(left) - 1


def test_split() -> None:
    assert split([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert split([1, 2], 5) == [[1], [2]]


def test_a_noisy_half_that_reads_a_little_names_no_neutral_knob() -> None:
    """The seen failure: 15 knobs, the first half read +13 % of the gap by noise (se 7.5 %): it is
    not searched further, and no knob whose own interval includes zero is ever named a culprit."""
    plan, launches = drive(15, lambda q: 1.0 if 9 in q else (0.13 if len(q) >= 4 else -0.02), se=0.075)
    r = plan.result
    assert r.culprits == {9}, r
    # the confirmation from the bad side (the 14 others applied read +13 %, interval up to +45 %) could
    # not prove the gap closed at this noise; the culprit alone reads as the bad end (+100 %, 78 % to
    # 122 %): confirmed from the good side, with no launch more (was: inconclusive after 9 launches)
    assert r.verdict == "found" and r.confirmed and launches <= 8
    assert any("from the good side" in n for n in r.notes), r.notes


def test_a_confirmation_too_noisy_to_decide_says_so_not_that_the_gap_stays_open() -> None:
    """CI's readings: the culprit alone reads as the bad end, the rest reads +6 % of the gap with a
    99 % interval up to +39 %: the data allow both "closed" and "a third remains"; the verdict stays
    unconfirmed (exit 1) and says the confirmation is too noisy, never "the culprits do not close
    the gap"."""
    noisy_rest = Reading(0.06, 0.09, 3.7, 3)  # high = 0.06 + 3.7 * 0.09 = 0.39 > MAX_RESIDUAL_HIGH
    plan = Plan(2)
    while not plan.done:
        q = plan.query
        assert q is not None
        if q.units == frozenset({1}):  # everything but the culprit (knob 0): the confirmation
            plan.answer(noisy_rest)
        elif q.units == frozenset({0}):  # the culprit alone: too noisy to confirm from the good side
            plan.answer(Reading(1.0, 0.12, 3.7, 3))
        else:
            plan.answer(Reading(1.0 if 0 in q.units else 0.0, SE, T, 3))
    r = plan.result
    assert r.verdict == "inconclusive" and r.culprits == {0} and not r.confirmed, r
    assert any("too noisy to decide" in n and "+39%" in n for n in r.notes), r.notes
    assert not any("do not close the gap" in n or "remains with no single" in n for n in r.notes), r.notes


def test_a_knob_whose_latest_reading_is_not_slower_is_no_culprit() -> None:
    """Issue 39: `several` named two knobs whose shares were -4 % (-11 %..+2 %): read slower once,
    then, with every repeat and the noise as finally known (the engine's refresh), as the good end.
    A culprit is only what its latest reading shows significantly in the bad direction."""
    from specdebug.core.bisect.rules import direction

    plan = Plan(3)
    later = Reading(-0.04, 0.025, 2.6, 4)  # what knob 1 reads once the repeats are in

    def now(units: frozenset[int]) -> Reading:
        """Knob 2 is the culprit; knob 1's first readings came out 30 % slow, its later ones not."""
        if 2 in units:
            return Reading(1.0, SE, T, 2)
        return (
            later if 1 in units and frozenset({1}) in plan.readings else Reading(0.3 * (1 in units), SE, T, 2)
        )

    while not plan.done:
        q = plan.query
        assert q is not None
        plan.answer(now(q.units))
        plan.refresh({k: now(k) for k in plan.readings})  # as the engine does after every answer
    assert 1 in plan.found  # it was recorded on its first reading
    assert plan.result.culprits == {2} and plan.result.verdict == "found", plan.result
    assert direction(later) == "no effect" and direction(Reading(-0.3, 0.02, 3, 2)) == "helps"
    assert direction(Reading(0.3, 0.02, 3, 2)) == "hurts"


@pytest.mark.parametrize(
    ("n", "add", "pair"), [(4, 0, (1, 3)), (5, 0, (1, 3)), (5, 2, (0, 4)), (7, 6, (0, 5)), (8, 3, (1, 6))]
)
def test_an_interaction_next_to_an_additive_knob_is_found(n: int, add: int, pair: tuple[int, int]) -> None:
    """Issue 39: the pair split across the halves of the rest read 0 each; the other half, inferred
    to carry the residual, had been measured without it, and the residual was never searched as a
    set: `inconclusive`, "50% of the gap remains".  Now a measured set overrides the inference and
    the residual is searched by ddmin."""
    plan, _ = drive(n, lambda q: 0.5 * (add in q) + 0.5 * (set(pair) <= q))
    r = plan.result
    assert r.verdict == "several" and r.culprits == {add, *pair} and r.confirmed, r
    assert plan.together[frozenset(pair)].share == pytest.approx(0.5)


def _shapes(n: int):
    for a in range(n):
        yield lambda q, a=a: 1.0 * (a in q)
        for pair in itertools.combinations([u for u in range(n) if u != a], 2):
            yield lambda q, a=a, pair=pair: 0.5 * (a in q) + 0.5 * (set(pair) <= q)
    for trio in itertools.combinations(range(n), 3):
        yield lambda q, trio=trio: sum(1 / 3 for u in trio if u in q)
        yield lambda q, trio=trio: 1.0 * (set(trio) <= q)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_the_estimate_is_a_range_that_contains_what_follows(n: int) -> None:
    """Issue 39: the progress said "about 6 launch(es) left" with 18-40 left.  At every step the
    most the plan says it can still ask is at least what it then asks (one culprit, an additive knob
    beside a pair that hurts only together, three additive, three only together)."""
    for effect in _shapes(n):
        plan, highs = Plan(n), []
        while not plan.done:
            highs.append(plan.remaining_high())
            plan.answer(Reading(effect(plan.query.units), SE, T, 1))
        for i, high in enumerate(highs):
            assert len(highs) - i <= high, (n, i, highs)
            assert plan.remaining_high() == 0
