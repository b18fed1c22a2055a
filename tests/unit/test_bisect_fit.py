"""The search plus the additive fit, pure, on a fake box with seeded noise (issue 39: truthful AND cheaper
than one knob at a time).  `bisect_sim` mirrors the engine (run.py): each end once while the noise known
then tells them apart, the plan's questions (repeated while undecided), then verify.decide: the additive
fit over every reading, a repeat where it decides the most, within one knob at a time's launches.
Many seeds per shape: no wrong or partial answer with exit 0, and the launches per shape."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from specdebug.core.bisect.fit import Obs, check, fit
from specdebug.core.bisect.judge import Judge, Within
from specdebug.core.bisect.plan import Plan
from specdebug.core.bisect.rules import decided, settled
from specdebug.core.bisect.verify import budget, decide, terms_of, unresolve_rest

EXIT0 = ("found", "several", "interaction")
METRIC = "gen_throughput"
Cost = Callable[[frozenset[int]], float]


def additive(shares: dict[int, float], gap: float = 0.35) -> Cost:
    """Time per token: 1 at the good end, each culprit adding its share of a gap of `gap`."""
    return lambda q: 1.0 + gap * sum(s for u, s in shares.items() if u in q)


def bisect_sim(
    n: int, cost_of: Cost, *, noise: float, seed: int, within: float | None = 0.007, repeats: int = 4
):
    """(verdict, culprits, confirmed, launches, unresolved) of one bisection on a box whose launches
    scatter by `noise` (relative, run to run) and whose lines place each run's figure to `within`."""
    rng = random.Random(seed)
    data: dict[frozenset[int], list[tuple[float, float]]] = {}
    launches = 0
    full, good = frozenset(range(n)), frozenset()

    def measure(units: frozenset[int]) -> None:
        nonlocal launches
        launches += 1
        c = cost_of(units) * (1 + rng.gauss(0, noise))
        data.setdefault(units, []).append((1 / c, float(launches)))

    def values(units: frozenset[int]) -> list[float]:
        return [v for v, _ in data.get(units, [])]

    def judge() -> Judge:
        others = [values(u) for u in data if u not in (good, full) and len(data[u]) >= 2]
        runs = sum(len(v) for v in data.values())
        lines = [Within(within, 20)] * runs if within else []
        return Judge(METRIC, values(good), values(full), others=others, within=lines)

    for i in range(repeats):
        if i >= 2 and launches + 2 > budget(n + 4, repeats):
            break
        measure(good)
        measure(full)
        state, _, need = judge().ends()
        if i == 0 and judge().one_run_enough() or i >= 1 and state != "unresolved":
            break
        if i >= 1 and need is not None and need > 2 * repeats:
            break
    if judge().ends()[0] != "distinct":
        return "cannot-tell", frozenset(), False, launches, frozenset()
    plan = Plan(n)
    cap = budget(n + 4, repeats)
    plan.afford = lambda k: launches + k <= cap
    while not plan.done:
        ask = plan.query
        assert ask is not None
        if launches >= cap and (ask.fresh or ask.units not in data):
            plan.result = plan.stop("past one knob at a time's launches")
            break
        if ask.fresh:
            measure(good)
            plan.answer(judge().reading(values(good)[-1:]))
            continue
        u = ask.units
        if u not in data:
            measure(u)
        while len(data[u]) < repeats and launches < cap:
            r = judge().reading(values(u))
            assert r is not None
            if ask.settle:
                if settled(ask, r):
                    break
            elif decided(r, ask.parent) and not (ask.precision and r.t * r.se > ask.precision):
                break
            if u in (good, full):
                break
            measure(u)
        plan.answer(judge().reading(values(u)))
        plan.refresh({k: judge().reading(values(k)) for k in list(plan.readings) if k in data})
    res = plan.result
    assert res is not None
    if res.verdict not in EXIT0 or not res.confirmed:
        return res.verdict, res.culprits, False, launches, frozenset()
    terms, names = terms_of(plan)
    while True:
        obs = [Obs(u, 1 / v, at, within) for u, vs in data.items() for v, at in vs]
        counts = {u: len(vs) for u, vs in data.items()}
        verdict, pick = decide(
            obs, counts, terms, names, room=launches < cap, repeats=repeats, nuisance=bool(plan.unresolved)
        )
        if verdict.state == "confirmed":
            return res.verdict, res.culprits, True, launches, plan.unresolved
        if verdict.state == "unexplained" and unresolve_rest(plan, verdict.worst):
            terms, names = terms_of(plan)
            continue
        if pick is None:
            return "cannot-tell", frozenset(), False, launches, frozenset()
        measure(pick)


