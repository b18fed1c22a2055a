"""From the plan's readings to what the result says: each knob's effect and every measured set's.

Pure.  A knob's effect is its own measurement alone when there is one (the share of the gap it
shows, low/high at 99 % from the noise); otherwise the result says why there is none (cleared with
the set it was in, or inferred but not measurable alone), never a number it did not measure.
"""

from __future__ import annotations

from specdebug.core.bisect.book import Book
from specdebug.core.bisect.judge import Reading
from specdebug.core.bisect.knobs import Candidates
from specdebug.core.bisect.models import Effect, SetEffect
from specdebug.core.bisect.plan import Plan
from specdebug.core.bisect.rules import PlanResult, direction


def _effect(r: Reading, basis: str) -> Effect:
    return Effect(
        share=round(r.share, 4),
        low=round(r.low, 4),
        high=round(r.high, 4),
        basis=basis,
        runs=r.n,
        direction=direction(r),  # type: ignore[arg-type]
    )


def effects_of(plan: Plan, cands: Candidates, units_map: list[int] | None = None) -> dict[str, Effect]:
    """knob -> its effect: measured alone, inferred, or cleared (with the set it was cleared in).
    `units_map`: the candidates' unit of each of the plan's (a search of part of the knobs)."""
    out: dict[str, Effect] = {}
    mapping = units_map if units_map is not None else list(range(len(cands.units)))
    for i, real in enumerate(mapping):
        unit = cands.units[real]
        alone = plan.readings.get(frozenset({i}))
        group = f" (moves with its group {unit.name})" if len(unit.knobs) > 1 else ""
        inferred = plan.inferred.get(frozenset({i}))
        if alone is not None:
            eff = _effect(alone, "alone" + group)
        elif inferred is not None:
            eff = _effect(inferred, "not launched alone: inside a set that showed no effect" + group)
        elif i in plan.unmeasured:
            eff = Effect(share=None, basis="inferred to matter; could not be measured alone" + group)
        elif i in plan.unresolved and (rest := plan.readings.get(plan.unresolved)) is not None:
            eff = Effect(
                share=None,
                basis=f"unresolved: its set of {len(plan.unresolved)} reads {rest.share:.0%} of the gap together, "
                "not resolved among its knobs" + group,
            )
        elif i in plan.culprits:
            eff = Effect(share=None, basis="named from the sets it was measured in" + group)
        else:
            eff = Effect(share=None, basis="cleared: not measured alone, its set showed no effect" + group)
        for name in unit.knobs:
            out[name] = eff
    return out


def sets_of(plan: Plan, cands: Candidates, units_map: list[int] | None = None) -> list[SetEffect]:
    """Every set of two or more units measured together, with its share (the interactions among them)."""
    out = []
    mapping = units_map if units_map is not None else list(range(len(cands.units)))
    for units, r in plan.readings.items():
        if r is None or len(units) < 2:
            continue
        basis = "together" + (" (a minimal set that hurts only together)" if units in plan.together else "")
        real = frozenset(mapping[i] for i in units)
        out.append(SetEffect(knobs=cands.knob_names(real), **_effect(r, basis).model_dump()))
    return sorted(out, key=lambda e: (-len(e.knobs), e.knobs))


def closing_notes(res: PlanResult | None, book: Book, metric: str, interleaved: int | None) -> list[str]:
    """What the result says about how it was reached: drift correction, confirmation, the cache."""
    notes = []
    if interleaved is not None:
        slope = book.slope()
        fix = "no linear drift beyond the noise: values as read"
        if slope is not None:
            fix = f"values corrected for a linear drift of {slope * 60:+.3f} {metric}/min fitted to the ends"
        notes.append(f"interleave: {interleaved} end launch(es) between candidate repeats; {fix}")
    if res is not None and res.explained is not None:
        e = res.explained
        notes.append(
            f"confirmation: the culprits explain {e.share:.0%} of the gap ({e.low:.0%} to {e.high:.0%} at 99 %)"
        )
    cached = sum(1 for r in book.rows.values() if r.cached)
    if cached:
        notes.append(f"{cached} config(s) judged from this bisection's journaled measurements (cached)")
    for why, n in sorted(book.dropped.items()):
        notes.append(f"{n} journaled measurement(s) not replayed: {why}")
    return notes
