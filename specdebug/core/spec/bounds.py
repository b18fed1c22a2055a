"""Sane ranges of the figures the speculation arithmetic reads from logs, /metrics and the stream.

Why: a log is text anybody can write; a 26-digit "Target verify" or a 400-digit accept length parses
as a float (or as inf), and the arithmetic then printed "cycle 55210519235942694516686848.00 ms" and
"predicts inf tok/s".  As `metrics` does with a NaN or an infinite series (shown as null, with a note
saying why), a figure outside its range is left out and the note names it, its value and its source:
the answer is "cannot tell", never a number nobody measured.
"""

from __future__ import annotations

import math

#: figure -> (lowest, highest, unit): a batch-1 speculative cycle on any hardware sits well inside
BOUNDS: dict[str, tuple[float, float, str]] = {
    "accept_len": (1.0, 64.0, "tokens per cycle"),  # >= 1: the bonus token; > 64 drafts: no engine
    "verify_ms": (0.01, 600_000.0, "ms"),
    "draft_ms": (0.0, 600_000.0, "ms"),
    "stream_cycle_ms": (0.01, 600_000.0, "ms"),
    "measured_tok_s": (0.001, 1_000_000.0, "tok/s"),
}


def bounded(name: str, value: float | None, source: str, notes: list[str]) -> float | None:
    """`value` when finite and inside its range, else None with a note appended to `notes`."""
    if value is None:
        return None
    low, high, unit = BOUNDS[name]
    if math.isfinite(value) and low <= value <= high:
        return value
    shown = f"{value:.6g}" if math.isfinite(value) else ("NaN" if math.isnan(value) else f"{value:+}")
    notes.append(
        f"{name} {shown} from {source or 'the result'} is outside [{low:g}, {high:g}] {unit}: left out"
    )
    return None
