"""The report's and the compare's words for drift: "between #3 88.8 and #7 82.2 tok/s: ...".

Kept here so core.report (and the history verb) add one line each; snapshots are compared pairwise
between consecutive results, failed runs already left out by the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specdebug.core.drift.compare import drift_lines

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
