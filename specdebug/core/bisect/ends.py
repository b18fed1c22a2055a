"""The ends: each once when the noise known tells them apart by a wide gap, else again (the noise
measured, not assumed); drift in the ends; the slowdown behind a bad end that does not start."""

from __future__ import annotations

import math
import statistics
from collections.abc import AsyncIterator, Callable
from typing import Any

from specdebug.core.bisect.book import END_FAILURES
from specdebug.core.bisect.interleave import steady_drift
from specdebug.core.bisect.judge import ONE_RUN_GAP_PCT, Judge, higher_is_better
from specdebug.core.bisect.models import (
    EndsJudged,
    Role,
    TrialDone,
)
from specdebug.core.bisect.state import FUTILE, MIN_END_RUNS, EngineState
from specdebug.core.profiles import Profile


class EndsPhase(EngineState):
    """The ends measured, and the search behind a bad end that does not start."""

    def _ends_drift(self, ends: tuple[tuple[str, Role, Profile], ...] | None = None) -> str | None:
        """What to say when the ends' readings move steadily with time (drift, not noise), else None."""
        fps = [fp for fp, _, _ in ends] if ends else [self.cands.good_fp, self.cands.bad_fp]
        points = [sorted(self.book.points(fp)) for fp in fps]
        if self.book.start_mode or self.options.interleave or any(len(p) < 2 for p in points):
            return None  # --interleave corrects a linear drift itself
        found = steady_drift(points)
        if found is None:
            return None
        slope, stat = found
        runs = [x for p in points for _, x in p]
        scale = statistics.fmean(runs) or 1.0
        times = [t for p in points for t, _ in p]
        moved = abs(slope) * (max(times) - min(times))
        gap = abs(statistics.fmean([x for _, x in points[0]]) - statistics.fmean([x for _, x in points[1]]))
        if moved < max(0.25 * gap, 0.02 * abs(scale)):
            return None  # steady but small: a figure that barely moves is not what keeps the ends apart
        per_min = slope * 60 / scale * 100
        way = "faster" if (slope > 0) == higher_is_better(self.options.metric) else "slower"
        return (
            f"the box drifted during the run: both ends read steadily {way} with time "
            f"({per_min:+.1f} % of {self.options.metric} a minute, {stat:.1f} standard errors from flat): drift, "
            "not noise; more runs of the ends would only measure it (rerun on a quiet box, or with --interleave)"
        )

    async def _behind_the_crash(self, crash: frozenset[int]) -> AsyncIterator[Any]:
        """The bad profile without the knobs that make it fail to start, against the good end, by the
        metric: a slowdown there is searched too (issue 39: it was measured 25 % slower and then
        reported as "the culprits explain 100%").  Sets `self.plan` to that search's when there is one."""
        c = self.cands
        rest = [i for i in range(len(c.units)) if i not in self._real(crash)]
        if not rest:
            return
        profile, fp = c.profile(frozenset(rest))
        self.book.start_mode, self.book.start_kind, self._crashed = False, "", True
        self.book.ends = (c.good_fp, fp)
        self.book.failed_ends.discard(fp)
        ends = ((c.good_fp, Role.GOOD, c.good), (fp, Role.CANDIDATE, profile))
        what = f"the bad profile without {', '.join(c.knob_names(self._real(crash)))} (it starts)"
        async for ev in self._ends(ends, settled=lambda j: self._bound_behind(j, what)):
            yield ev
        judge = self.book.judge()
        if self.book.end_failed(fp) or self.book.end_failed(c.good_fp):
            self._slow_notes = [
                f"{what} could not be measured by {self.options.metric}: cannot tell if it is slower"
            ]
            return
        state, why, _need = judge.ends()
        bound = self._bound_behind(judge, what) if state != "distinct" else None
        if bound is not None:  # one reading each bounds it: no second launch of each to say so
            self._slow_notes = [bound]
            return
        if state == "same":
            self._slow_notes = [f"{what} measures as the good end by {self.options.metric}: {why}"]
            return
        if state != "distinct":
            self._slow_notes = [f"{what} against the good end: cannot tell if it is slower ({why})"]
            return
        self._slow_notes = [
            f"{what} is slower than the good end ({why}): its knobs searched by {self.options.metric}"
        ]
        yield EndsJudged(evidence=judge.evidence())
        assert self.plan is not None
        self._phases.append((self.plan, self._map))
        self._map = rest
        async for ev in self._search(judge):
            yield ev

    def _bound_behind(self, judge: Judge, what: str) -> str | None:
        """What one reading of each says of the bad profile without the crash's knobs, when it shows no
        sign of a slowdown: a bound ("no slowdown beyond X %"), never "none" flat; None when it is not
        one reading of it, or the reading leans slower (then a second run of each decides: issue 39, the
        second runs were the launch over one knob at a time on the crash and hang rows)."""
        g, b = judge.g_cost, judge.b_cost
        t, rel = judge.t, judge.rel
        if judge.exact or len(judge.bad) != 1 or g is None or b is None or not (0 < g < math.inf):
            return None
        if not (0 < b < math.inf) or not math.isfinite(t) or self.options.interleave:
            return None
        lean = math.log(b / g)  # log of the time per unit's ratio: > 0 is slower
        se = rel * math.sqrt(1 / len(judge.good) + 1 / len(judge.bad))
        high = (math.exp(lean + t * se) - 1) * 100
        if lean > t * se or high >= ONE_RUN_GAP_PCT:
            return None  # a sign of a slowdown, or too wide a bound to be worth saying: a second run
        moved = (math.exp(lean) - 1) * 100
        way = "slower" if moved > 0 else "faster"
        source = (
            f"noise {rel * 100:.1f}% per run from the server's per-step figure, not from repeats"
            if judge.noise.source == "steps"
            else f"run-to-run sd {rel * 100:.1f}% measured"
            if judge.noise.measured
            else f"noise not measured: a working {rel * 100:.0f}% per run"
        )
        return (
            f"{what} reads {abs(moved):.1f}% {way} than the good end by {self.options.metric} "
            f"(one reading each; {source}): no slowdown behind the crash beyond {max(high, 0.0):.1f}% "
            "at 99 %; a second reading of each would narrow it"
        )

    async def _ends(
        self,
        ends: tuple[tuple[str, Role, Profile], ...] | None = None,
        settled: Callable[[Judge], str | None] | None = None,
    ) -> AsyncIterator[Any]:
        """good, bad, good, bad ... at least twice each (the noise is measured, not assumed), more up to
        --repeats while the gap is within the noise; an end that fails is launched once more (book).
        `settled`: what one run of each already says (not None: no second run; behind the crash).
        """
        c = self.cands
        ends = ends or ((c.good_fp, Role.GOOD, c.good), (c.bad_fp, Role.BAD, c.bad))
        for i in range(max(MIN_END_RUNS, self.options.repeats)):
            if i >= MIN_END_RUNS and self.launches + len(ends) > self._cap():
                return  # past one knob at a time's launches: they would decide nothing it would not
            for fp, role, profile in ends:
                self.book.row(fp, role, profile.name, [])
                for _ in range(END_FAILURES):  # a run that gave no figure is tried once more
                    if self.book.end_needs_run(fp, i):
                        async for ev in self._measure(profile, fp, role, frozenset()):
                            yield ev
                yield TrialDone(row=self.book.update_row(fp, self.book.judge()))
            if any(self.book.end_failed(fp) for fp, _, _ in ends):
                return
            judge = self.book.judge()
            # once each when they are apart by the noise known now (the server's per-step lines, else a
            # working prior): no launch to measure the noise up front (issue 39).  The lines cannot see a
            # launch-to-launch noise (the sim's --noise 0.03: lines at 1 %, launches 3 %): the fit over
            # every reading of the run measures it before any culprit is named (verify.py)
            state, _why, need = judge.ends()
            if i == 0 and not self.options.interleave:
                if judge.one_run_enough() or (state != "distinct" and settled and settled(judge)):
                    return
            if i + 1 >= MIN_END_RUNS and state != "unresolved":
                return
            if i + 1 >= MIN_END_RUNS and need is not None and need > FUTILE * self.options.repeats:
                return  # the runs that would settle it are far beyond --repeats: more decide nothing
            if i + 1 >= MIN_END_RUNS and self._ends_drift(ends) is not None:
                return  # the box moves under the ends: more runs of them would only measure the drift
