"""Which knobs to try next: binary search while one culprit explains the results, then ddmin.

Pure: no I/O, no clock.  A `Plan` asks one question at a time (`query`: a set of unit indices to
apply to the good config) and is told the answer (`answer(outcome)`); the caller owns launching,
caching and judging.  A question may repeat (a verification, or ddmin revisiting a subset): the
caller's cache answers those without a launch, so counting launches is the caller's business.

* Check: all units applied must measure bad (it is the bad end's knobs), else the difference is
  not in the knobs (verdict no-culprit).
* Binary search over the suspects: apply the first half; bad -> the culprit is in it; good -> in
  the other half (one culprit assumed); unresolved -> try the other half instead.  The last suspect
  is verified alone unless that exact set was just measured, so one culprit among N costs at most
  ceil(log2 N) + 1 launches.
* When that single-culprit story fails (the last suspect alone is not bad, or both halves are
  unresolved), delta debugging (Zeller and Hildebrandt's ddmin) over all units finds a 1-minimal
  bad set: knobs that only hurt together, such as a wider draft tree with a bigger token budget.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    GOOD = "good"
    BAD = "bad"
    UNRESOLVED = "unresolved"  # skip or unclear: ddmin's "?"


Query = frozenset[int]


@dataclass
class PlanResult:
    verdict: str  # found | no-culprit | inconclusive
    culprits: frozenset[int] = frozenset()
    search: str | None = None  # binary | ddmin
    notes: list[str] = field(default_factory=list)


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


class Plan:
    """The search as a state machine: read `query`, call `answer`, until `result` is set."""

    def __init__(self, n_units: int) -> None:
        self.n = n_units
        self.stage = "check"
        self.suspects: frozenset[int] = frozenset(range(n_units))
        self.cleared: frozenset[int] = frozenset()
        self.culprits: frozenset[int] = frozenset()
        self.answers: dict[Query, Outcome] = {}
        self.query: Query | None = None
        self.result: PlanResult | None = None
        self._gen = self._run()
        self._advance(None)

    @property
    def done(self) -> bool:
        return self.result is not None

    def answer(self, outcome: Outcome) -> None:
        if self.query is None:
            raise RuntimeError("the plan is finished")
        self.answers[self.query] = outcome
        self._advance(outcome)

    def _advance(self, outcome: Outcome | None) -> None:
        try:
            self.query = self._gen.send(outcome) if outcome is not None else next(self._gen)
        except StopIteration as stop:
            self.query = None
            self.result = stop.value
            self.stage = "done"
            self.culprits = self.result.culprits
            if self.result.verdict == "found":
                self.suspects = frozenset()
                self.cleared = frozenset(range(self.n)) - self.culprits

    def _focus(self, suspects: list[int]) -> None:
        self.suspects = frozenset(suspects)
        self.cleared = frozenset(range(self.n)) - self.suspects

    def remaining_estimate(self) -> int:
        """Launches the search may still need (a guide for the ETA, not a promise)."""
        if self.done:
            return 0
        k = len(self.suspects)
        if self.stage in ("check", "binary"):
            return max(1, (k - 1).bit_length() + 1) if k > 1 else 1
        return max(1, 2 * k)

    def _run(self) -> Generator[Query, Outcome, PlanResult]:
        everything = list(range(self.n))
        if not everything:
            return PlanResult("no-culprit", notes=["the two profiles differ in no knob"])
        outcome = yield frozenset(everything)
        if outcome is Outcome.GOOD:
            return PlanResult(
                "no-culprit",
                notes=["all knobs applied to the good profile measure good: the difference is elsewhere"],
            )
        if outcome is Outcome.UNRESOLVED:
            return PlanResult(
                "inconclusive", notes=["all knobs applied to the good profile could not be judged"]
            )

        self.stage = "binary"
        suspects = everything
        stuck = False
        while len(suspects) > 1:
            half = (len(suspects) + 1) // 2
            left, right = suspects[:half], suspects[half:]
            outcome = yield frozenset(left)
            if outcome is not Outcome.UNRESOLVED:
                suspects = left if outcome is Outcome.BAD else right
                self._focus(suspects)
                continue
            outcome = yield frozenset(right)
            if outcome is Outcome.UNRESOLVED:
                stuck = True
                break
            suspects = right if outcome is Outcome.BAD else left
            self._focus(suspects)
        if not stuck:
            outcome = yield frozenset(suspects)  # usually just measured: the caller's cache answers
            if outcome is Outcome.BAD:
                return PlanResult("found", frozenset(suspects), "binary")

        self.stage = "ddmin"
        notes = ["one knob alone does not explain it: delta debugging for knobs that hurt together"]
        culprits = yield from self._ddmin(everything)
        unproven = [u for u in culprits if self.answers.get(frozenset(culprits) - {u}) is not Outcome.GOOD]
        if len(culprits) > 1 and unproven:
            notes.append(
                "not proven minimal: without "
                + ", ".join(f"#{u}" for u in unproven)
                + " the result could not be judged"
            )
            return PlanResult("inconclusive", frozenset(culprits), "ddmin", notes)
        return PlanResult("found", frozenset(culprits), "ddmin", notes)

    def _ddmin(self, units: list[int]) -> Generator[Query, Outcome, list[int]]:
        current, n = list(units), 2
        self._focus(current)
        while len(current) >= 2:
            parts = split(current, n)
            reduced: tuple[list[int], int] | None = None
            for part in parts:
                if (yield frozenset(part)) is Outcome.BAD:
                    reduced = (part, 2)
                    break
            if reduced is None and n > 2:  # with two parts the complements are the parts themselves
                for part in parts:
                    rest = [u for u in current if u not in part]
                    if (yield frozenset(rest)) is Outcome.BAD:
                        reduced = (rest, max(n - 1, 2))
                        break
            if reduced is not None:
                current, n = reduced
                self._focus(current)
                continue
            if n >= len(current):
                break
            n = min(2 * n, len(current))
        return current
