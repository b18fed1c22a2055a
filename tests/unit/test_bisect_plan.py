"""The pure search: binary search's launch bound, ddmin for interacting knobs, unresolved answers."""

from __future__ import annotations

import itertools
import math

import pytest

from specdebug.core.bisect.plan import Outcome, Plan, split


def drive(n: int, bad, *, unresolved=lambda q: False) -> tuple[Plan, list[frozenset[int]]]:
    """Run a plan against an oracle; returns the plan and the distinct queries (= launches)."""
    plan = Plan(n)
    asked: list[frozenset[int]] = []
    while not plan.done:
        q = plan.query
        assert q is not None
        if q not in asked:
            asked.append(q)
        if unresolved(q):
            plan.answer(Outcome.UNRESOLVED)
        else:
            plan.answer(Outcome.BAD if bad(q) else Outcome.GOOD)
    return plan, asked


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 16, 32])
def test_one_culprit_within_log2_plus_one(n: int) -> None:
    for culprit in range(n):
        plan, asked = drive(n, lambda q, c=culprit: c in q)
        assert plan.result.verdict == "found" and plan.result.culprits == {culprit}
        assert plan.result.search == "binary"
        launches = len([q for q in asked if len(q) < n])  # the full set is the bad end: cached
        assert launches <= math.ceil(math.log2(n)) + 1 if n > 1 else launches == 0


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8])
def test_pair_that_only_hurts_together_is_found_by_ddmin(n: int) -> None:
    for a, b in itertools.combinations(range(n), 2):
        plan, _ = drive(n, lambda q, a=a, b=b: a in q and b in q)
        assert plan.result.verdict == "found" and plan.result.culprits == {a, b}, (a, b)
        assert plan.result.search == "ddmin"


def test_no_culprit_when_all_knobs_measure_good() -> None:
    plan, asked = drive(4, lambda q: False)
    assert plan.result.verdict == "no-culprit" and asked == [frozenset(range(4))]
    assert drive(0, lambda q: True)[0].result.verdict == "no-culprit"


def test_unresolved_half_tries_the_other_half() -> None:
    # units 0..3, culprit 3; the left half {0, 1} cannot be judged (fails to start)
    plan, asked = drive(4, lambda q: 3 in q, unresolved=lambda q: q == {0, 1})
    assert plan.result.verdict == "found" and plan.result.culprits == {3}
    assert frozenset({2, 3}) in asked


def test_unresolved_everywhere_is_inconclusive() -> None:
    plan, _ = drive(3, lambda q: len(q) == 3, unresolved=lambda q: 0 < len(q) < 3)
    assert plan.result.verdict == "inconclusive"


def test_knob_states_follow_the_search() -> None:
    plan = Plan(4)
    plan.answer(Outcome.BAD)  # everything
    assert plan.stage == "binary" and plan.query == {0, 1}
    plan.answer(Outcome.GOOD)
    assert plan.suspects == {2, 3} and plan.cleared == {0, 1}


def test_split_is_even_and_complete() -> None:
    assert split([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert split([1, 2, 3], 3) == [[1], [2], [3]]
    assert split([1, 2], 5) == [[1], [2]]
