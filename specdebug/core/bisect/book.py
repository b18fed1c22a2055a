"""The bisection's book-keeping: the session's trial cache, hand judgements, and this run's rows.

A measurement is keyed by the config's fingerprint and the bench settings, so the same config
measured in the same session with the same settings is never launched again (a rerun, a resume,
a replay after "measure again").  Judging a config from its measurements lives here too: start
failures per --failed-start, rejected arguments skipped, the gate, then the judge's noise band.
"""

from __future__ import annotations

import statistics
from typing import Any

from specdebug.core.bisect.gate import Gate
from specdebug.core.bisect.interleave import detrend, drift_slope
from specdebug.core.bisect.judge import Judge
from specdebug.core.bisect.models import (
    JUDGEMENT_EVENT,
    LAUNCH_EVENT,
    RESULT_EVENT,
    START_EVENT,
    STOP_EVENT,
    TRIAL_EVENT,
    BisectOptions,
    Judged,
    Measurement,
    Role,
    Status,
    TrialRow,
)


class Book:
    """Measurements by fingerprint, hand judgements, and the trial table of this run."""

    def __init__(
        self, options: BisectOptions, gate: Gate | None, ends: tuple[str, str], settings: str
    ) -> None:
        self.options, self.gate, self.ends, self.settings = options, gate, ends, settings
        self.cache: dict[str, list[Measurement]] = {}
        self.hand: dict[str, Judged] = {}
        self.rows: dict[str, TrialRow] = {}
        self.failed_ends: set[str] = set()

    def load(self, events: list[dict[str, Any]]) -> dict[int, str]:
        """Fill the cache from a session journal; returns launches (pid -> profile) never stopped."""
        launched: dict[int, str] = {}
        for ev in events:
            kind = ev.get("kind")
            if kind == TRIAL_EVENT and ev.get("settings") == self.settings:
                try:
                    m = Measurement.model_validate({k: v for k, v in ev.items() if k not in ("ts", "kind")})
                except ValueError:
                    continue
                self.cache.setdefault(m.fingerprint, []).append(m)
            elif kind == JUDGEMENT_EVENT and ev.get("settings") == self.settings:
                self.hand[ev["fingerprint"]] = Judged(ev["judged"])
            elif kind in ("launch", LAUNCH_EVENT) and isinstance(ev.get("pid"), int):
                launched[ev["pid"]] = str(ev.get("profile", ""))
            elif kind in ("stop", STOP_EVENT):
                launched.pop(ev.get("pid"), None)  # type: ignore[arg-type]
        return launched

    def add(self, m: Measurement) -> None:
        self.cache.setdefault(m.fingerprint, []).append(m)
        if m.role in (Role.GOOD, Role.BAD) and self.metric(m) is None:
            self.failed_ends.add(m.fingerprint)

    def metric(self, m: Measurement) -> float | None:
        return m.metrics.get(self.options.metric) if m.status is Status.OK else None

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
        """An end whose measurement in this run gave no metric (a stale failure in the cache is retried)."""
        return fp in self.failed_ends and not self.values(fp)

    def judge(self) -> Judge:
        o = self.options
        good, bad = self.ends
        return Judge(
            o.metric,
            self.judged_values(good),
            self.judged_values(bad),
            threshold=o.threshold,
            min_gap_pct=o.min_gap_pct,
        )

    def verdict(self, fp: str, judge: Judge) -> tuple[str, str | None, bool, float | None]:
        """(good | bad | skip | ambiguous | need, reason, gated, gate value) from what is known."""
        ms = self.measurements(fp)
        if not ms:
            return "need", None, False, None
        gate_value = next((m.gate.value for m in reversed(ms) if m.gate and m.gate.value is not None), None)
        for m in ms:
            if m.status is Status.INVALID:
                return "skip", m.reason, False, gate_value
        for m in ms:
            if m.status is Status.FAILED_START:
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
        return judge.classify(values), None, False, gate_value

    def row(self, fp: str, role: Role, config: str, applied: list[str]) -> TrialRow:
        if fp not in self.rows:
            self.rows[fp] = TrialRow(
                index=len(self.rows), role=role, config=config, applied=applied, fingerprint=fp, cached=True
            )
        return self.rows[fp]

    def update_row(self, fp: str, judge: Judge) -> TrialRow:
        row = self.rows[fp]
        verdict, reason, gated, gate_value = self.verdict(fp, judge)
        row.samples = [round(v, 4) for v in self.judged_values(fp)]
        row.metric = statistics.fmean(row.samples) if row.samples else None
        row.gated, row.reason, row.gate_value = gated, reason, gate_value
        if fp in self.hand and row.role is Role.CANDIDATE:
            row.judged, row.reason = self.hand[fp], "judged by hand"
        elif row.role is Role.GOOD:
            row.judged = Judged.GOOD if row.samples else Judged.SKIP
        elif row.role is Role.BAD:
            row.judged = Judged.BAD if row.samples else Judged.SKIP
        else:
            row.judged = {"good": Judged.GOOD, "bad": Judged.BAD, "skip": Judged.SKIP}.get(
                verdict, Judged.UNCLEAR
            )
            if row.judged is Judged.UNCLEAR and not reason:
                row.reason = f"inside the noise band after {len(row.samples)} measurement(s)"
        if row.judged is Judged.SKIP and row.role is not Role.CANDIDATE and not row.reason:
            last = self.measurements(fp)[-1:]
            row.reason = last[0].reason if last else None
        return row

    def end_rows(self) -> list[TrialRow]:
        return [r for r in self.rows.values() if r.role in (Role.GOOD, Role.BAD)]

    def expected_startup(self) -> float | None:
        starts = [m.startup_s for ms in self.cache.values() for m in ms if m.startup_s]
        return statistics.median(starts) if starts else None


def unfinished(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The session's last bisection with a start and no result: what --resume and a reopened TUI continue."""
    started: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.get("kind") == START_EVENT:
            started.pop(ev.get("bisect", ""), None)
            started[ev.get("bisect", "")] = ev
        elif ev.get("kind") == RESULT_EVENT:
            started.pop(ev.get("bisect", ""), None)
    return list(started.values())[-1] if started else None
