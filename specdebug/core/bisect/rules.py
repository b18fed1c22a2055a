"""The plan's vocabulary: a question (`Ask`), an answer (`PlanResult`), and the rules that read an effect.

Pure.  An effect is a `Reading`: a share of the good-bad gap with its standard error (judge.py).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field

from specdebug.core.bisect.judge import FULL, ZERO, Reading, above, plausible

MIN_SHARE = 0.05  # a culprit's effect is beyond the noise and at least 5 % of the gap
SINGLES = 3  # a set this small is searched one unit at a time (_singles), not halved
SAME = 0.1  # two effects are "the same" only when also within 10 % of the gap of each other
# confirmed: the bad profile with the culprits restored reads as the good end within the noise, under
# 15 % of the gap, and the noise does not allow more than 35 % (else: repeats, then unexplained)
MAX_RESIDUAL = Reading(0.15)
MAX_RESIDUAL_HIGH = 0.35
CONFIRM_PRECISION = MAX_RESIDUAL_HIGH - MAX_RESIDUAL.share
ROUNDS = 2  # searches of the rest after a confirmation that did not close the gap
# the data cannot tell a box that moved from first readings that were high or low by chance: say both
DRIFT_OR_CHANCE = (
    "the box drifted during the run, or the ends' first readings were off by chance "
    "(rerun with more --repeats or --interleave, or on a quiet box)"
)


@dataclass(frozen=True)
class Ask:
    """Measure the good config with these units applied.  `parent` is the effect the answer is
    compared with (besides zero): the caller repeats while the reading cannot tell the two apart.
    `fresh`: measure anew even if cached (the good end again, as the drift check)."""

    units: frozenset[int]
    parent: Reading = FULL
    fresh: bool = False
    why: str = ""
    precision: float | None = None  # also repeat while the 99 % half-width is wider than this
    # a confirmation: repeat only until `settled` (it closes the gap, or clearly does not), whatever the
    # width: "residual" (the bad profile with the culprits restored) | "forward" (the culprits alone)
    settle: str = ""


Answer = Reading | None


@dataclass
class PlanResult:
    verdict: str  # found | several | interaction | cannot-tell | inconclusive
    culprits: frozenset[int] = frozenset()
    search: str | None = None
    notes: list[str] = field(default_factory=list)
    explained: Reading | None = None
    confirmed: bool = False
    drift: bool = False


def split(items: list[int], n: int) -> list[list[int]]:
    """`items` cut into n nearly equal consecutive parts (the first ones one longer)."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


Gen = Generator[Ask, Answer, bool]


def same(x: Reading, y: Reading) -> bool:
    """Within the noise of each other, and close enough that the difference does not matter."""
    return plausible(x, y) and abs(x.share - y.share) < SAME


def repeats_to_settle(x: Reading, parent: Reading) -> int:
    """Runs of x that would tell it from zero or from the parent (its se shrinking as 1/sqrt(n), t near 2.6)."""
    d = max(abs(x.share), abs(parent.share - x.share)) or 1e-9
    return max(x.n + 1, math.ceil(x.n * (2.6 * math.hypot(x.se, parent.se) / d) ** 2))


def closes(residual: Reading) -> bool:
    """The bad profile with the culprits restored reads as the good end: within the noise of it, under
    MAX_RESIDUAL of the gap, and the noise allows no more than MAX_RESIDUAL_HIGH (or it is below MIN_SHARE)."""
    near = plausible(residual, ZERO) and residual.share < MAX_RESIDUAL.share
    return near and residual.high < MAX_RESIDUAL_HIGH or residual.high < MIN_SHARE


def forward_confirms(forward: Reading) -> bool:
    """The good profile with only the culprits changed reads as the bad end, within the noise and
    precisely enough (the same bounds as the confirmation from the bad side)."""
    return (
        plausible(forward, FULL)
        and forward.share > 1 - MAX_RESIDUAL.share
        and forward.low > 1 - MAX_RESIDUAL_HIGH
    )


def settled(ask: Ask, r: Reading) -> bool:
    """A sequential test for a confirmation: stop repeating once the answer is known either way (it
    confirms, or it clearly does not), not at a fixed width (issue 39: the confirmation repeated 3-4
    times after one reading already closed the gap within the allowed bounds)."""
    if ask.settle == "residual":
        return closes(r) or above(r, MAX_RESIDUAL)
    if ask.settle == "forward":
        return forward_confirms(r) or r.high < 1 - MAX_RESIDUAL.share or above(r, FULL)
    return True


def hurts(x: Reading) -> bool:
    """Significantly in the bad direction, and by at least MIN_SHARE of the gap: a culprit's effect."""
    return above(x, ZERO) and x.share >= MIN_SHARE


def direction(x: Reading) -> str:
    """What a measured effect says: hurts | helps (significantly faster than the good end) | no effect."""
    if hurts(x):
        return "hurts"
    return "helps" if above(ZERO, x) else "no effect"


def decided(x: Reading, parent: Reading) -> bool:
    """The reading tells "no effect" from "the parent's effect" (else: measure it again)."""
    return not (plausible(x, ZERO) and plausible(x, parent))
