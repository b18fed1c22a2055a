"""The bisection engine: the async iterator of typed events that the Bisect pane and the verb consume.

Ends first (each at least twice, more while the gap is within the noise; proven apart), then the
plan's questions answered one by one, repeated while a reading cannot decide: from this
bisection's fresh journaled measurements when there are some, else by a trial.  Judging is the
judge's; the search is the plan's; launching is the trial's.  Controls for a front end: pause
after the current trial, a judgement by hand, measure a config again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from specdebug.core.bisect.book import END_FAILURES, Book, failure_kind
from specdebug.core.bisect.boxlock import hold_box
from specdebug.core.bisect.checks import busy_server, drift_of
from specdebug.core.bisect.gate import Gate, parse_gate
from specdebug.core.bisect.interleave import next_step, reference_end, steady_drift
from specdebug.core.bisect.judge import START_METRIC, ZERO, Judge, Reading, higher_is_better, plausible
from specdebug.core.bisect.knobs import NAME_SUFFIX, Candidates, settings_for
from specdebug.core.bisect.models import (
    AwaitJudgement,
    BisectOptions,
    Drift,
    Effect,
    EndsJudged,
    Estimate,
    Finished,
    Judged,
    KnobStates,
    Measurement,
    Paused,
    Phase,
    Planned,
    Result,
    Role,
    TrialDone,
    TrialProgress,
    TrialStarted,
)
from specdebug.core.bisect.outcome import closing_notes, effects_of, sets_of
from specdebug.core.bisect.plan import Ask, Plan, decided, settled
from specdebug.core.bisect.trial import Nodes, TrialError, TrialSpec, run_trial, stop_leftovers
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.records import BisectEnd, BisectJudgementRecord, BisectResultRecord, BisectStartRecord
from specdebug.remote.api import Remote

Clock = Callable[[], float]
MIN_END_RUNS = 2  # each end at least twice: the noise is measured, not assumed
# the ends stop repeating once the runs that would settle them (as measured so far) are over this many
# times --repeats: those launches could not decide it (issue 39: 8 launches to end cannot-tell on 2 knobs)
FUTILE = 2


class Bisection:
    """One bisection of `good` vs `bad` on one remote; iterate `events()` once."""

    def __init__(
        self,
        remote: Remote,
        good: Profile,
        bad: Profile,
        options: BisectOptions | None = None,
        *,
        journal: EventJournal | None = None,
        clock: Clock = time.time,
        remeasure: set[str] | None = None,
        nodes: Nodes | None = None,  # a deployment's: every trial launches, waits for and stops all
    ) -> None:
        self.remote, self.journal, self.clock, self.nodes = remote, journal, clock, nodes
        self.options = options or BisectOptions()
        self.cands = Candidates(good, bad, self.options.groups)  # GroupError on a bad --group
        self.gate: Gate | None = parse_gate(self.options.gate) if self.options.gate else None
        self.settings = settings_for(good, self.options)
        units = "|".join(",".join(u.knobs) for u in self.cands.units)
        blob = f"{self.cands.good_fp}:{self.cands.bad_fp}:{self.settings.key()}:{units}"
        self.id = hashlib.sha256(blob.encode()).hexdigest()[:10]
        self.cands.tag = self.id
        self.book = Book(
            self.options,
            self.gate,
            (self.cands.good_fp, self.cands.bad_fp),
            self.settings.key(),
            bisect=self.id,
            now=clock(),
            fingerprint_of=self.cands.fingerprint_of,
        )
        self.launches = 0
        self.warnings: list[str] = []
        self.plan: Plan | None = None
        self._map: list[int] = list(range(len(self.cands.units)))  # the plan's units -> the candidates'
        self._phases: list[tuple[Plan, list[int]]] = []  # earlier searches (the crash's) and their maps
        self._crashed = False  # the bad end did not start: searched by start / no start first
        self._slow_notes: list[str] = []  # what the bad profile without the crash's knobs measured
        self._remeasure = set(remeasure or ())
        self._paused = False
        self._go = asyncio.Event()
        self._judgement: asyncio.Future[Judged] | None = None
        self._durations: list[float] = []
        self._references = 0  # ends measured between a candidate's repeats (--interleave)
        self._reading: Reading | None = None
        self._mine: set[str] = set()  # profile names launched by this run
        self.current: Profile | None = None  # the config of the trial running now (front ends clean up)
        self.drift: Drift | None = None
        self._box_lock = contextlib.AsyncExitStack()  # the box's bisection lock, from the first launch
        self._box_locked = False
        launched = self.book.load(journal.records()) if journal is not None else {}
        prefix = good.name + NAME_SUFFIX
        own = self.book.own_pids
        self._leftover = sorted({n for p, n in launched.items() if p in own or n.startswith(prefix)})
        # servers of this session it did not launch (by hand, another bisection): never stopped, but
        # while one runs it holds the GPUs and every figure would be wrong
        self._others = sorted({n for p, n in launched.items() if p not in own and not n.startswith(prefix)})

    # ---- controls (front ends) ---------------------------------------------------------------
    def pause(self, on: bool = True) -> None:
        """Stop before the next trial (the running one finishes); pause(False) goes on."""
        self._paused = on
        if not on:
            self._go.set()

    @property
    def awaiting(self) -> bool:
        return self._judgement is not None and not self._judgement.done()

    def judge(self, verdict: Judged) -> bool:
        """A judgement by hand for the config waiting for one (False: none is waiting)."""
        if not self.awaiting:
            return False
        assert self._judgement is not None
        self._judgement.set_result(verdict)
        return True

    def measure_again(self, fingerprint: str) -> None:
        """Measure this config once more before the next question, then replay the search."""
        self._remeasure.add(fingerprint)

    # ---- the run ------------------------------------------------------------------------------
    async def events(self) -> AsyncIterator[Any]:
        """The run; from its first launch on, under the box's bisection lock (boxlock.py: a second
        bisection on the box is refused before it launches, naming this one)."""
        async with contextlib.AsyncExitStack() as self._box_lock:
            async for ev in self._run():
                yield ev

    async def _lock_box(self) -> None:
        if not self._box_locked:
            c = self.cands
            lock = hold_box(self.remote, self.remote.name, self.id, c.good.name, c.bad.name, self.warnings)
            await self._box_lock.enter_async_context(lock)
            self._box_locked = True

    async def _run(self) -> AsyncIterator[Any]:
        t0 = self.clock()
        c = self.cands
        if self.journal is not None:
            self.journal.append(self._start_record(), sync=True)
        yield Planned(
            bisect=self.id,
            knobs=c.rows,
            units=c.units,
            naive_launches=self._naive(),
            settings=self.settings.key(),
            good=c.good.name,
            bad=c.bad.name,
        )
        await self._refuse_if_busy()
        if self._leftover and self.nodes is None:  # a deployment's: its trial clears every node
            for what in await stop_leftovers(self.remote, self._leftover, self.journal):
                yield TrialProgress(
                    index=-1, phase=Phase.PORT, detail=f"stopped {what}, left running by an interrupted run"
                )
        async for ev in self._ends():
            yield ev
        judge = self.book.judge()
        yield EndsJudged(evidence=judge.evidence())
        good_failed, bad_failed = (self.book.end_failed(fp) for fp in (c.good_fp, c.bad_fp))
        if good_failed or (bad_failed and not self.book.failed_to_start(c.bad_fp)):
            reasons = [r.reason for r in self.book.end_rows() if r.judged is Judged.SKIP and r.reason]
            yield self._finish("inconclusive", t0, judge, notes=["an end could not be measured", *reasons])
            return
        notes: list[str] = []
        if bad_failed:  # the bad end does not start: which knobs make it fail?
            self.book.start_kind = failure_kind(self.book.measurements(c.bad_fp)[-1])
            self.book.start_mode = True
            judge = self.book.judge()
            reason = f"it {self.book.start_kind}: {self.book.end_reason(c.bad_fp)}"
            notes.append(
                f"the bad end does not start ({reason}): searched with start / no start as the metric"
            )
        else:
            state, why, need = judge.ends()
            if state == "same":
                yield self._finish("no-difference", t0, judge, notes=[why])
                return
            drift = self._ends_drift()
            if state != "distinct" and drift is not None:
                yield self._finish("cannot-tell", t0, judge, notes=[drift])
                return
            if drift is not None:
                self.warnings.append(drift)
            if state != "distinct":
                more = f"; about {need} runs of each end would settle it" if need else ""
                budget = f" (budget --repeats {self.options.repeats})"
                yield self._finish(
                    "cannot-tell", t0, judge, notes=[f"the ends are within the noise: {why}{more}{budget}"]
                )
                return
        async for ev in self._search(judge):
            yield ev
        res = self.plan.result if self.plan else None
        assert res is not None
        culprits, verdict, confirmed = self._real(res.culprits), res.verdict, res.confirmed
        if self.book.start_mode and res.confirmed and res.culprits:  # is a slowdown behind the crash?
            crash = self.plan
            async for ev in self._behind_the_crash(res.culprits):
                yield ev
            slow = self.plan.result if self.plan is not crash and self.plan else None
            if slow is None:
                notes += self._slow_notes
                if self._slow_notes and "cannot tell" in self._slow_notes[-1]:
                    verdict, confirmed = "inconclusive", False  # the crash's culprits, the rest untold
            else:
                culprits |= self._real(slow.culprits)
                confirmed = slow.confirmed
                verdict = "several" if slow.confirmed and slow.culprits else "inconclusive"
                notes += [*self._slow_notes, *slow.notes]
        yield self._states()
        yield self._finish(
            verdict,
            t0,
            self.book.judge(),
            culprits=culprits,
            search=res.search,
            notes=notes + res.notes,
            confirmed=confirmed,
        )

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

    def _real(self, units: frozenset[int]) -> frozenset[int]:
        """The plan's unit indices as the candidates' (a search of part of the knobs maps them)."""
        return frozenset(self._map[i] for i in units)

    async def _search(self, judge: Judge) -> AsyncIterator[Any]:
        """The plan's questions answered one by one, over the units in `self._map`."""
        c = self.cands
        names = [c.units[i].name for i in self._map]
        self.plan = Plan(len(self._map), names)
        while not self.plan.done:
            if self._remeasure:
                async for ev in self._measure_again():
                    yield ev
                judge = self.book.judge()
                # replay: answered questions come from the cache
                self.plan = Plan(len(self._map), names)
            yield self._states()
            yield self._estimate()
            if self._paused:
                self._go.clear()
                yield Paused(paused=True)
                await self._go.wait()
                yield Paused(paused=False)
                continue
            ask = self.plan.query
            assert ask is not None
            judge = self.book.judge()  # repeats (and interleaved ends) refine the noise
            async for ev in self._answer(ask, judge):
                yield ev
            self.plan.answer(self._reading)
            judge = self.book.judge()
            self.plan.refresh(
                {k: self.book.reading(c.profile(self._real(k))[1], judge) for k in list(self.plan.readings)}
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

    async def _refuse_if_busy(self) -> None:
        """Refuse to start while a server of this session that this bisection did not launch runs."""
        busy = await busy_server(self.remote, self._others, self.nodes)
        if busy is not None:
            raise TrialError(
                f"{busy} of this session is running and holds the GPUs; the bisection stops only servers "
                "it launched: stop it first (specdebug stop -c ...)"
            )

    async def _ends(self, ends: tuple[tuple[str, Role, Profile], ...] | None = None) -> AsyncIterator[Any]:
        """good, bad, good, bad ... at least twice each (the noise is measured, not assumed), more up to
        --repeats while the gap is within the noise; an end that fails is launched once more (book).
        """
        c = self.cands
        ends = ends or ((c.good_fp, Role.GOOD, c.good), (c.bad_fp, Role.BAD, c.bad))
        for i in range(max(MIN_END_RUNS, self.options.repeats)):
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
            # not once each even when the server's per-step figure puts them many noise widths apart
            # (judge.decisive): its lines cannot see a launch-to-launch noise (the sim's --noise 0.03:
            # lines at 1 %, launches 3 %), and test_bisect_search's noise scenario then ran each end once
            state, _why, need = judge.ends()
            if i + 1 >= MIN_END_RUNS and state != "unresolved":
                return
            if i + 1 >= MIN_END_RUNS and need is not None and need > FUTILE * self.options.repeats:
                return  # the runs that would settle it are far beyond --repeats: more decide nothing
            if i + 1 >= MIN_END_RUNS and self._ends_drift(ends) is not None:
                return  # the box moves under the ends: more runs of them would only measure the drift

    async def _answer(self, ask: Ask, judge: Judge) -> AsyncIterator[Any]:
        """Measure what the plan asks, again while the reading cannot tell zero from the parent's
        effect (up to --repeats); the reading goes to `self._reading`."""
        c = self.cands
        if ask.fresh:  # the good end again (the drift check), again while too noisy to tell
            for n in range(1, self.options.repeats + 1):
                async for ev in self._measure(c.good, c.good_fp, Role.DRIFT, frozenset()):
                    yield ev
                judge = self.book.judge()
                after = self.book.values(c.good_fp, drift=True)[-n:]
                self._reading = r = judge.reading(after) if after else None
                if r is None or not plausible(r, ZERO) or not ask.precision or r.t * r.se <= ask.precision:
                    break
            self.drift, warning = drift_of(self.book, judge, c.good_fp)
            self.warnings += [warning] if warning else []
            return
        units = self._real(ask.units)
        profile, fp = c.profile(units)
        role = Role.GOOD if fp == c.good_fp else Role.BAD if fp == c.bad_fp else Role.CANDIDATE
        self.book.row(fp, role, profile.name, c.knob_names(units))
        interleave, fresh = self.options.interleave and role is Role.CANDIDATE, False
        while True:
            verdict = self.book.verdict(fp, judge)[0]
            n = len(self.book.values(fp))
            if verdict == "measured" and self.options.hand and role is Role.CANDIDATE:
                verdict = "done"  # judged by hand: one measurement to show, no repeats
            elif verdict == "measured" and ask.settle:  # a confirmation: until it is known either way
                reading = self.book.reading(fp, judge)
                verdict = "ambiguous" if reading is not None and not settled(ask, reading) else "done"
            elif verdict == "measured":
                reading = self.book.reading(fp, judge)
                wide = (
                    reading is not None
                    and ask.precision is not None
                    and reading.t * reading.se > ask.precision
                )
                unsure = reading is not None and not decided(reading, ask.parent)
                verdict = "ambiguous" if unsure or wide else "done"
            step = next_step(verdict, n, self.options.repeats, interleave=interleave, fresh_reference=fresh)
            if step is None or role is not Role.CANDIDATE and verdict != "need":
                break
            if step == "reference":  # an end between two runs of this candidate (--interleave)
                async for ev in self._reference():
                    yield ev
                judge, fresh = self.book.judge(), True
                continue
            async for ev in self._measure(profile, fp, role, units):
                yield ev
            judge, fresh = self.book.judge(), False
        row = self.book.update_row(fp, judge)
        if self.options.hand and role is Role.CANDIDATE and fp not in self.book.hand:
            yield TrialDone(row=row)
            self._judgement = asyncio.get_running_loop().create_future()
            yield AwaitJudgement(index=row.index, metric=row.metric, suggestion=row.judged)
            verdict_by_hand = await self._judgement
            self._judgement = None
            self.book.hand[fp] = verdict_by_hand
            if self.journal is not None:
                judged = BisectJudgementRecord(
                    bisect=self.id, fingerprint=fp, settings=self.settings.key(), judged=verdict_by_hand
                )
                self.journal.append(judged, sync=True)
            row = self.book.update_row(fp, judge)
        if role is Role.CANDIDATE:  # the ends' rows were shown when they were measured
            yield TrialDone(row=row)
        self._reading = self.book.reading(fp, judge)

    async def _reference(self) -> AsyncIterator[Any]:
        """One more measurement of an end, good and bad in turn (--interleave)."""
        c = self.cands
        good = reference_end(self._references) == "good"
        self._references += 1
        fp, role, profile = (c.good_fp, Role.GOOD, c.good) if good else (c.bad_fp, Role.BAD, c.bad)
        async for ev in self._measure(profile, fp, role, frozenset()):
            yield ev
        yield TrialDone(row=self.book.update_row(fp, self.book.judge()))

    async def _measure(
        self, profile: Profile, fp: str, role: Role, query: frozenset[int]
    ) -> AsyncIterator[Any]:
        await self._lock_box()
        row = self.book.row(fp, role, profile.name, self.cands.knob_names(query))
        spec = TrialSpec(
            bisect=self.id,
            index=row.index,
            role=role,
            profile=profile,
            fingerprint=fp,
            applied=row.applied,
            settings=self.settings,
            gate=self.gate,
            gate_judges=role is Role.CANDIDATE,
            ours=[*dict.fromkeys([*self._leftover, *self._mine])],
            expected_startup_s=self.book.expected_startup(),
            forget=role is Role.CANDIDATE,
        )
        yield TrialStarted(
            index=row.index,
            role=role,
            config=profile.name,
            applied=row.applied,
            fingerprint=fp,
            sample=len(self.book.cache.get(fp, [])) + 1,
        )
        self.launches += 1
        self._mine.add(profile.name)
        self.current = profile
        row.launches += 1
        row.cached = False
        trial = run_trial(self.remote, spec, journal=self.journal, clock=self.clock, nodes=self.nodes)
        async for item in trial:
            if isinstance(item, Measurement):
                self.book.add(item)
                self._durations.append(item.finished_at - item.started_at)
                self.warnings += [f"{profile.name}: {w}" for w in item.warnings if w not in self.warnings]
            else:
                yield item

    async def _measure_again(self) -> AsyncIterator[Any]:
        c = self.cands
        for fp in sorted(self._remeasure):
            known = self.book.rows.get(fp)
            cached = self.book.cache.get(fp, [])
            if known is None and not cached:
                continue
            names = set(known.applied if known else cached[-1].applied)
            query = frozenset(i for i, u in enumerate(c.units) if set(u.knobs) <= names)
            profile, _ = c.profile(query)
            role = known.role if known else cached[-1].role
            async for ev in self._measure(profile, fp, role, query):
                yield ev
            yield TrialDone(row=self.book.update_row(fp, self.book.judge()))
        self._remeasure.clear()

    # ---- progress and result -------------------------------------------------------------------
    def _states(self) -> KnobStates:
        plan, c = self.plan, self.cands
        states: dict[str, Any] = {}
        for i, unit in enumerate(c.units):
            if plan is None:
                state = "suspect"
            elif i not in self._map:  # searched before (the crash's knobs): named there
                named = any(i in {m[u] for u in p.culprits} for p, m in self._phases)
                state = "culprit" if named else "cleared"
            elif plan.result is not None:
                state = "culprit" if i in self._real(plan.result.culprits) else "cleared"
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
        c, warnings = self.cands, list(self.warnings)
        if self.options.interleave:  # the last ends moved the drift fit: show the ends as finally judged
            judge = self.book.judge()
            for row in self.book.end_rows():
                self.book.update_row(row.fingerprint, judge)
        evidence = judge.evidence()
        evidence.drift = self.drift
        plan, res = self.plan, self.plan.result if self.plan else None
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
            confirmed=bool(res and res.confirmed) if confirmed is None else confirmed,
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
