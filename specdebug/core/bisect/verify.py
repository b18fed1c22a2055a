"""The last word before a culprit is named: the additive fit over every reading of this run (fit.py).

The search runs on the noise known while it runs (the server's per-step lines, or a prior while nothing
is measured: the ends are measured once each), which a box whose launches scatter more than its lines
would fool.  So no answer with exit 0 stands on it: every measurement of this run is explained by the good
end plus the named culprits' effects, the residuals of the configs the model predicts equal measure the
run-to-run noise, and the culprits stand only when each is significantly slower at 99 % for those dof,
and every reading lies within that noise of the fit.  While it cannot decide, one config is measured
again: the one whose repeat makes the weakest culprit most certain (fit.best_repeat; never the config
measured last while another can run, so that a box that moves shows on both sides), within a launch
budget (one knob at a time's launches, more with --repeats); past it, cannot-tell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specdebug.core.bisect.book import Book
from specdebug.core.bisect.fit import Fit, Obs, Verdict, best_repeat, check, fit
from specdebug.core.bisect.judge import LINES_SUFFIX, SE_SUFFIX, Judge
from specdebug.core.bisect.knobs import Candidates
from specdebug.core.bisect.models import Evidence, Status
from specdebug.core.bisect.plan import Plan

DEFAULT_REPEATS = 4  # BisectOptions.repeats' default: the budget grows with a larger one


def terms_of(plan: Plan) -> tuple[list[frozenset[int]], list[str]]:
    """The fit's terms: each culprit found alone, and each set that hurts only together (one term)."""
    res = plan.result
    culprits = res.culprits if res is not None else frozenset()
    together = [s for s in plan.together if s <= culprits]
    alone = sorted(u for u in culprits if not any(u in s for s in together))
    terms = [frozenset({u}) for u in alone] + together
    if plan.unresolved:
        terms.append(plan.unresolved)  # a nuisance term: its share is said, not tested as a culprit's
    names = ["+".join(plan.name(u) for u in sorted(t)) for t in terms]
    return terms, names


def unresolve_rest(plan: Plan, worst: frozenset[int] | None) -> bool:
    """The fit finds the bad profile with the culprits restored (the rest) off the culprits' model, beyond
    the noise, where the search took it to close the gap: the rest is said as one unresolved set beside
    the culprits (its share said, its knobs not blamed) and the fit decides again with it as a nuisance
    term.  (The story: the speculative flags read 13 % of the gap, within the 15 % the search lets
    close; the fit saw them 13 standard errors off and the run ended cannot-tell after 9 launches.)"""
    res = plan.result
    if res is None or plan.unresolved or not res.culprits:
        return False
    rest = frozenset(range(plan.n)) - res.culprits
    reading = plan.readings.get(rest)
    if not rest or worst != rest or reading is None:
        return False
    plan.unresolved = rest
    res.notes.append(
        f"the rest ({', '.join(plan.name(u) for u in sorted(rest))}) together reads {reading.share:.0%} of the gap "
        f"({reading.low:.0%} to {reading.high:.0%} at 99 %), beyond the noise of the culprits' additive fit: "
        "not resolved among its knobs"
    )
    return True


def plan_units(
    fp: str, book: Book, cands: Candidates, units_map: Sequence[int], bad_fp: str
) -> frozenset[int] | None:
    """The plan's units that this measured config applies (None: not a config of this search: the
    crash's knobs, another phase)."""
    if fp == cands.good_fp:
        return frozenset()
    if fp == bad_fp:
        return frozenset(range(len(units_map)))
    if (
        fp == cands.bad_fp
    ):  # the bad end that does not start (the search behind the crash): not a config of it
        return None
    ms = book.cache.get(fp, [])
    if not ms:
        return None
    applied = set(ms[-1].applied)
    real = frozenset(i for i, u in enumerate(cands.units) if set(u.knobs) <= applied)
    if set(cands.knob_names(real)) != applied or not real <= set(units_map) or cands.profile(real)[1] != fp:
        return None
    index = {r: i for i, r in enumerate(units_map)}
    return frozenset(index[r] for r in real)