def tally(
    n: int, cost_of: Cost, expect: set[int], *, noise: float, seeds: int = 40, within: float | None = 0.007
):
    """(wrong or partial with exit 0, correct, launches per seed).  Correct includes "coarse": the
    culprits named are true ones and every true one not named lies in the set said unresolved."""
    bad, correct, launches = 0, 0, []
    for seed in range(seeds):
        verdict, culprits, confirmed, used, unresolved = bisect_sim(
            n, cost_of, noise=noise, seed=seed, within=within
        )
        launches.append(used)
        if verdict in EXIT0 and confirmed:
            if expect and culprits <= expect and expect - culprits <= unresolved:
                correct += 1
            else:
                bad += 1
    return bad, correct, launches


LINES = 0.027  # the sim's lines: its acceptance pattern scatters them 2.7 % per run, its launches 0.5 %


@pytest.mark.parametrize("n", [4, 8, 16])
def test_one_culprit_among_n_within_log2_n_plus_3_launches_or_one_more(n: int) -> None:
    """Issue 39's goal: one culprit among N in ceil(log2 N) + 3 launches, both ends and the confirmation
    included (was 7 / 7-9 / 8 for 4 / 8 / 16).  Met where the first knob of the last pair is the culprit;
    one more where it is the second: the culprit alone is measured (a pair that hurts only together reads
    the same on every other config) and so is the bad profile with it restored (a 10 % knob beside a
    90 % one hides behind the culprit alone: 18 of 100 partial answers without it, 1 with it)."""
    goal = math.ceil(math.log2(n)) + 3
    used = []
    for culprit in range(n):
        for seed in range(3):
            verdict, culprits, confirmed, launches, _ = bisect_sim(
                n, additive({culprit: 1.0}), noise=0.005, seed=seed, within=LINES
            )
            assert verdict == "found" and culprits == {culprit} and confirmed, (culprit, seed, verdict)
            used.append(launches)
            assert launches <= goal + 1, (culprit, launches)
    assert sum(used) / len(used) <= goal + 0.5 and min(used) == goal, used


@pytest.mark.parametrize(
    ("name", "n", "shares", "within"),
    [
        ("single-of-4", 4, {1: 1.0}, LINES),
        ("three-equal-of-4 (the NCCL vars)", 4, {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}, LINES),
        ("two-of-3", 3, {0: 0.5, 1: 0.5}, LINES),
        ("80/20-of-8", 8, {1: 0.8, 6: 0.2}, LINES),
        ("three-equal-of-4, precise lines", 4, {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}, 0.007),
        ("two-of-3, client metric", 3, {0: 0.5, 1: 0.5}, None),
    ],
)
def test_no_wrong_answer_and_no_more_launches_than_one_knob_at_a_time(name, n, shares, within) -> None:
    bad, correct, launches = tally(n, additive(shares), set(shares), noise=0.005, within=within)
    assert bad == 0, (name, bad)
    assert max(launches) <= n + 4, (name, launches)
    assert correct >= 30, (name, correct)


@pytest.mark.parametrize("gap", [0.05, 0.02, 0.0])
def test_a_small_change_under_noisy_launches_is_never_named_wrongly(gap: float) -> None:
    """The noise scenarios: a 5 % / 2 % / no change beside a neutral knob, launches scattering 5 % while
    each run's lines say 0.7 %: one run of each end looks apart by the lines; a gap under 15 % runs them
    again (Judge.one_run_enough), and nothing is named on a noise the launches did not show."""
    cost = lambda q: 1.0 + gap * (1 in q)  # noqa: E731
    bad, _correct, launches = tally(2, cost, {1} if gap else set(), noise=0.05, seeds=60)
    assert bad == 0
    assert max(launches) <= 2 + 4, launches


