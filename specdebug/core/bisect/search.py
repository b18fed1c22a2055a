"""The group search: halving, a small set one knob at a time, delta debugging (the plan's engine room).

Pure.  `Search` holds what the readings showed (contributors alone, sets that hurt only together, sets
within the noise) and searches a set with a measured, or inferred, effect; `Plan` (plan.py) drives it
and confirms what it names.  Shares of time add: a half's reading gives the other half's effect, a set
that showed no effect clears its parts without a launch (a reading reused, issue 39), and the larger
share is searched first, so that a budget that ends leaves the smaller one unresolved.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator

from specdebug.core.bisect.judge import ZERO, Reading, above, plausible
from specdebug.core.bisect.rules import (
    SAME,
    SINGLES,
    Answer,
    Ask,
    Gen,
    hurts,
    repeats_to_settle,
    same,
    split,
)


class Search:
    """State and the group search; see plan.Plan for the state machine and the confirmation."""

    n: int
    names: list[str]
    stage: str
    suspects: frozenset[int]
    cleared: frozenset[int]
    readings: dict[frozenset[int], Answer]
    found: dict[int, Reading]
    together: dict[frozenset[int], Reading]
    unmeasured: set[int]
    undecided: list[frozenset[int]]
    settle: dict[frozenset[int], int]
    unmeasurable: list[frozenset[int]]
    used_ddmin: bool
    inferred: dict[frozenset[int], Reading]
    afford: Callable[[int], bool]

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
    def _need(self, units: list[int] | frozenset[int], share: float) -> int:
        """Launches a search of these units likely takes: one per unit no set that showed no effect
        covers and one more; two at least (a set within sets that did nothing hurts only together: delta
        debugging over what the readings left).  A small share (under a quarter of the gap) keeps one
        more for the fit: its search decides less than the fit's repeats (the story's speculative flags,
        15 % among three knobs that act together, beside three NCCL vars of 27 % each)."""
        uncovered = [u for u in units if self._zero_superset(frozenset({u}), self._named()) is None]
        return max(2, len(uncovered) + (1 if share >= 0.25 else 2))

    def _ask(self, units: list[int], parent: Reading, why: str) -> Generator[Ask, Answer, Answer]:
        """Ask for these units, unless a measured set that holds them and no culprit showed no effect."""
        known = self._zero_superset(frozenset(units), self._named())
        if known is not None:
            self.inferred.setdefault(frozenset(units), known)
            return known
        return (yield Ask(frozenset(units), parent, why=why))

    def _zero_superset(self, units: frozenset[int], culprits: frozenset[int]) -> Reading | None:
        """A reading of a measured config that holds these units and no culprit, and shows no effect:
        a part of a set that does nothing does nothing (shares add), so it is not launched (issue 39:
        reuse every reading).  The additive fit (verify.py) still explains every reading before a
        culprit is named."""
        best: Reading | None = None
        for measured, r in self.readings.items():
            if r is None or r.n < 1 or not units <= measured or self._holds_term(measured, culprits):
                continue
            if plausible(r, ZERO) and not above(r, ZERO) and (best is None or r.se < best.se):
                best = r
        return best

    def _holds_term(self, units: frozenset[int], culprits: frozenset[int]) -> bool:
        """The config holds a culprit found alone, or a whole set that hurts only together."""
        sets = [t for t in self.together if t <= culprits]
        alone = culprits - frozenset().union(*sets) if sets else culprits
        return bool(units & alone) or any(t <= units for t in sets)

    def name(self, unit: int) -> str:
        return self.names[unit]

    def _search_name(self) -> str:
        return "split+ddmin" if self.used_ddmin else "split"

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
                alone = yield from self._ask(units, effect, "alone: inferred to carry the effect")
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
        x = yield from self._ask(first, effect, "half of the suspects")
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
        rest = Reading(effect.share - x.share, math.hypot(effect.se, x.se), max(effect.t, x.t))
        if rest.share > x.share and above(rest, ZERO):
            # the larger share first: launches go where they decide the most, and a small share left
            # unsearched when the budget ends is said as one unresolved set (the story: the NCCL half's 85 %
            # before the speculative flags' 15 %)
            yield from self._search(second, rest, inferred=True)
            if self.afford(self._need(first, x.share)):  # else left to the confirmation: an unresolved rest
                yield from self._search(first, self._latest(first, x))
            return True
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
            if i > 0 and not above(left, ZERO) and left.share < SAME:
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
            x = yield from self._ask([unit], left, "one at a time (a small set)")
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
        """A contributor.  A small effect read once is not measured again here: no culprit is named before
        the additive fit over every reading of the run (verify.py) shows it significantly slower, and
        that fit asks for the repeat that decides the most (issue 39: a repeat of every small effect)."""
        self.found[unit] = effect
        return True
        yield  # a generator, as its callers expect

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
                if (known := self._zero_superset(frozenset(part), frozenset())) is not None:
                    self.inferred.setdefault(frozenset(part), known)
                    continue  # inside a set that showed no effect: it cannot reproduce it
                r = yield Ask(frozenset(part), effect, why="delta debugging")
                if reproduces(r):
                    assert r is not None
                    reduced = (part, 2, r)
                    break
            if reduced is None and n > 2:
                for part in parts:
                    rest = [u for u in current if u not in part]
                    if self._zero_superset(frozenset(rest), frozenset()) is not None:
                        continue
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