def observations(
    book: Book, cands: Candidates, units_map: Sequence[int], judge: Judge, bad_fp: str
) -> tuple[list[Obs], dict[frozenset[int], int]]:
    """Every measurement of this search with a figure, as (units, cost, when, within-run se); and how
    many times each config was measured."""
    metric = book.options.metric
    obs: list[Obs] = []
    counts: dict[frozenset[int], int] = {}
    for fp, ms in book.cache.items():
        units = plan_units(fp, book, cands, units_map, bad_fp)
        if units is None:
            continue
        for m in ms:
            value = book.metric(m)
            if value is None or m.status is not Status.OK or not value:
                continue
            se = m.metrics.get(metric + SE_SUFFIX)
            lines = m.metrics.get(metric + LINES_SUFFIX, 0)
            within = se / abs(value) if se is not None and lines > 2 else None
            obs.append(Obs(units, judge.cost(value), m.finished_at, within))
            counts[units] = counts.get(units, 0) + 1
    return obs, counts


def budget(naive: int, repeats: int) -> int:
    """Launches the check may bring the run to: one knob at a time's, scaled by a --repeats above the default."""
    return max(naive, naive * repeats // DEFAULT_REPEATS)


def decide(
    obs: Sequence[Obs],
    counts: dict[frozenset[int], int],
    terms: Sequence[frozenset[int]],
    names: Sequence[str],
    *,
    room: bool,
    repeats: int,
    nuisance: bool = False,
) -> tuple[Verdict, frozenset[int] | None]:
    """The fit's verdict on the named terms, and the config to measure again (None: decided, or no room
    left: `room` is False once the launch budget is spent, or no config may run again under --repeats)."""
    if nuisance:  # readings of a part of the unresolved rest say what lies within it: no claim is made there
        rest = terms[-1]
        obs = [o for o in obs if not o.units & rest or rest <= o.units]
        counts = {u: n for u, n in counts.items() if not u & rest or rest <= u}
    found = fit(obs, terms)
    verdict = check(found, names, nuisance=len(terms) - 1 if nuisance else None)
    candidates = [u for u, n in counts.items() if n < repeats]
    if verdict.state == "unexplained" and room and verdict.worst in candidates:
        # a config off the fit: measured again, it either reproduces (something the culprits do not
        # explain) or was a fluke (and the repeats measure the run-to-run noise, model or not)
        return verdict, verdict.worst
    if verdict.state != "undecided" or not room:
        return verdict, None
    if found is None:
        return verdict, next((u for u in candidates if not u), None)
    return verdict, best_repeat(found, not_again(candidates, obs))


def not_again(candidates: Sequence[frozenset[int]], obs: Sequence[Obs]) -> list[frozenset[int]]:
    """The candidates for a repeat without the config measured last, where another is left.  Repeats of one
    config back to back put whatever changed on the box meanwhile (a tenant, a clock) on that config alone:
    a neutral knob read 303, 254, 257 tok/s, its last two after the good end's 360 and one after another,
    and the fit named it (CI, 2026-12-07).  Alternated, a box that moved lands on both sides of the
    comparison and shows as noise, or as drift."""
    if not obs:
        return list(candidates)
    last = max(obs, key=lambda o: o.at).units
    others = [u for u in candidates if u != last]
    return others or list(candidates)


def drifted(obs: Sequence[Obs], terms: Sequence[frozenset[int]]) -> str | None:
    """For an answer the search could not confirm: do the readings move steadily with launch order
    beyond what the named culprits explain?  (Then it is drift, and said so.)"""
    found = fit(obs, terms)
    if found is None:
        return None
    verdict = check(found, ["?"] * len(terms))
    return verdict.why if verdict.state == "drift" else None


def ends_by_fit(evidence: Evidence, found: Fit) -> None:
    """The ends as the confirmed fit over every reading judges them, where their own runs alone fall short.

    The ends are measured once each and judged on the noise known then; a noise measured later from a
    few repeats (t99 at 2 dof is 9.9) can leave their own runs short of 99 % while the fit, whose
    replicates are every config the model predicts equal, proves the gap.  The answer names culprits on
    the fit, so the evidence says the ends are apart on it too, and says both figures (a found culprit
    beside "the ends are within the noise" was the CI failure of 2026-12-06)."""
    if evidence.distinguishable:
        return
    se = found.gap_se()
    z = found.gap / se if se > 0 else math.inf
    if found.gap <= 0 or z < found.t:
        return
    evidence.distinguishable = True
    evidence.why += (
        f"; apart by the additive fit over every reading ({len(found.obs)}): {z:.1f} standard errors "
        f"(noise {found.sd:.1%} per run, {found.dof} dof; needs {found.t:.1f} at 99 %)"
    )