def test_known_limits_are_rare() -> None:
    """What the fit cannot always see, measured so that it does not grow: launches that scatter 3 % while
    their lines say 0.7 % (one neutral knob read high twice, consistently: 1 in 40), and a 10 % knob beside
    a 90 % one on the sim's lines (the rest reads 10 % of the gap, within the 15 % the confirmation allows
    as main did: named as found, explained about 90 %)."""
    bad, _, _ = tally(4, additive({2: 1.0}), {2}, noise=0.03, seeds=40)
    assert bad <= 2


@pytest.mark.parametrize("within", [LINES, 0.007])
def test_an_interaction_beside_an_additive_knob_is_found(within: float) -> None:
    """Issue 39: knobs 1 and 3 hurt only together (0.6 of the gap), knob 2 alone (0.4): all three named
    (was inconclusive after 17-18 launches: the residual never searched as a set), within one knob at a
    time's launches: the rest's knobs inside sets that showed nothing are not launched alone."""
    cost = lambda q: 1.0 + 0.35 * (0.4 * (2 in q) + 0.6 * ({1, 3} <= q))  # noqa: E731
    bad, correct, launches = tally(4, cost, {1, 2, 3}, noise=0.005, seeds=20, within=within)
    assert bad == 0 and correct == 20 and max(launches) <= 8, launches


def test_a_pair_that_hurts_only_together_within_one_knob_at_a_time() -> None:
    cost = lambda q: 1.0 + 0.35 * ({1, 3} <= q)  # noqa: E731
    bad, correct, launches = tally(4, cost, {1, 3}, noise=0.005, seeds=20, within=LINES)
    assert bad == 0 and correct == 20 and max(launches) <= 8, launches


def test_the_fit_measures_the_noise_from_replicates_the_model_predicts_equal() -> None:
    """One culprit among 4: good, bad, a half, the culprit alone and the rest: three readings predicted as
    the bad end, two as the good end: 3 dof, and no launch spent only to measure the noise."""
    obs = [Obs(frozenset(), 1.0, 1), Obs(frozenset({0, 1, 2, 3}), 1.35, 2)]
    obs += [
        Obs(frozenset({0, 1}), 1.36, 3),
        Obs(frozenset({1}), 1.345, 4),
        Obs(frozenset({0, 2, 3}), 1.005, 5),
    ]
    f = fit(obs, [frozenset({1})])
    assert f is not None and f.dof == 3 and f.effects[0] == pytest.approx(0.35, abs=0.01)
    assert check(f, ["#1"]).state == "confirmed"
    # a neutral knob named beside it: its effect is not significantly slower -> undecided, not confirmed
    obs2 = [*obs, Obs(frozenset({2}), 1.01, 6)]
    assert check(fit(obs2, [frozenset({1}), frozenset({2})]), ["#1", "#2"]).state != "confirmed"


def test_a_box_that_moves_steadily_is_drift_not_noise() -> None:
    """Every launch 4 % faster than the one before, configs with and without the culprit in turn: the
    residuals move with launch order (drift), they are not a wide noise the culprit stands in."""
    seq = [(set(), 1.0), ({0, 1, 2}, 1.35), ({0}, 1.0), ({0, 1}, 1.35), ({2}, 1.0), ({1}, 1.35)]
    seq += [({0, 2}, 1.0), ({1, 2}, 1.35)]
    obs = [Obs(frozenset(u), c * (1 - 0.04 * i), float(i)) for i, (u, c) in enumerate(seq)]
    verdict = check(fit(obs, [frozenset({1})]), ["#1"])
    assert verdict.state == "drift" and "drift, not noise" in verdict.why
    steady = [Obs(frozenset(u), c, float(i)) for i, (u, c) in enumerate(seq)]
    assert check(fit(steady, [frozenset({1})]), ["#1"]).state == "confirmed"


