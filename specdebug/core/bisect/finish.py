"""Progress (knob states, the launches-left range) and the result: what every front end shows."""

from __future__ import annotations

import statistics
from typing import Any

from specdebug.core.bench import cpuwait
from specdebug.core.bisect.judge import START_METRIC, Judge
from specdebug.core.bisect.models import (
    Effect,
    Estimate,
    Finished,
    KnobStates,
    Result,
    Status,
)
from specdebug.core.bisect.outcome import closing_notes, effects_of, sets_of
from specdebug.core.bisect.state import MIN_END_RUNS, EngineState
from specdebug.core.bisect.verify import ends_by_fit
from specdebug.core.records import BisectEnd, BisectResultRecord, BisectStartRecord


class FinishPhase(EngineState):
    """Progress and the result."""

    def _states(self) -> KnobStates:
        plan, c = self.plan, self.cands
        states: dict[str, Any] = {}
        for i, unit in enumerate(c.units):
            if plan is None:
                state = "suspect"
            elif i not in self._map:  # searched before (the crash's knobs): named there
                named = any(i in {m[u] for u in p.culprits} for p, m in self._phases)
                state = "culprit" if named else "cleared"
            elif plan.result is not None:  # a set said unresolved: neither named nor cleared
                aside = plan.result.confirmed and i in self._real(plan.unresolved)
                state = (
                    "culprit"
                    if i in self._real(plan.result.culprits)
                    else "unresolved"
                    if aside
                    else "cleared"
                )
            else:
                state = "suspect" if i in self._real(plan.suspects) else "cleared"
            for name in unit.knobs:
                states[name] = state
        return KnobStates(stage=plan.stage if plan else "ends", states=states)

    def _estimate(self) -> Estimate:
        left = self.plan.remaining_estimate() if self.plan else 2 * MIN_END_RUNS
        per = statistics.median(self._durations) if self._durations else None
        # each question may be measured up to --repeats times (an end between repeats: --interleave)
        each = 1 if self.options.hand else self.options.repeats * (2 if self.options.interleave else 1)
        high = self.plan.remaining_high() * each if self.plan else None
        return Estimate(launches_left=left, seconds_left=per * left if per else None, launches_max=high)

    def _cpu_warnings(self) -> list[str]:
        """The CPU contention of every benchmark run the answer rests on, said once per side."""
        runs = [m for ms in self.book.cache.values() for m in ms if m.status is Status.OK]
        return cpuwait.over_runs(
            [m.box_cpu_wait for m in runs],
            [m.client_cpu_wait for m in runs],
            "the most contended node" if self.nodes else self.remote.name,  # a run keeps its worst node's
        )

    def _naive(self) -> int:
        """One knob at a time with the same care: each knob once, each end twice (the noise)."""
        return len(self.cands.units) + 2 * MIN_END_RUNS

    def _start_record(self) -> BisectStartRecord:
        c = self.cands
        return BisectStartRecord(
            bisect=self.id,
            good=BisectEnd(name=c.good.name, file=str(c.good.source or ""), fingerprint=c.good_fp),
            bad=BisectEnd(name=c.bad.name, file=str(c.bad.source or ""), fingerprint=c.bad_fp),
            settings=self.settings.key(),
            options=self.options.model_copy(),
            knobs=list(c.rows),
        )

    def _effects(self) -> dict[str, Effect]:
        """Every knob's effect, from the search that measured it (the crash's, then the slowdown's)."""
        out: dict[str, Effect] = {}
        for plan, units_map in [*self._phases, (self.plan, self._map)]:
            if plan is not None:
                out.update(effects_of(plan, self.cands, units_map))
        return out

    def _finish(
        self,
        verdict: str,
        t0: float,
        judge: Judge,
        *,
        culprits: frozenset[int] = frozenset(),
        search: str | None = None,
        notes: list[str] | None = None,
        confirmed: bool | None = None,
    ) -> Finished:
        c, warnings = self.cands, [*self.warnings, *self._cpu_warnings()]
        if self.options.interleave:  # the last ends moved the drift fit: show the ends as finally judged
            judge = self.book.judge()
            for row in self.book.end_rows():
                self.book.update_row(row.fingerprint, judge)
        evidence = judge.evidence()
        evidence.drift = self.drift
        plan, res = self.plan, self.plan.result if self.plan else None
        confirmed = bool(res and res.confirmed) if confirmed is None else confirmed
        if confirmed and self._proof is not None:
            ends_by_fit(evidence, self._proof)
        interleaved = self._references if self.options.interleave else None
        notes = [*(notes or []), *closing_notes(res, self.book, judge.metric, interleaved)]
        explained = round(res.explained.share, 4) if res is not None and res.explained is not None else None
        result = Result(
            verdict=verdict,  # type: ignore[arg-type]
            culprits=c.knob_names(culprits),
            knobs=c.rows,
            trials=sorted(self.book.rows.values(), key=lambda r: r.index),
            launches=self.launches,
            naive_launches=self._naive(),
            duration_s=round(self.clock() - t0, 3),
            warnings=warnings,
            search=search,
            notes=list(notes or []),
            evidence=evidence,
            bisect=self.id,
            good={"name": c.good.name, "fingerprint": c.good_fp, "file": str(c.good.source or "")},
            bad={"name": c.bad.name, "fingerprint": c.bad_fp, "file": str(c.bad.source or "")},
            settings=self.settings.key(),
            effects=self._effects(),
            sets=[
                s for p, m in [*self._phases, (plan, self._map)] if p is not None for s in sets_of(p, c, m)
            ],
            explained=explained,
            unresolved=(
                c.knob_names(self._real(plan.unresolved))
                if plan is not None and res is not None and res.confirmed
                else []
            ),
            confirmed=confirmed,
            metric_used=(
                START_METRIC
                if self.book.start_mode or self._crashed and not self._phases
                else f"{START_METRIC}, then {self.options.metric}"  # the slowdown behind the crash
                if self._crashed
                else self.options.metric
            ),
        )
        if self.journal is not None:
            self.journal.append(BisectResultRecord(result=result), sync=True)
        return Finished(result=result)
