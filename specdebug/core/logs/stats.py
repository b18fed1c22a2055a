"""Metric series with bounded memory and the summary stats every front end shows.

n, mean, min, max and last are exact over all samples. p50/p90 are exact until a series holds
more than `reservoir` samples, then come from a uniform reservoir sample (seeded, so runs repeat):
past that size they carry sampling error (with 65,536 samples kept, a percentile's rank is off by
about 0.2 percentage points, one standard error). The reservoir skips ahead (Li's Algorithm L): it
draws random numbers only for the samples it keeps, O(k log(n/k)) instead of one per sample, so a
long log costs no more per line than a short one. It is still a uniform sample, but not the same
one the earlier per-sample draw (Algorithm R) picked: p50/p90 past the reservoir size differ from
older versions' by sampling error only.
A separate short ring of recent values feeds sparklines. Memory per series is therefore fixed no
matter how long a server runs or how fast it logs.
"""

from __future__ import annotations

import operator
import random
import sys
from array import array
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from functools import reduce
from itertools import accumulate, chain, groupby, repeat
from math import log, log1p
from operator import call
from typing import TYPE_CHECKING, Any

from specdebug.core.logs.events import LogMatch
from specdebug.core.model import Model

if TYPE_CHECKING:
    from specdebug.core.logs.parser import PlainMatch

RESERVOIR = 65_536
RECENT = 240
_FLOATS = {float}
FLUSH = 4096  # pending samples per series before they are folded in (bounds their memory)
PLAN = 256  # reservoir replacements planned (random numbers drawn) at a time
_BELOW_ONE = 1.0 - 2.0**-53  # the largest float below 1


