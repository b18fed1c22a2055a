"""Metric series with bounded memory and the summary stats every front end shows.

n, mean, min, max and last are exact over all samples. p50/p90 are exact until a series holds
more than `reservoir` samples, then come from a uniform reservoir sample (seeded, so runs repeat).
A separate short ring of recent values feeds sparklines. Memory per series is therefore fixed no
matter how long a server runs or how fast it logs.
"""

from __future__ import annotations

import random
from array import array
from collections import Counter, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from specdebug.core.logs.events import LogMatch

if TYPE_CHECKING:
    from specdebug.core.logs.parser import PlainMatch

RESERVOIR = 65_536
RECENT = 240


# the numbers people look at first; the rest follow alphabetically
METRIC_ORDER = [
    "accept_len",
    "mean_acceptance_length",
    "accept_rate",
    "draft_acceptance_rate",
    "gen_throughput",
    "avg_generation_throughput",
    "accepted_throughput",
    "drafted_throughput",
    "input_throughput",
    "avg_prompt_throughput",
    "running_req",
    "queue_req",
    "token_usage",
    "kv_cache_usage",
]


def metric_rank(name: str) -> tuple[int, str]:
    base = name.partition("[")[0]
    return (METRIC_ORDER.index(base) if base in METRIC_ORDER else len(METRIC_ORDER), name)


class SeriesStats(BaseModel):
    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    min: float | None
    max: float | None
    last: float | None


def percentile(sorted_values: list[float] | array[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100) of already sorted values."""
    n = len(sorted_values)
    if n == 0:
        return None
    if n == 1:
        return float(sorted_values[0])
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


class Series:
    """One metric's samples: exact running aggregates + a reservoir + a recent ring."""

    __slots__ = ("n", "total", "lo", "hi", "last", "_res", "_cap", "_rng", "recent")

    def __init__(self, reservoir: int = RESERVOIR, recent: int = RECENT, seed: int = 0) -> None:
        self.n = 0
        self.total = 0.0
        self.lo = float("inf")
        self.hi = float("-inf")
        self.last: float | None = None
        self._res = array("d")
        self._cap = reservoir
        self._rng = random.Random(seed)
        self.recent: deque[float] = deque(maxlen=recent)

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        if value < self.lo:
            self.lo = value
        if value > self.hi:
            self.hi = value
        self.last = value
        self.recent.append(value)
        if len(self._res) < self._cap:
            self._res.append(value)
        else:
            j = self._rng.randrange(self.n)
            if j < self._cap:
                self._res[j] = value

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.add(v)

    def stats(self) -> SeriesStats:
        if self.n == 0:
            return SeriesStats(n=0, mean=None, p50=None, p90=None, min=None, max=None, last=None)
        ordered = sorted(self._res)
        return SeriesStats(
            n=self.n,
            mean=self.total / self.n,
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            min=self.lo,
            max=self.hi,
            last=self.last,
        )


class MetricStore:
    """All series of one log, kept twice: every sample, and only samples after warmup.

    Stats leave warmup samples out by default, but only once a warmup-done marker was seen; a log
    without any marker (an excerpt) counts everything. List-valued metrics (vLLM per-position
    acceptance) are stored per position as NAME[i] and regrouped into lists by `summary`.
    """

    def __init__(self, reservoir: int = RESERVOIR, recent: int = RECENT) -> None:
        self._all: dict[str, Series] = {}
        self._post: dict[str, Series] = {}
        self._reservoir = reservoir
        self._recent = recent
        self.marker_seen = False
        self.events: Counter[str] = Counter()

    def _series(self, table: dict[str, Series], name: str) -> Series:
        s = table.get(name)
        if s is None:
            s = table[name] = Series(self._reservoir, self._recent, seed=len(table))
        return s

    def add_match(self, match: LogMatch | PlainMatch) -> None:
        self.events[match.event] += 1
        for ev in match.also:
            self.events[ev] += 1
        if match.event in ("ready", "warmup_done") or "ready" in match.also:
            self.marker_seen = True
        warmup = match.warmup
        all_, post = self._all, self._post
        for name, value in match.metrics.items():  # the hot path (every batch line): add() inlined
            if value.__class__ is not float:
                self.add(name, value, warmup=warmup)
                continue
            (all_.get(name) or self._series(all_, name)).add(value)
            if not warmup:
                (post.get(name) or self._series(post, name)).add(value)

    def add(self, name: str, value: float | list[float], *, warmup: bool = False) -> None:
        if isinstance(value, list):
            for i, v in enumerate(value):
                self.add(f"{name}[{i}]", v, warmup=warmup)
            return
        self._series(self._all, name).add(value)
        if not warmup:
            self._series(self._post, name).add(value)

    def names(self) -> list[str]:
        return list(self._all)

    def series(self, name: str, *, include_warmup: bool = False) -> Series | None:
        table = self._all if include_warmup or not self.marker_seen else self._post
        return table.get(name)

    def summary(self, *, include_warmup: bool = False) -> dict[str, dict[str, Any]]:
        """{NAME: {n, mean, p50, p90, min, max, last}}; list metrics give lists per key."""
        table = self._all if include_warmup or not self.marker_seen else self._post
        out: dict[str, dict[str, Any]] = {}
        grouped: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for name in self._all:  # keep first-seen order
            s = table.get(name)
            st = (
                s.stats().model_dump()
                if s
                else SeriesStats(
                    n=0, mean=None, p50=None, p90=None, min=None, max=None, last=None
                ).model_dump()
            )
            if name.endswith("]") and "[" in name:
                base, _, idx = name[:-1].rpartition("[")
                if idx.isdigit():
                    grouped.setdefault(base, []).append((int(idx), st))
                    if base not in out:
                        out[base] = {}
                    continue
            if st["n"] or name not in out:
                out[name] = st
        for base, parts in grouped.items():
            parts.sort()
            merged: dict[str, Any] = {"n": max(p["n"] for _, p in parts)}
            for key in ("mean", "p50", "p90", "min", "max", "last"):
                merged[key] = [p[key] for _, p in parts]
            out[base] = merged
        return {k: v for k, v in out.items() if v.get("n")}
