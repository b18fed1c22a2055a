"""The report's and the compare's words for drift: "between #3 88.8 and #7 82.2 tok/s: ...".

Kept here so core.report (and the history verb) add one line each; snapshots are compared pairwise
between consecutive results, failed runs already left out by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specdebug.core.drift.compare import drift_lines, usable
from specdebug.core.records import BenchResultRecord, JournalRecord, LaunchRecord

if TYPE_CHECKING:
    from specdebug.core.report import HistoryEntry


def _tok(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f}"


def between(a: HistoryEntry, b: HistoryEntry) -> str | None:
    """One sentence of what changed on the box from result a to result b (None: nothing)."""
    lines = drift_lines(a.result.drift, b.result.drift)
    if not lines:
        return None
    head = f"between #{a.id} {_tok(a.result.headline())} and #{b.id} {_tok(b.result.headline())} tok/s"
    return f"{head}: {', '.join(lines)}"


def drift_markdown(entries: list[HistoryEntry]) -> list[str]:
    """The report section; empty when no result carries a snapshot."""
    if not any(e.result.drift for e in entries):
        return []
    out = ["## What changed on the box between runs", ""]
    said = [s for a, b in zip(entries, entries[1:], strict=False) if (s := between(a, b))]
    out += [f"- {s}" for s in said] or ["Nothing compared changed between consecutive runs."]
    return [*out, ""]


def drift_warning(events: Sequence[JournalRecord], fingerprint: str | None, snap: Any) -> str | None:
    """The bench warning: what changed on the box since the last result of the same config."""
    n, prev = 0, None
    for ev in events:
        if not isinstance(ev, BenchResultRecord):
            continue
        n += 1
        if fingerprint and ev.result.fingerprint == fingerprint and usable(ev.result.drift):
            prev = (n, ev.result.drift)
    if prev is None or not usable(snap):
        return None
    lines = drift_lines(prev[1], snap)
    if not lines:
        return None
    more = f" (+{len(lines) - 5} more: history --compare)" if len(lines) > 5 else ""
    return f"box changed since result #{prev[0]} of this config: {', '.join(lines[:5])}{more}"


def ends_drift(events: Sequence[JournalRecord], good_fp: str, bad_fp: str) -> list[str]:
    """What changed on the box between a bisection's ends: the snapshots of their latest launches
    (or benchmark results) in the journal, by fingerprint; one "cannot tell" line when one is missing."""
    last: dict[str, Any] = {}
    for ev in events:
        if isinstance(ev, LaunchRecord) and usable(ev.drift):
            last[ev.server.fingerprint] = ev.drift
        elif isinstance(ev, BenchResultRecord) and usable(ev.result.drift):
            last[str(ev.result.fingerprint)] = ev.result.drift
    if good_fp not in last or bad_fp not in last:
        return ["drift between the ends: cannot tell (no snapshot of both ends in the journal)"]
    return drift_lines(last[good_fp], last[bad_fp])
