"""From the plan's readings to what the result says: each knob's effect and every measured set's.

Pure.  A knob's effect is its own measurement alone when there is one (the share of the gap it
shows, low/high at 99 % from the noise); otherwise the result says why there is none (cleared with
the set it was in, or inferred but not measurable alone), never a number it did not measure.
"""

from __future__ import annotations

from specdebug.core.bisect.judge import Reading
from specdebug.core.bisect.knobs import Candidates
from specdebug.core.bisect.models import Effect, SetEffect
from specdebug.core.bisect.plan import Plan


def _effect(r: Reading, basis: str) -> Effect:
    return Effect(share=round(r.share, 4), low=round(r.low, 4), high=round(r.high, 4), basis=basis, runs=r.n)


def effects_of(plan: Plan, cands: Candidates) -> dict[str, Effect]:
    """knob -> its effect: measured alone, inferred, or cleared (with the set it was cleared in)."""
    out: dict[str, Effect] = {}
    for i, unit in enumerate(cands.units):
        alone = plan.readings.get(frozenset({i}))
        group = f" (moves with its group {unit.name})" if len(unit.knobs) > 1 else ""
        if alone is not None:
            eff = _effect(alone, "alone" + group)
        elif i in plan.unmeasured:
            eff = Effect(share=None, basis="inferred to matter; could not be measured alone" + group)
        elif i in plan.culprits:
            eff = Effect(share=None, basis="named from the sets it was measured in" + group)
        else:
            eff = Effect(share=None, basis="cleared: not measured alone, its set showed no effect" + group)
        for name in unit.knobs:
            out[name] = eff
    return out


def sets_of(plan: Plan, cands: Candidates) -> list[SetEffect]:
    """Every set of two or more units measured together, with its share (the interactions among them)."""
    out = []
    for units, r in plan.readings.items():
        if r is None or len(units) < 2:
            continue
        basis = "together" + (" (a minimal set that hurts only together)" if units in plan.together else "")
        out.append(SetEffect(knobs=cands.knob_names(units), **_effect(r, basis).model_dump()))
    return sorted(out, key=lambda e: (-len(e.knobs), e.knobs))