def test_a_knob_that_read_slower_once_by_chance_is_not_named() -> None:
    """The seen failure (was test_bisect_plan's): one knob of the rest read +15 % of the gap once on a
    busy box, then as the others; the plan no longer measures every small effect again, the fit does
    where it decides: the knob is never named with exit 0."""
    seen: dict[frozenset[int], int] = {}

    def cost(q: frozenset[int]) -> float:
        seen[q] = seen.get(q, 0) + 1
        fluke = 0.15 if q == {2} and seen[q] == 1 else 0.0
        return 1.0 + 0.35 * ((0 in q) + fluke)

    for seed in range(20):
        seen.clear()
        verdict, culprits, confirmed, _, _ = bisect_sim(4, cost, noise=0.005, seed=seed)
        assert not (verdict in EXIT0 and confirmed and 2 in culprits), (seed, verdict, culprits)


def test_a_rest_the_budget_cannot_search_is_said_unresolved_never_cleared() -> None:
    """The story's shape on a budget: three knobs of 27 % each are named; the other three read 16 %
    together and the launches left cannot resolve them: they are one unresolved set with its share,
    neither culprits nor "cleared" (the story's first run said "cleared: its set showed no effect")."""
    from types import SimpleNamespace

    from specdebug.core.bisect.judge import Reading
    from specdebug.core.bisect.outcome import effects_of

    shares = {3: 0.28, 4: 0.28, 5: 0.28}
    plan = Plan(6)
    plan.afford = lambda launches: False
    while not plan.done:
        q = plan.query
        assert q is not None
        rest = 0.16 if {0, 1, 2} <= q.units else 0.0
        plan.answer(Reading(sum(s for u, s in shares.items() if u in q.units) + rest, 0.01, 3.0, 1))
    r = plan.result
    assert r is not None and r.verdict == "several" and r.culprits == {3, 4, 5}
    assert plan.unresolved == {0, 1, 2} and any("not resolved among its knobs" in n for n in r.notes)
    units = [SimpleNamespace(name=f"k{i}", knobs=[f"k{i}"]) for i in range(6)]
    effects = effects_of(plan, SimpleNamespace(units=units))  # type: ignore[arg-type]
    assert all(effects[f"k{i}"].basis.startswith("unresolved") for i in (0, 1, 2)), effects


def story_cost(q: frozenset[int]) -> float:
    """The acceptance story's pair on the sim's cost model (time per token over the good end's): units 0-2
    the speculative flags (steps 2 -> 3, topk 1 -> 4, draft tokens 3 -> 6: partly through interactions,
    ~15 % of the gap together), 3-5 the NCCL vars (~27 % each, additive)."""
    from specdebug.sim.server.common.costmodel import SpecConfig, expected_rate

    def ms(units: frozenset[int]) -> float:
        steps, topk = (3 if 0 in units else 2), (4 if 1 in units else 1)
        tokens = steps + 1 if topk == 1 else (6 if 2 in units else 3)
        missing = sum(u in units for u in (3, 4, 5))
        return 1000 / expected_rate(SpecConfig("EAGLE3", steps, topk, tokens), nccl_missing=missing)

    return ms(q) / ms(frozenset())


@pytest.mark.parametrize(
    ("name", "cost", "noise", "least"),
    [
        # the sim's launches scatter ~0.3 % on the story's metric (output_tok_s: the story's run, 4 repeats
        # of one config); at 1 % 8 of 40 ended cannot-tell / inconclusive (was 32 of 40)
        ("the story on the sim's cost model", story_cost, 0.01, 38),
        # the rest hurting only as a set of 3 beside three additive 28 % knobs (was 16 of 40)
        (
            "the rest only together",
            lambda q: 1 + 0.35 * (0.28 * len(q & {3, 4, 5}) + 0.16 * ({0, 1, 2} <= q)),
            0.005,
            28,
        ),
    ],
)
def test_the_story_names_the_nccl_vars_beside_an_unresolved_rest(name, cost, noise, least) -> None:
    """The story needs the three NCCL vars named with their shares in fewer launches than one knob at a
    time.  A rest the search let close (within 15 % of the gap) but the fit finds beyond the noise is said
    unresolved beside them (was cannot-tell: 'a config departs from the culprits' additive fit by 13
    standard errors'); a rest of 15 % or more that the noise lets neither close nor stand apart, with no
    launch left to search it, is said unresolved too (was a fresh good end, the 10th launch, then
    inconclusive 'the confirmation is too noisy').  Never a wrong or partial answer."""
    bad, correct, launches = tally(6, cost, {3, 4, 5}, noise=noise, within=None)
    assert bad == 0, name
    assert correct >= least, (name, correct)
    assert max(launches) <= 10 and sum(launches) / len(launches) < 9.05, (name, launches)


