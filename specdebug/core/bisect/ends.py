"""The ends: each once when the noise known tells them apart by a wide gap, else again (the noise
measured, not assumed); drift in the ends; the slowdown behind a bad end that does not start."""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator
from typing import Any

from specdebug.core.bisect.book import END_FAILURES
from specdebug.core.bisect.interleave import steady_drift
from specdebug.core.bisect.judge import higher_is_better
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
        async for ev in self._ends(ends):
            yield ev
        judge = self.book.judge()
        what = f"the bad profile without {', '.join(c.knob_names(self._real(crash)))} (it starts)"
        if self.book.end_failed(fp) or self.book.end_failed(c.good_fp):
            self._slow_notes = [
                f"{what} could not be measured by {self.options.metric}: cannot tell if it is slower"
            ]
            return
        state, why, _need = judge.ends()
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

    async def _ends(self, ends: tuple[tuple[str, Role, Profile], ...] | None = None) -> AsyncIterator[Any]:
        """good, bad, good, bad ... at least twice each (the noise is measured, not assumed), more up to
        --repeats while the gap is within the noise; an end that fails is launched once more (book).
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
            if i == 0 and judge.one_run_enough() and not self.options.interleave:
                return
            if i + 1 >= MIN_END_RUNS and state != "unresolved":
                return
            if i + 1 >= MIN_END_RUNS and need is not None and need > FUTILE * self.options.repeats:
                return  # the runs that would settle it are far beyond --repeats: more decide nothing
            if i + 1 >= MIN_END_RUNS and self._ends_drift(ends) is not None:
                return  # the box moves under the ends: more runs of them would only measure the drift
