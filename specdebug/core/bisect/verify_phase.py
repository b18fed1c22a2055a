"""The engine's check of what the search named: the additive fit over every reading (verify.py), a
repeat where it decides the most, within one knob at a time's launches; and that budget for the search."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from specdebug.core.bisect.models import (
    Role,
    TrialDone,
)
from specdebug.core.bisect.rules import Ask
from specdebug.core.bisect.state import EXIT0, EngineState
from specdebug.core.bisect.verify import budget, decide, drifted, observations, terms_of, unresolve_rest


class VerifyPhase(EngineState):
    """The launch budget and the fit's last word."""

    def _afford(self, launches: int) -> bool:
        return self.options.hand or self.launches + launches <= self._cap()

    def _cap(self) -> int:
        return budget(self._naive(), self.options.repeats)

    def _new_launch(self, ask: Ask) -> bool:
        """This question needs a launch (nothing of its config measured yet, or the good end again)."""
        if ask.fresh:
            return True
        return not self.book.values(self.cands.profile(self._real(ask.units))[1])

    async def _verify(self) -> AsyncIterator[Any]:
        """The named culprits against the additive fit of every reading of this search (verify.py):
        confirmed, or a config measured again where that decides the most, or cannot-tell."""
        plan, c = self.plan, self.cands
        res = plan.result if plan else None
        if plan is None or res is None or not res.culprits:
            return
        o = self.options
        if self.book.start_mode or o.hand or o.interleave or o.gate or o.failed_start == "bad":
            # start / no start has no noise; a hand judgement, the gate or a failed start taken as the
            # whole effect give no figure to fit; --interleave fits its own drift
            return
        terms, names = terms_of(plan)
        if res.verdict not in EXIT0 or not res.confirmed:  # unconfirmed: was it the box moving?
            obs, _ = observations(self.book, c, self._map, self.book.judge(), self.book.ends[1])
            why = drifted(obs, terms)
            if why is None and self.drift is not None and self.drift.beyond_noise:
                why = (
                    f"the good end measured again reads {self.drift.after:.2f} against {self.drift.before:.2f} "
                    f"at the start, beyond the noise: the box drifted during the run, or the good end's first "
                    "reading was off by chance"
                )
            if why is not None:
                named = ", ".join(c.knob_names(self._real(res.culprits)))
                res.verdict, res.culprits, res.drift = "cannot-tell", frozenset(), True
                res.explained = None  # what the culprits explained is no figure once they cannot stand
                res.notes += [f"not named culprits (the verdict cannot stand): {named}", why]
            return
        cap = self._cap()
        while True:
            obs, counts = observations(self.book, c, self._map, self.book.judge(), self.book.ends[1])
            verdict, pick = decide(
                obs,
                counts,
                terms,
                names,
                room=self.launches < cap,
                repeats=self.options.repeats,
                nuisance=bool(plan.unresolved),
            )
            if verdict.state == "confirmed":
                self._proof = verdict.fit
                res.notes.append(f"confirmed by the additive fit: {verdict.why}")
                return
            if verdict.state == "unexplained" and unresolve_rest(plan, verdict.worst):
                terms, names = terms_of(plan)
                continue
            if pick is None:
                break
            units = self._real(pick)
            profile, fp = c.profile(units)
            row = self.book.rows.get(fp)
            async for ev in self._measure(profile, fp, row.role if row else Role.CANDIDATE, units):
                yield ev
            yield TrialDone(row=self.book.update_row(fp, self.book.judge()))
        named = ", ".join(c.knob_names(self._real(res.culprits)))
        res.verdict = "inconclusive" if verdict.state == "unexplained" else "cannot-tell"
        res.notes += [
            f"not named culprits (the verdict cannot stand): {named}",
            f"the additive fit over every reading of this run does not confirm them: {verdict.why}"
            + ("" if verdict.state != "undecided" else f" within {cap} launches (one knob at a time's)"),
        ]
        res.confirmed, res.drift = False, res.drift or verdict.state == "drift"
        res.explained = None  # "the culprits explain N %" beside a verdict that names none misleads
        if res.verdict == "cannot-tell":
            res.culprits = frozenset()