# the CI run of 2026-12-07 (tests/real/test_bisect_real.py, the real vLLM): the good end, the bad end, the
# culprit (--speculative-config) alone, a neutral env var alone, the good end again; tok/s as read
CI_READINGS = [
    (frozenset(), 359.9),
    (frozenset({0, 1}), 90.56),
    (frozenset({0}), 103.39),
    (frozenset({1}), 302.71),
    (frozenset(), 358.0),
]
CI_LEVELS = {frozenset(): 360.0, frozenset({1}): 360.0, frozenset({0}): 103.4, frozenset({0, 1}): 90.56}


def replay_ci(
    moved_at: int, *, levels: dict[frozenset[int], float] = CI_LEVELS, cap: int = 9
) -> tuple[str, list[frozenset[int]]]:
    """The fit's repeats over the CI run's readings on a box whose level drops by the CI's 1.41x (360 ->
    255 tok/s) from launch `moved_at` on; the neutral knob (1) does nothing.  (final state, what was
    measured again, in order)"""
    data = list(CI_READINGS)
    terms, names = [frozenset({0}), frozenset({1})], ["--speculative-config", "SPECDEBUG_NEUTRAL"]
    again: list[frozenset[int]] = []
    while True:
        obs = [Obs(u, 1 / v, float(i)) for i, (u, v) in enumerate(data)]
        counts: dict[frozenset[int], int] = {}
        for u, _ in data:
            counts[u] = counts.get(u, 0) + 1
        verdict, pick = decide(obs, counts, terms, names, room=len(data) < cap, repeats=6)
        if verdict.state == "confirmed" or pick is None:
            return verdict.state, again
        again.append(pick)
        data.append((pick, levels[pick] / (1.41 if len(data) + 1 >= moved_at else 1.0)))


def test_the_fit_never_measures_one_config_twice_in_a_row() -> None:
    """CI, 2026-12-07: the fit asked the neutral knob's config twice back to back after the good end read
    360; both read 255 (the box had slowed), and the knob was named beside the culprit ("several").  Back
    to back, a box that moved lands on that config alone; alternated, on both sides of the comparison."""
    state, again = replay_ci(moved_at=6)
    assert state != "confirmed", again  # the box moved: the neutral knob is not named
    assert all(a != b for a, b in zip(again, again[1:], strict=False)), again
    assert again[0] == frozenset({1}) and again[1] == frozenset(), again  # the good end between its repeats
    # the first of the fit's picks follows the good end's drift check (the last measured), as before
    obs = [Obs(u, 1 / v, float(i)) for i, (u, v) in enumerate(CI_READINGS)]
    counts = {u: 1 for u, _ in CI_READINGS} | {frozenset(): 2}
    assert decide(obs, counts, [frozenset({0}), frozenset({1})], ["a", "b"], room=True, repeats=6)[1] == {1}


def test_a_box_that_stays_put_still_confirms_a_real_second_culprit() -> None:
    """The alternation costs no answer where there is one: the knob really slows the good end by 1.41x and
    the box does not move (the same readings as the CI run, the knob's repeats at 255 and the good end's at
    360): named, within the same budget."""
    state, again = replay_ci(moved_at=10_000, levels={**CI_LEVELS, frozenset({1}): 255.0})
    assert state == "confirmed", again
