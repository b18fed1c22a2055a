"""The typed events a benchmark run streams: progress counters, output lines, then the result.

Their own module so the bench verb, the bench pane and a bisection trial can name them without the
runner; every consumer sees the same stream (`runner.bench_events`).
"""

from __future__ import annotations

from typing import Literal

from specdebug.core.bench.models import BenchProgress, BenchResult
from specdebug.core.model import Model


class BenchLine(Model):
    """One line of an external benchmark command's output (secrets masked)."""

    type: Literal["line"] = "line"
    text: str


class BenchDone(Model):
    """The run is over: its result, already judged and journaled (fsync)."""

    type: Literal["done"] = "done"
    result: BenchResult


BenchEvent = BenchProgress | BenchLine | BenchDone
"""Everything `bench_events` yields; the last one is a BenchDone."""
