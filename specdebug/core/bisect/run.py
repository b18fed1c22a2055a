"""The bisection engine: the async iterator of typed events that the Bisect pane and the verb consume.

Ends first (once each when the noise known tells them 15 % apart, else again: ends.py), then the
plan's questions answered one by one, repeated while a reading cannot decide: from this
bisection's fresh journaled measurements when there are some, else by a trial; then the additive fit
over every reading before any answer with exit 0 (verify_phase.py), all within one knob at a time's
launches.  Judging is the judge's; the search is the plan's; launching is the trial's.  Controls for a
front end: pause after the current trial, a judgement by hand, measure a config again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any

from specdebug.core.bisect.book import Book, failure_kind
from specdebug.core.bisect.boxlock import hold_box
from specdebug.core.bisect.checks import busy_server, drift_of
from specdebug.core.bisect.ends import EndsPhase
from specdebug.core.bisect.finish import FinishPhase
from specdebug.core.bisect.gate import Gate, parse_gate
from specdebug.core.bisect.interleave import next_step, reference_end
from specdebug.core.bisect.judge import ZERO, Judge, Reading, plausible
from specdebug.core.bisect.knobs import NAME_SUFFIX, Candidates, settings_for
from specdebug.core.bisect.models import (
    AwaitJudgement,
    BisectOptions,
    Drift,
    EndsJudged,
    Judged,
    Measurement,
    Paused,
    Phase,
    Planned,
    Role,
    TrialDone,
    TrialProgress,
    TrialStarted,
)
from specdebug.core.bisect.plan import Plan
from specdebug.core.bisect.rules import Ask, decided, settled
from specdebug.core.bisect.state import MIN_END_RUNS, Clock
from specdebug.core.bisect.trial import Nodes, TrialError, TrialSpec, run_trial, stop_leftovers
from specdebug.core.bisect.verify_phase import VerifyPhase
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.records import BisectJudgementRecord
from specdebug.remote.api import Remote

__all__ = ["MIN_END_RUNS", "Bisection"]


class Bisection(EndsPhase, VerifyPhase, FinishPhase):
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
        self._proof = None
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

    async def _search(self, judge: Judge) -> AsyncIterator[Any]:
        """The plan's questions answered one by one, over the units in `self._map`."""
        c = self.cands
        names = [c.units[i].name for i in self._map]
        self.plan = Plan(len(self._map), names)
        self.plan.afford = self._afford
        while not self.plan.done:
            if self._remeasure:
                async for ev in self._measure_again():
                    yield ev
                judge = self.book.judge()
                # replay: answered questions come from the cache
                self.plan = Plan(len(self._map), names)
                self.plan.afford = self._afford
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
            if self.launches >= self._cap() and not self.options.hand and self._new_launch(ask):
                self.plan.result = self.plan.stop(
                    f"the search would need more launches than one knob at a time ({self._cap()}): "
                    "stopped (more --repeats allows more)"
                )
                break
            judge = self.book.judge()  # repeats (and interleaved ends) refine the noise
            async for ev in self._answer(ask, judge):
                yield ev
            self.plan.answer(self._reading)
            judge = self.book.judge()
            self.plan.refresh(
                {k: self.book.reading(c.profile(self._real(k))[1], judge) for k in list(self.plan.readings)}
            )
        async for ev in self._verify():
            yield ev

    async def _refuse_if_busy(self) -> None:
        """Refuse to start while a server of this session that this bisection did not launch runs."""
        busy = await busy_server(self.remote, self._others, self.nodes)
        if busy is not None:
            raise TrialError(
                f"{busy} of this session is running and holds the GPUs; the bisection stops only servers "
                "it launched: stop it first (specdebug stop -c ...)"
            )

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
            if verdict != "need" and self.launches >= self._cap():
                break  # no repeat past one knob at a time's launches: the plan decides on what it has
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
