"""The bisection's book-keeping: the session's trial cache, hand judgements, and this run's rows.

A measurement is keyed by the config's fingerprint and the bench settings, so the same config
measured in the same session with the same settings is never launched again (a rerun, a resume,
a replay after "measure again").  Judging a config from its measurements lives here too: start
failures per --failed-start, rejected arguments skipped, the gate, then the judge's noise band.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from specdebug.core.bisect.gate import Gate
from specdebug.core.bisect.interleave import detrend, drift_slope
from specdebug.core.bisect.judge import (
    FULL,
    LINES_SUFFIX,
    SE_SUFFIX,
    START_METRIC,
    ZERO,
    Judge,
    Reading,
    Within,
    plausible,
)
from specdebug.core.bisect.models import (
    BisectOptions,
    Judged,
    Measurement,
    Role,
    Status,
    TrialRow,
)
from specdebug.core.records import (
    BisectLaunchRecord,
    BisectResultRecord,
    BisectStartRecord,
    BisectStopRecord,
    BisectTrialRecord,
    JournalRecord,
    LaunchRecord,
    StopRecord,
)

END_FAILURES = 2  # runs of an end with no figure before it is taken as failing (end_needs_run)


def failure_kind(m: Measurement) -> str:
    """How a start failed: the server rejected its arguments, hung (timed out), or exited."""
    if m.status is Status.INVALID:
        return "rejects its arguments"
    return "hangs" if "timed out" in (m.reason or "") else "exits"


class Book:
    """Measurements by fingerprint, hand judgements, and the trial table of this run."""

    def __init__(
        self,
        options: BisectOptions,
        gate: Gate | None,
        ends: tuple[str, str],
        settings: str,
        *,
        bisect: str | None = None,
        now: float | None = None,
        fingerprint_of: Callable[[list[str]], str | None] | None = None,
    ) -> None:
        self.options, self.gate, self.ends, self.settings = options, gate, ends, settings
        self.bisect, self.now, self.fingerprint_of = bisect, now, fingerprint_of
        self.own_pids: set[int] = set()  # launched by this bisection (journal bisect_launch)
        self.dropped: dict[str, int] = {}  # why journaled measurements were not replayed -> how many
        self.cache: dict[str, list[Measurement]] = {}
        self.hand: dict[str, Judged] = {}
        self.rows: dict[str, TrialRow] = {}
        self.failed_ends: set[str] = set()
        self.start_mode = False  # the bad end fails to start: start / no start is the metric
        self.start_kind = ""  # how the bad end fails: exits | hangs | rejects its arguments

    def load(self, events: Sequence[JournalRecord]) -> dict[int, str]:
        """Fill the cache from a session journal; returns launches (pid -> profile) never stopped.
        (A trial record that does not validate was skipped, and said, by the journal.)"""
        launched: dict[int, str] = {}
        for ev in events:
            if isinstance(ev, BisectTrialRecord) and ev.trial.settings == self.settings:
                m = ev.trial.model_copy(deep=True)
                why = self._untrusted(m)
                if why:
                    self._drop(why)
                    continue
                self.cache.setdefault(m.fingerprint, []).append(m)
            # judgements by hand (bisect_judgement) stay in the journal as a record; never replayed
            elif isinstance(ev, LaunchRecord):
                launched[ev.server.pid] = ev.server.profile
            elif isinstance(ev, BisectLaunchRecord):
                launched[ev.pid] = ev.profile
                if self.bisect is None or ev.bisect in (self.bisect, None):
                    self.own_pids.add(ev.pid)
            elif isinstance(ev, StopRecord):
                if ev.stop.pid is not None:
                    launched.pop(ev.stop.pid, None)
            elif isinstance(ev, BisectStopRecord):
                launched.pop(ev.pid, None)
        return launched

    def _drop(self, why: str) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + 1

    def _untrusted(self, m: Measurement) -> str | None:
        """Why a journaled measurement may not stand in for a launch (None: it may)."""
        if self.bisect is not None and m.bisect != self.bisect:
            return "written by another bisection"
        if self.now is not None and self.options.max_age_s is not None:
            if not m.finished_at or self.now - m.finished_at > self.options.max_age_s:
                return f"older than --max-age {self.options.max_age_s:g} s"
        if self.fingerprint_of is not None and m.role is Role.CANDIDATE:
            if self.fingerprint_of(m.applied) != m.fingerprint:
                return "its knobs do not give its fingerprint"
        return None

    def add(self, m: Measurement) -> None:
        self.cache.setdefault(m.fingerprint, []).append(m)
        if m.role in (Role.GOOD, Role.BAD) and self.metric(m) is None:
            self.failed_ends.add(m.fingerprint)

    def metric(self, m: Measurement) -> float | None:
        if self.start_mode:  # 1: fails as the bad end does; 0: starts; None: fails another way (a flake?)
            if m.status not in (Status.FAILED_START, Status.INVALID):
                return 0.0
            return 1.0 if failure_kind(m) == self.start_kind else None
        return m.metrics.get(self.options.metric) if m.status is Status.OK else None

    def end_needs_run(self, fp: str, runs: int) -> bool:
        """An end with at most `runs` figures needs a run, unless it failed END_FAILURES times with none.
        Why not once: one failed start may be the box (a port, a timeout under load); taken as the
        end's behaviour, it turned a bisection into start / no start that blamed every knob."""
        failures = sum(1 for m in self.measurements(fp) if self.metric(m) is None)
        return len(self.values(fp)) <= runs and not (self.end_failed(fp) and failures >= END_FAILURES)

    def failed_to_start(self, fp: str) -> bool:
        return any(m.status in (Status.FAILED_START, Status.INVALID) for m in self.measurements(fp))

    def end_reason(self, fp: str) -> str:
        return next((m.reason for m in reversed(self.measurements(fp)) if m.reason), "no reason given")

    def measurements(self, fp: str, *, drift: bool = False) -> list[Measurement]:
        return [m for m in self.cache.get(fp, []) if (m.role is Role.DRIFT) == drift]

    def values(self, fp: str, *, drift: bool = False) -> list[float]:
        return [v for m in self.measurements(fp, drift=drift) if (v := self.metric(m)) is not None]

    def points(self, fp: str, *, drift: bool | None = False) -> list[tuple[float, float]]:
        """(time the benchmark finished, value); drift=None: every role."""
        ms = self.cache.get(fp, []) if drift is None else self.measurements(fp, drift=drift)
        return [(m.finished_at, v) for m in ms if (v := self.metric(m)) is not None]

    def slope(self) -> float | None:
        """The linear drift fitted to the ends (--interleave only; None: values are taken as read)."""
        if not self.options.interleave:
            return None
        return drift_slope([self.points(fp, drift=None) for fp in self.ends])

    def judged_values(self, fp: str) -> list[float]:
        """The values a judgement rests on: as read, or drift-corrected to the first end's time."""
        slope = self.slope()
        starts = [t for end in self.ends for t, _ in self.points(end, drift=None)]
        return detrend(self.points(fp), slope, min(starts) if starts else 0.0)

    def end_failed(self, fp: str) -> bool:
        """An end measured (in this run, or freshly journaled by this bisection) that gave no metric."""
        if self.start_mode:
            return False
        return not self.values(fp) and (fp in self.failed_ends or bool(self.measurements(fp)))

    def judge(self) -> Judge:
        o = self.options
        good, bad = self.ends
        if self.start_mode:
            return Judge(START_METRIC, self.values(good), self.values(bad), exact=True)
        others = [v for fp in self.cache if fp not in self.ends and len(v := self.judged_values(fp)) >= 2]
        return Judge(
            o.metric,
            self.judged_values(good),
            self.judged_values(bad),
            others=others,
            threshold=o.threshold,
            min_gap_pct=o.min_gap_pct,
            within=self.within(),
        )

    def within(self) -> list[Within]:
        """Every run's own noise where the metric is a server figure read from its log lines (its
        standard error over the lines, relative): what one launch tells of the noise (issue 39)."""
        name = self.options.metric
        out = []
        for ms in self.cache.values():
            for m in ms:
                value, se = m.metrics.get(name), m.metrics.get(name + SE_SUFFIX)
                lines = int(m.metrics.get(name + LINES_SUFFIX, 0))
                if m.status is Status.OK and value and se is not None and lines > 2:
                    out.append(Within(se / abs(value), lines - 2))
        return out

    def reading(self, fp: str, judge: Judge) -> Reading | None:
        """The share of the gap this config shows (None: it could not be measured)."""
        if fp in self.hand:
            return {Judged.GOOD: ZERO, Judged.BAD: FULL}.get(self.hand[fp])
        verdict = self.verdict(fp, judge)[0]
        if verdict == "bad":  # a failed start (--failed-start bad) or the gate: the whole effect
            return FULL
        if verdict != "measured":
            return None
        return judge.reading(self.judged_values(fp) if not self.start_mode else self.values(fp))

    def verdict(self, fp: str, judge: Judge) -> tuple[str, str | None, bool, float | None]:
        """(measured | bad | skip | need, reason, gated, gate value) from what is known: `bad` without a
        figure (a failed start with --failed-start bad, the gate)."""
        ms = self.measurements(fp)
        if not ms:
            return "need", None, False, None
        gate_value = next((m.gate.value for m in reversed(ms) if m.gate and m.gate.value is not None), None)
        if self.start_mode:
            return "measured", next((m.reason for m in ms if m.reason), None), False, gate_value
        for m in ms:
            if m.status is Status.INVALID:
                return "skip", m.reason, False, gate_value
        # an end that started when launched again is judged by its figures (see run.Bisection._ends)
        retried_end = fp in self.ends and bool(self.values(fp))
        for m in ms:
            if m.status is Status.FAILED_START and not retried_end:
                return ("bad" if self.options.failed_start == "bad" else "skip"), m.reason, False, gate_value
        if self.gate is not None and fp not in self.ends:
            for m in ms:
                g = m.gate
                if g and g.name == self.gate.name and g.value is not None and not self.gate.passes(g.value):
                    return "bad", f"gate {self.gate.expr}: {g.name} = {g.value:.2f}", True, gate_value
        values = self.judged_values(fp)
        if not values:
            failed = next((m for m in ms if m.status is Status.BENCH_FAILED), None)
            if failed is not None:
                return "skip", failed.reason, False, gate_value
            if any(m.status is Status.OK for m in ms):  # measured, but the figure is not in the result
                return "skip", f"the benchmark gave no {self.options.metric}", False, gate_value
            return "need", None, False, gate_value
        return "measured", None, False, gate_value

    def row(self, fp: str, role: Role, config: str, applied: list[str]) -> TrialRow:
        if fp not in self.rows:
            self.rows[fp] = TrialRow(
                index=len(self.rows), role=role, config=config, applied=applied, fingerprint=fp, cached=True
            )
        return self.rows[fp]

    def update_row(self, fp: str, judge: Judge) -> TrialRow:
        row = self.rows[fp]
        verdict, reason, gated, gate_value = self.verdict(fp, judge)
        values = self.values(fp) if self.start_mode else self.judged_values(fp)
        row.samples = [round(v, 4) for v in values]
        row.metric = statistics.fmean(row.samples) if row.samples else None
        row.gated, row.reason, row.gate_value = gated, reason, gate_value
        reading = self.reading(fp, judge)
        row.share = row.low = row.high = None
        if reading is not None:
            row.share, row.low, row.high = reading.share, reading.low, reading.high
        if fp in self.hand and row.role is Role.CANDIDATE:
            row.judged, row.reason = self.hand[fp], "judged by hand"
        elif row.role is Role.GOOD and not self.start_mode:
            row.judged = Judged.GOOD if row.samples else Judged.SKIP
        elif row.role is Role.BAD and not self.start_mode:
            row.judged = Judged.BAD if row.samples else Judged.SKIP
        elif reading is None:
            row.judged = Judged.BAD if verdict == "bad" else Judged.SKIP
        elif plausible(reading, ZERO) and plausible(reading, FULL):
            row.judged = Judged.UNCLEAR
            row.reason = row.reason or f"inside the noise after {len(row.samples)} measurement(s)"
        else:
            row.judged = Judged.BAD if reading.share >= 0.5 else Judged.GOOD
        if row.judged is Judged.SKIP and row.role is not Role.CANDIDATE and not row.reason:
            last = self.measurements(fp)[-1:]
            row.reason = last[0].reason if last else None
        return row

    def end_rows(self) -> list[TrialRow]:
        return [r for r in self.rows.values() if r.role in (Role.GOOD, Role.BAD)]

    def expected_startup(self) -> float | None:
        starts = [m.startup_s for ms in self.cache.values() for m in ms if m.startup_s]
        return statistics.median(starts) if starts else None


def unfinished(events: Sequence[JournalRecord]) -> BisectStartRecord | None:
    """The session's last bisection with a start and no result: what --resume and a reopened TUI continue."""
    started: dict[str, BisectStartRecord] = {}
    for ev in events:
        if isinstance(ev, BisectStartRecord):
            started.pop(ev.bisect, None)
            started[ev.bisect] = ev
        elif isinstance(ev, BisectResultRecord):
            started.pop(ev.result.bisect, None)
    return list(started.values())[-1] if started else None