# the numbers people look at first; the rest follow alphabetically
METRIC_ORDER = [
    "accept_len",
    "mean_acceptance_length",
    "accept_rate",
    "draft_accept_rate",
    "draft_acceptance_rate",
    "gen_throughput",
    "avg_generation_throughput",
    "verify_ms",
    "draft_ms",
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


class SeriesStats(Model):
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


if sys.version_info < (3, 12):

    def _sum_on(total: float, vals: list[float]) -> float:
        """total + vals[0] + vals[1] + ...: sum() of floats adds one by one in order up to 3.11."""
        return sum(vals, total)

else:

    def _sum_on(total: float, vals: list[float]) -> float:
        """(3.12's sum() of floats compensates rounding: no longer what adding one by one gives)"""
        return reduce(operator.add, vals, total)


class Series:
    """One metric's samples: exact running aggregates + a reservoir + a recent ring.

    `add` only appends to `pending` (the log path adds about a dozen samples per batch line); the
    aggregates catch up in one pass when read or when FLUSH samples wait. The result equals adding
    one by one: sums in the same order, min/max by the same comparisons, and the reservoir keeps
    the same samples: which sample numbers replace which slots is planned PLAN replacements at a
    time from the generator alone (`_plan_more`), never from how samples were batched."""

    __slots__ = (
        "_n",
        "_total",
        "_lo",
        "_hi",
        "_last",
        "_res_data",
        "_cap",
        "_rng",
        "_recent",
        "pending",
        "_w",
        "_take",
        "_slots",
    )

    def __init__(self, reservoir: int = RESERVOIR, recent: int = RECENT, seed: int = 0) -> None:
        self._n = 0
        self._total = 0.0
        self._lo = float("inf")
        self._hi = float("-inf")
        self._last: float | None = None
        self._res_data = array("d")
        self._cap = reservoir
        self._rng = random.Random(seed)
        self._recent: deque[float] = deque(maxlen=recent)
        self.pending: list[float] = []  # MetricStore's hot path appends here directly
        # Algorithm L's state once the reservoir is full: W, and the planned replacements (sample
        # numbers, counted from 1, ascending; and the slot each one goes to), consumed from the end
        self._w = 0.0
        self._take: list[int] = []
        self._slots: list[int] = []

    def add(self, value: float) -> None:
        self.pending.append(value)
        if len(self.pending) >= FLUSH:
            self.flush()

    def extend(self, values: Iterable[float]) -> None:
        self.pending.extend(values)
        if len(self.pending) >= FLUSH:
            self.flush()

    def flush(self) -> None:
        """Fold the pending samples into the aggregates, in order (cleared in place: the list's
        `append` may be held by a MetricStore)."""
        vals = self.pending
        if not vals:
            return
        n0 = self._n
        self._n = n0 + len(vals)
        self._total = _sum_on(self._total, vals)  # left to right, like one by one
        # min/max starting from the old bound replace on the same `<`/`>` tests as one by one (NaN too)
        self._lo = min(chain((self._lo,), vals))
        self._hi = max(chain((self._hi,), vals))
        self._last = vals[-1]
        self._recent.extend(vals[-(self._recent.maxlen or len(vals)) :])
        room = self._cap - len(self._res_data)
        if room > 0:
            self._res_data.extend(vals[:room])
            if len(self._res_data) == self._cap:  # just filled: plan the first replacements
                self._w = self._shrunk(1.0)
                self._plan_from(self._cap)
        if self._take:
            self._replace(vals, n0)
        vals.clear()

    def _shrunk(self, w: float) -> float:
        return w * float((1.0 - self._rng.random()) ** (1.0 / self._cap))

    def _plan_from(self, last: int) -> None:
        """PLAN replacements after sample number `last` (Algorithm L: the gap to the next kept
        sample is geometric with parameter W; W shrinks by a factor u**(1/k) at each one kept;
        the slot is uniform). Random numbers are drawn in the same order whatever the batching."""
        rng, cap = self._rng, self._cap
        rnd = rng.random
        gaps = list(map(operator.sub, repeat(1.0, PLAN), map(call, repeat(rnd, PLAN))))  # (0, 1]: for log()
        shrink = list(map(operator.sub, repeat(1.0, PLAN), map(call, repeat(rnd, PLAN))))
        if cap & (cap - 1) == 0:  # (RESERVOIR is a power of two: one getrandbits per slot)
            slots = list(map(rng.getrandbits, repeat(cap.bit_length() - 1, PLAN)))
        else:
            slots = list(map(rng.randrange, repeat(cap, PLAN)))
        ws = list(accumulate(map(pow, shrink, repeat(1.0 / cap)), operator.mul, initial=self._w))
        self._w = ws.pop()
        # W stays inside (0, 1), so log1p(-W) is finite and negative; it only shrinks, so its first
        # and last values bound it (outside only by rounding, in a 1e-11 case: clamped)
        if ws[0] >= _BELOW_ONE or ws[-1] <= 1e-300:
            ws = [min(max(w, 1e-300), _BELOW_ONE) for w in ws]
        gaps_left = map(int, map(operator.truediv, map(log, gaps), map(log1p, map(operator.neg, ws))))
        # sample numbers: last + the gaps so far + one per replacement
        take = list(map(operator.add, accumulate(gaps_left, initial=last), range(PLAN + 1)))[1:]
        take.reverse()  # the next one at the end
        slots.reverse()
        self._take, self._slots = take, slots

    def _replace(self, vals: list[float], n0: int) -> None:
        """Apply the planned replacements that fall among `vals` (sample numbers n0+1 .. n0+len),
        in sample order (a later one into the same slot wins, as one by one)."""
        res, end = self._res_data, n0 + len(vals)
        while self._take[-1] <= end:
            take, slots = self._take, self._slots
            lo = bisect_left(take, -end, key=operator.neg)  # (descending: the first one <= end)
            at = map(operator.sub, reversed(take[lo:]), repeat(n0 + 1))
            deque(map(res.__setitem__, reversed(slots[lo:]), map(vals.__getitem__, at)), maxlen=0)
            last = take[lo]
            del take[lo:], slots[lo:]
            if not take:
                self._plan_from(last)

    def clone(self) -> Series:
        """An independent copy in the same state (its generator too): it goes on as this one would."""
        self.flush()
        twin = Series(self._cap, self._recent.maxlen or RECENT)
        twin._n, twin._total, twin._lo, twin._hi, twin._last = (
            self._n,
            self._total,
            self._lo,
            self._hi,
            self._last,
        )
        twin._res_data = array("d", self._res_data)
        twin._rng.setstate(self._rng.getstate())
        twin._w, twin._take, twin._slots = self._w, list(self._take), list(self._slots)
        twin._recent.extend(self._recent)
        return twin

    @property
    def n(self) -> int:
        self.flush()
        return self._n

    @property
    def total(self) -> float:
        self.flush()
        return self._total

    @property
    def lo(self) -> float:
        self.flush()
        return self._lo

    @property
    def hi(self) -> float:
        self.flush()
        return self._hi

    @property
    def last(self) -> float | None:
        self.flush()
        return self._last

    @property
    def recent(self) -> deque[float]:
        self.flush()
        return self._recent

    @property
    def _res(self) -> array[float]:
        self.flush()
        return self._res_data

    def stats(self) -> SeriesStats:
        self.flush()
        if self._n == 0:
            return SeriesStats(n=0, mean=None, p50=None, p90=None, min=None, max=None, last=None)
        ordered = sorted(self._res_data)
        return SeriesStats(
            n=self._n,
            mean=self._total / self._n,
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            min=self._lo,
            max=self._hi,
            last=self._last,
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
        # metrics dicts of matched lines not yet in the series, all with the same warmup flag
        self._rows: list[dict[str, float | list[float]]] = []
        self._rows_warmup = False
        self._reservoir = reservoir
        self._recent = recent
        self.marker_seen = False
        self.events: Counter[str] = Counter()

    def _series(self, table: dict[str, Series], name: str) -> Series:
        s = table.get(name)
        if s is None:
            s = table[name] = Series(self._reservoir, self._recent, seed=len(table))
        return s

    def _warm(self, name: str) -> Series:
        """The all-samples series of `name`, for a warmup sample (one the post-warmup series must
        not get): a series still shared with its post-warmup twin is copied apart first."""
        s = self._series(self._all, name)
        if self._post.get(name) is s:
            self._post[name] = s.clone()
        return s

    def _both(self, name: str) -> tuple[Series, ...]:
        """The all-samples and post-warmup series of `name`, for a sample after warmup. While they
        would hold the same samples and were seeded alike (a log without warmup samples, or with
        them only before any series began), they are one object: each sample is taken, and each
        reservoir draw made, once instead of twice (`_warm` parts them at the first difference)."""
        a, p = self._all.get(name), self._post.get(name)
        if p is None:
            seed = len(self._post)
            if a is None:
                a = self._series(self._all, name)
                if seed == len(self._all) - 1:  # (a is new: no sample yet)
                    self._post[name] = a
                    return (a,)
            p = self._series(self._post, name)
        elif a is None:
            a = self._series(self._all, name)
        return (a,) if a is p else (a, p)

    def add_match(self, match: LogMatch | PlainMatch) -> None:
        """Count the line's events; its metrics dict is kept as a row until the next read or FLUSH
        rows (it must not change meanwhile: matches are read-only by convention)."""
        ev, also, events = match.event, match.also, self.events
        events[ev] += 1
        for e in also:
            events[e] += 1
        if ev in ("ready", "warmup_done") or "ready" in also:
            self.marker_seen = True
        metrics = match.metrics
        if metrics:
            if match.warmup != self._rows_warmup:
                self._fold_rows()
                self._rows_warmup = match.warmup
            rows = self._rows
            rows.append(metrics)
            if len(rows) >= FLUSH:
                self._fold_rows()

    def add_columns(
        self,
        events: Sequence[tuple[str, int]],
        names: Sequence[str],
        cols: Sequence[list[float]],
        warmup: bool,
    ) -> None:
        """Lines of stat events (event, how many) whose metrics, in line order, are `names` -> the
        `cols` (floats): the same series, in the same order, as `add_match` of each line (scan's
        block path: no match object, no dict per line)."""
        for event, count in events:
            self.events[event] += count
        self._fold_rows()
        self._rows_warmup = warmup
        self._extend(names, cols, warmup)

    def _extend(self, names: Sequence[str], cols: Iterable[Sequence[float]], warmup: bool) -> None:
        for name, col in zip(names, cols, strict=True):
            if warmup:
                self._warm(name).extend(col)
                continue
            for s in self._both(name):
                s.extend(col)

    def _fold_rows(self) -> None:
        """Rows into series. A run of rows with the same keys and only float values goes column by
        column (zip and extend: C loops); a run holding anything else goes value by value. Series
        are created in the order one-by-one adds would create them (their seeds depend on it)."""
        rows, warmup = self._rows, self._rows_warmup
        if not rows:
            return
        self._rows = []
        for keys, group in groupby(rows, tuple):
            run = list(group)
            cols = list(zip(*map(dict.values, run), strict=True))
            if all(set(map(type, col)) == _FLOATS for col in cols):
                self._extend(keys, cols, warmup)
                continue
            for metrics in run:
                for name, value in metrics.items():
                    self._add_now(name, value, warmup)

    def flush(self) -> None:
        """Fold pending rows and samples in (reads do it themselves)."""
        self._fold_rows()
        for table in (self._all, self._post):
            for s in table.values():
                s.flush()

    def add(self, name: str, value: float | list[float], *, warmup: bool = False) -> None:
        self._fold_rows()
        self._add_now(name, value, warmup)

    def _add_now(self, name: str, value: float | list[float], warmup: bool) -> None:
        if isinstance(value, list):
            for i, v in enumerate(value):
                self._add_now(f"{name}[{i}]", v, warmup)
            return
        if warmup:
            self._warm(name).add(value)
            return
        for s in self._both(name):
            s.add(value)

    def names(self) -> list[str]:
        self._fold_rows()
        return list(self._all)

    def series(self, name: str, *, include_warmup: bool = False) -> Series | None:
        self._fold_rows()
        table = self._all if include_warmup or not self.marker_seen else self._post
        return table.get(name)

    def summary(self, *, include_warmup: bool = False) -> dict[str, dict[str, Any]]:
        """{NAME: {n, mean, p50, p90, min, max, last}}; list metrics give lists per key."""
        self._fold_rows()
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
