"""Whether this machine let a sim and a client keep the sim's modelled pace while a test measured it.

A figure read on the wall clock (a client's tok/s, a stream's cycle) equals the sim's model only where
the sim and the client got the CPU they asked for.  Beside busy loops they do not: the sim emits late
(a starved process cannot keep a deadline) and the client reads late, so the figure is honestly
slower (busy runs, 2026-12-06: a bench read 88.4 tok/s against the model's 94.0, a vLLM stream's
median cycle 28.9 ms against 20.0) — or faster where the client read the first token late and the
rest came at once (a stream's rate read 92.6 tok/s against 86.4).  Tests therefore measure the contention over their own measuring
window (Linux's CPU pressure, the share of wall time some task waited for a CPU; the load average
where pressure is not available) and compare strictly only where the CPU was not contended; else they
check only the order of magnitude (a unit or token-count fault still fails).  Accuracy on a quiet
machine is measured in tests/perf (bench_client.py against a bare client), not asserted here.
"""

from __future__ import annotations

import os
from types import TracebackType

from specdebug.core.bench import cpuwait

CONTENDED_SHARE = cpuwait.CONTENDED  # some task waited for a CPU more than this share of the window
SLOWEST = 4.0  # a contended figure may be up to this many times slower
FASTEST = 2.0  # ... or this many times faster (a client that read its first token late)


class CpuWatch:
    """`with CpuWatch() as cpu: <measure>`, then `cpu.contended` (inside the block: so far)."""

    def __init__(self) -> None:
        self._start: cpuwait.Pressure | None = None
        self._end: cpuwait.Pressure | None = None
        self._ended = False

    def __enter__(self) -> CpuWatch:
        self._start, self._end, self._ended = cpuwait.local_reading(), None, False
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end, self._ended = cpuwait.local_reading(), True

    @property
    def share(self) -> float | None:
        """The share of the window some task waited for a CPU (None without PSI): the product's
        reading and share (core.bench.cpuwait, which warns on a contended benchmark by the same line)."""
        return cpuwait.share(self._start, self._end if self._ended else cpuwait.local_reading())

    @property
    def contended(self) -> bool:
        share = self.share
        if share is not None:
            return share > CONTENDED_SHARE
        return os.getloadavg()[0] > 0.75 * (os.cpu_count() or 1)

    def describe(self) -> str:
        share = self.share
        how = f"CPU pressure {share:.0%}" if share is not None else f"load {os.getloadavg()[0]:.1f}"
        return f"{how}: {'contended' if self.contended else 'quiet'}"


def rate_ok(measured: float, model: float, rel: float, cpu: CpuWatch) -> bool:
    """A rate (tok/s): within `rel` of the model on a quiet machine; on a contended one, not slower
    than SLOWEST times nor faster than FASTEST times."""
    if not cpu.contended:
        return abs(measured / model - 1.0) <= rel
    return model / SLOWEST <= measured <= model * FASTEST


def duration_ok(measured: float, model: float, rel: float, cpu: CpuWatch) -> bool:
    """A duration (a cycle's ms): the same rule, the slow side being the longer one."""
    if not cpu.contended:
        return abs(measured / model - 1.0) <= rel
    return model / FASTEST <= measured <= model * SLOWEST
