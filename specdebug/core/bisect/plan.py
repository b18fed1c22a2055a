"""Which knobs to try next, measuring effects rather than sides.

Pure: no I/O, no clock.  A `Plan` asks one question at a time (`query`: an `Ask`, a set of unit
indices to apply to the good config) and is told the answer (`answer(reading)`: the share of the
good-bad gap that config shows, or None when it could not be measured); the caller owns launching,
repeating within the noise, caching and judging.

* Split: a set with a measured effect is halved and its first half measured.  The half carries the
  whole effect -> the other half is cleared (one culprit costs about log2 N launches); the half
  carries none -> the other half is inferred to carry it; part of it -> the other half is measured
  too and both are searched, down to one knob at a time (independent contributors, each its share).
* A knob inferred to carry an effect is always measured alone; when it shows none, the effect needs
  knobs together, and delta debugging (Zeller and Hildebrandt's ddmin) over the set whose effect
  was measured finds a 1-minimal set that reproduces it: an interaction, shown by the numbers.
* Confirmation: the bad profile with the culprits restored (every other knob applied) must measure
  as the good end within the noise.  When it does not, the good end is measured again (drift?),
  then the rest is searched for what remains, twice at most; what is left is reported unexplained.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field

from specdebug.core.bisect.judge import FULL, ZERO, Reading, above, plausible

MIN_SHARE = 0.05  # a culprit's effect is beyond the noise and at least 5 % of the gap
SINGLES = 3  # a set this small is searched one unit at a time (_singles), not halved
SMALL = 0.3  # a contributor below 30 % of the gap read once is measured again before it is named
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


class Plan:
    """The search as a state machine: read `query`, call `answer`, until `result` is set."""

    def __init__(self, n_units: int, names: list[str] | None = None) -> None:
        self.n = n_units
        self.names = names or [f"#{i}" for i in range(n_units)]
        self.stage = "check"
        self.suspects: frozenset[int] = frozenset(range(n_units))
        self.cleared: frozenset[int] = frozenset()
        self.readings: dict[frozenset[int], Answer] = {}
        self.found: dict[int, Reading] = {}  # contributors, measured alone
        self.together: dict[frozenset[int], Reading] = {}  # minimal sets that hurt only together
        self.unmeasured: set[int] = set()  # inferred to matter, could not be measured alone
        self.undecided: list[frozenset[int]] = []  # within the noise after every repeat
        self.settle: dict[frozenset[int], int] = {}  # undecided set -> runs of it that would decide it
        # sets carrying an effect whose halves could not be measured
        self.unmeasurable: list[frozenset[int]] = []
        self.used_ddmin = False
        self.query: Ask | None = None
        self.result: PlanResult | None = None
        self._gen = self._run()
        self._advance(None, first=True)

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def culprits(self) -> frozenset[int]:
        return self.result.culprits if self.result else self._named()

    def answer(self, reading: Answer) -> None:
        if self.query is None:
            raise RuntimeError("the plan is finished")
        if not self.query.fresh:
            self.readings[self.query.units] = reading
        self._advance(reading)

    def _advance(self, reading: Answer, *, first: bool = False) -> None:
        try:
            self.query = next(self._gen) if first else self._gen.send(reading)
        except StopIteration as stop:
            self.query = None
            self.result = stop.value
            self.stage = "done"
            self.suspects = frozenset()
            self.cleared = frozenset(range(self.n)) - self.result.culprits

    def remaining_estimate(self) -> int:
        """Launches the next steps can need: a split per level of the open suspects (each measured
        alone at the end), delta debugging's worst case, the confirmation, and the good end again
        when the confirmation does not close the gap."""
        if self.done:
            return 0
        k = len(self.suspects - self._named())
        if self.stage == "ddmin":
            search = 2 * max(k, len(self.suspects))
        elif self.stage == "confirm":
            search = 0
        else:
            search = math.ceil(math.log2(k)) + 1 if k > 1 else k
        return search + 2

    def remaining_high(self) -> int:
        """Questions the search can still ask at most (not counting repeats): each open unit halved
        into, measured alone and again, delta debugging over them (quadratic at worst), and each
        round of the confirmation with the good end again.  Loose, but a range that contains what
        follows (issue 39: "about 6 left" with 18-40 left; checked over every shape of up to 12
        knobs with one, two or three culprits, additive or together, in test_bisect_plan)."""
        if self.done:
            return 0
        open_units = len(frozenset(range(self.n)) - self._named()) if self.stage != "check" else self.n
        rounds = ROUNDS + 1
        return max(self.remaining_estimate(), 4 * open_units + open_units**2 // 2 + 2 * rounds + 2)

    def refresh(self, readings: dict[frozenset[int], Answer]) -> None:
        """Readings of sets already measured, recomputed with the noise as now known (more repeats)."""
        self.readings.update({k: v for k, v in readings.items() if k in self.readings})

    def _latest(self, units: list[int] | frozenset[int], fallback: Reading) -> Reading:
        r = self.readings.get(frozenset(units))
        return r if r is not None else fallback

    def _named(self) -> frozenset[int]:
        """The culprits so far: only what its latest reading (every repeat, the noise as now known)
        shows significantly in the bad direction; a knob that read slower once and then as the good
        end (or faster) is not one (issue 39: two knobs at -4 %, -11 %..+2 %, were named)."""
        named = {u for u, r in self.found.items() if hurts(self._latest([u], r))}
        for units, r in self.together.items():
            if hurts(self._latest(units, r)):
                named |= units
        return frozenset(named | self.unmeasured)

    def _focus(self, units: list[int]) -> None:
        self.suspects = frozenset(units) | self._named()
        self.cleared = frozenset(range(self.n)) - self.suspects

    # ---- the search --------------------------------------------------------------------------
    def _run(self) -> Generator[Ask, Answer, PlanResult]:
        everything = list(range(self.n))
        if not everything:
            return PlanResult("inconclusive", notes=["the two profiles differ in no knob"])
        whole = yield Ask(frozenset(everything), FULL, why="every knob applied")
        if whole is None:
            return PlanResult(
                "inconclusive", notes=["every knob applied to the good profile could not be measured"]
            )
        if not above(whole, ZERO):
            return PlanResult(
                "inconclusive",
                notes=[
                    "every knob applied to the good profile measures as the good end: the difference is not in the knobs"
                ],
            )
        self.stage = "split"
        yield from self._search(everything, whole)
        notes: list[str] = []
        residual: Answer = None
        for rnd in range(ROUNDS + 1):
            self.stage = "confirm"
            if self.undecided:
                break
            culprits = self._named()
            rest = frozenset(everything) - culprits
            if not culprits:
                break
            forward = self.readings.get(culprits) if rest else None
            if (
                forward is not None
                and forward.n >= 1
                and self._forward_confirms(forward)
                and self._adds_up(forward)
            ):
                # the good profile with only the culprits changed was measured in the search (the
                # culprit alone, or a set together) and reads as the bad end: the confirmation,
                # measured already (issue 39: launches that decide nothing).  Measured (n >= 1): a
                # failed start taken as the whole effect (--failed-start bad), the gate or a judgement
                # by hand is no figure, and the bad side is asked (it hid the slow knob next to the
                # one that fails to start)
                if self._named() != culprits and rnd < ROUNDS:
                    continue
                return self._result(
                    culprits,
                    forward,
                    notes
                    + [
                        "confirmed from the good side: the good profile with only the culprits changed "
                        f"reads {forward.share:.0%} of the gap ({forward.low:.0%} to {forward.high:.0%} at 99 %)"
                    ],
                )
            residual = yield Ask(
                rest,
                MAX_RESIDUAL,
                fresh=not rest,
                why="confirmation: the bad profile with the culprits restored",
                precision=CONFIRM_PRECISION if not rest else None,
                settle="residual" if rest else "",
            )
            if residual is None:
                forward = yield Ask(
                    culprits,
                    FULL,
                    why="confirmation: the good profile with only the culprits changed",
                    settle="forward",
                )
                if forward is not None and self._forward_confirms(forward):
                    explained = forward
                    return self._result(
                        culprits,
                        explained,
                        notes
                        + [
                            "confirmed from the good side: the bad profile with the culprits restored could not be measured"
                        ],
                    )
                notes.append("the confirmation could not be measured")
                break
            if closes(residual):
                if self._named() != culprits and rnd < ROUNDS:
                    continue  # repeats since moved a named knob's reading: confirm what is named now
                return self._result(
                    culprits, Reading(1 - residual.share, residual.se, residual.t, residual.n), notes
                )
            if rest:  # did the box drift, or is something left?
                again = yield Ask(frozenset(), FULL, fresh=True, why="the good end again: did the box drift?")
                if again is not None and not plausible(again, ZERO):
                    return PlanResult(
                        "cannot-tell",
                        frozenset(),
                        self._search_name(),
                        notes
                        + self._suspects(culprits)
                        + [
                            f"the good end measured again reads {again.share:+.0%} of the gap: {DRIFT_OR_CHANCE}"
                        ],
                        drift=True,
                    )
            else:  # the good end itself measured again: the drift check
                drifted = not plausible(residual, ZERO)
                why = (
                    f"the good end measured again reads {residual.share:+.0%} of the gap: {DRIFT_OR_CHANCE}"
                    if drifted
                    else f"the good end measured again reads {residual.share:+.0%} of the gap, but the noise allows up to "
                    f"{residual.high:+.0%}: too noisy to confirm (more --repeats, or a quieter box)"
                )
                return PlanResult(
                    "cannot-tell",
                    frozenset(),
                    self._search_name(),
                    notes + self._suspects(culprits) + [why],
                    drift=drifted,
                )
            if rnd == ROUNDS:
                break
            before = self._named()
            self.stage = "split"
            yield from self._search(sorted(rest), residual)
            if (
                self._named() == before
                and not self.undecided
                and len(rest) > 1
                and (above(residual, ZERO) and residual.share >= MAX_RESIDUAL.share)
            ):
                # no knob of the rest carries the residual alone: search it as a set (an interaction
                # next to the additive culprits already named)
                yield from self._ddmin(sorted(rest), residual)
            if self._named() == before and not self.undecided:
                if not plausible(residual, ZERO):
                    notes.append(
                        f"{residual.share:.0%} of the gap remains with no single knob or set to blame"
                    )
                break
        culprits = self._named()
        if self.undecided:
            sets = "; ".join(
                "+".join(self.name(u) for u in sorted(s))
                + f" (about {self.settle.get(s, '?')} runs would settle it)"
                for s in self.undecided
            )
            return PlanResult(
                "cannot-tell",
                frozenset(),
                self._search_name(),
                notes + self._suspects(culprits) + [f"within the noise after every repeat: {sets}"],
            )
        if residual is not None and plausible(residual, ZERO):
            # the rest reads as the good end within the noise, but the noise also allows a real
            # residual: "they do not close the gap" would be a claim the data does not make
            last = (
                f"the confirmation is too noisy to decide: the bad profile with the culprits restored reads "
                f"{residual.share:+.0%} of the gap, within the noise, but the noise allows up to "
                f"{residual.high:+.0%} (more --repeats, or a quieter box)"
            )
        else:
            last = "the culprits do not close the gap (confirmation)"
        return PlanResult("inconclusive", culprits, self._search_name(), notes + [last])

    def _adds_up(self, forward: Reading) -> bool:
        """The culprits' own readings alone add up to what they read together, within the noise.  When
        they do not (a box that drifted while they were measured: 0.46 and 1.59 of the gap alone, 1.09
        together), their reading together is no confirmation: the bad side is measured."""
        culprits = self._named()
        if len(culprits) < 2 or not all(u in self.found for u in culprits):
            return True
        parts = [self._latest([u], self.found[u]) for u in culprits]
        total = Reading(
            sum(p.share for p in parts), math.sqrt(sum(p.se**2 for p in parts)), max(p.t for p in parts)
        )
        return plausible(total, forward)

    @staticmethod
    def _forward_confirms(forward: Reading) -> bool:
        return forward_confirms(forward)

    def name(self, unit: int) -> str:
        return self.names[unit]

    def _suspects(self, units: frozenset[int]) -> list[str]:
        """cannot-tell names no culprit; what looked guilty is said as such (unit indices)."""
        if not units:
            return []
        return [
            "not named culprits (the verdict cannot stand): " + ", ".join(self.name(u) for u in sorted(units))
        ]

    def _search_name(self) -> str:
        return "split+ddmin" if self.used_ddmin else "split"

    def _result(self, culprits: frozenset[int], explained: Reading, notes: list[str]) -> PlanResult:
        alone = {u for u in culprits if not any(u in t for t in self.together)}
        if self.together:
            verdict = "several" if alone else "interaction"
        else:
            verdict = "found" if len(culprits) == 1 else "several"
        return PlanResult(verdict, culprits, self._search_name(), notes, explained, confirmed=True)

    def _search(self, units: list[int], effect: Reading, *, inferred: bool = False) -> Gen:
        """Find what carries `effect` (the measured, or inferred, effect of `units` together).
        Returns False when an inferred effect turned out not to be there (knobs acting together)."""
        self._focus(units)
        measured = self.readings.get(frozenset(units))
        if inferred and measured is not None:  # the set was measured already: its reading, not the inference
            if not plausible(measured, effect) and not above(measured, ZERO):
                return False  # inferred to carry the effect, measured without it: knobs act across sets
            effect, inferred = measured, False
        if not inferred and not above(effect, ZERO):
            return True  # the set's own measurement shows no effect beyond the noise: nothing to find
        if 1 < len(units) <= SINGLES:
            return (yield from self._singles(units, effect, inferred=inferred))
        if len(units) == 1:
            if inferred:
                alone = yield Ask(frozenset(units), effect, why="alone: inferred to carry the effect")
                if alone is None:
                    self.unmeasured.add(units[0])
                    return True
                if not above(alone, ZERO):
                    return False
                effect = alone
            yield from self._record(units[0], effect)
            return True
        half = (len(units) + 1) // 2
        first, second = units[:half], units[half:]
        x = yield Ask(frozenset(first), effect, why="half of the suspects")
        if x is None:
            first, second = second, first
            x = yield Ask(frozenset(first), effect, why="the other half (the first could not be measured)")
            if x is None:
                self.unmeasurable.append(frozenset(units))
                return True
        x = self._latest(first, x)
        effect = self._latest(units, effect)
        is_zero, is_all = same(x, ZERO), same(x, effect)
        if plausible(x, ZERO) and plausible(x, effect) and not (is_zero or is_all):
            self.undecided.append(frozenset(first))
            self.settle[frozenset(first)] = repeats_to_settle(x, effect)
            return True
        if is_all and not is_zero:
            yield from self._search(first, x)
            return True
        if is_zero and not is_all:
            ok = yield from self._search(second, effect, inferred=True)
            if ok:
                return True
            if inferred:
                return False
            yield from self._ddmin(units, effect)
            return True
        # part of the effect in each half: the other half carries the rest (shares of time add); its
        # knobs are measured alone in the end, and what the inference missed (knobs that act only
        # together across the halves) is left to the confirmation, which searches the rest as a set
        yield from self._search(first, x)
        x = self._latest(first, x)
        effect = self._latest(units, effect)
        rest = Reading(effect.share - x.share, math.hypot(effect.se, x.se), max(effect.t, x.t))
        if above(rest, ZERO):
            yield from self._search(second, rest, inferred=True)
        return True

    def _singles(self, units: list[int], effect: Reading, *, inferred: bool) -> Gen:
        """A small set, one unit at a time, until what its members showed explains its effect: the rest
        are cleared unmeasured (shares of time add).  As cheap as halving in the worst case at this
        size, cheaper on average, and never a launch for a group beside its members (issue 39: several
        culprits among 4 knobs took more launches than one knob at a time).  The last unit carries what
        is left, measured alone; when it shows nothing and no member did, the effect needs knobs together (ddmin)."""
        shown = Reading(0.0)
        for i, unit in enumerate(units):
            left = Reading(
                effect.share - shown.share, math.hypot(effect.se, shown.se), max(effect.t, shown.t)
            )
            if i > 0 and not above(left, ZERO):
                return True  # explained by the members measured: the rest cleared
            if i == len(units) - 1:
                ok = yield from self._search([unit], left, inferred=True)
                if ok or shown.share > 0:
                    # what its members showed is named; what is left is the confirmation's to find (it
                    # searches the rest as a set: an interaction beside an additive knob, by ddmin)
                    return True
                if inferred:
                    return False
                yield from self._ddmin(units, effect)
                return True
            x = yield Ask(frozenset({unit}), left, why="one at a time (a small set)")
            if x is None:
                continue
            x = self._latest([unit], x)
            if plausible(x, ZERO) and plausible(x, left) and not same(x, ZERO):
                self.undecided.append(frozenset({unit}))
                self.settle[frozenset({unit})] = repeats_to_settle(x, left)
                continue
            if hurts(x):
                yield from self._record(unit, x)
                if unit in self.found:
                    x = self._latest([unit], self.found[unit])
                    shown = Reading(shown.share + x.share, math.hypot(shown.se, x.se), max(shown.t, x.t))
        return True

    def _record(self, unit: int, effect: Reading) -> Gen:
        """A contributor; a small effect read once is measured again (to half its size at 99 %)
        before it is believed: one low reading on a busy box must not name a neutral knob."""
        if effect.share < SMALL and effect.n < 2:
            again = yield Ask(
                frozenset({unit}), effect, why="a small effect: measured again", precision=effect.share / 2
            )
            if again is None or not above(again, ZERO):
                return True
            effect = again
        self.found[unit] = effect
        return True

    def _ddmin(self, units: list[int], effect: Reading) -> Gen:
        """1-minimal subset of `units` that reproduces `effect` (not clearly less than it)."""
        self.stage, self.used_ddmin = "ddmin", True

        def reproduces(r: Answer) -> bool:
            return r is not None and above(r, ZERO) and (same(r, effect) or r.share > effect.share)

        current, n = list(units), 2
        best = effect
        self._focus(current)
        while len(current) >= 2:
            parts = split(current, n)
            reduced: tuple[list[int], int, Reading] | None = None
            for part in parts:
                r = yield Ask(frozenset(part), effect, why="delta debugging")
                if reproduces(r):
                    assert r is not None
                    reduced = (part, 2, r)
                    break
            if reduced is None and n > 2:
                for part in parts:
                    rest = [u for u in current if u not in part]
                    r = yield Ask(frozenset(rest), effect, why="delta debugging")
                    if reproduces(r):
                        assert r is not None
                        reduced = (rest, max(n - 1, 2), r)
                        break
            if reduced is not None:
                current, n, best = reduced
                self._focus(current)
                continue
            if n >= len(current):
                break
            n = min(2 * n, len(current))
        if len(current) == 1:
            yield from self._record(current[0], best)
        else:
            # knobs that hurt only together: each part short of one knob reads clearly less than the
            # set.  A part within the noise of the set's effect is undecided, not an interaction (the
            # noise scenario named a neutral knob "together" with one whose 23 % was not significant)
            short = [frozenset(current) - {u} for u in current]
            unsure = [
                p
                for p in short
                if (r := self.readings.get(p)) is not None and not above(self._latest(current, best), r)
            ]
            if unsure:
                for p in unsure:
                    r = self.readings[p]
                    assert r is not None
                    self.undecided.append(p)
                    self.settle[p] = repeats_to_settle(r, best)
            else:
                self.together[frozenset(current)] = best
        self.stage = "split"
        return True
