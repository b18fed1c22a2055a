"""Judging a measurement good or bad: the midpoint of the two ends, the noise band, drift.

Pure.  A config is bad when its metric is closer to the bad end than to the good end (the midpoint
of the ends as measured in this run), unless a threshold is given.  With repeats the ends' spread
gives a noise band: a config whose mean lies inside it is measured again, and stays "unclear" if
the repeats do not settle it.  Whether bisection can be trusted at all is decided first: the ends
must be told apart (outside the noise with repeats; at least --min-gap apart without).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from specdebug.core.bench.models import BenchResult
from specdebug.core.bisect.models import Evidence

Z_BAND = 2.0  # a single measurement within 2 sd of the threshold is ambiguous
Z_ENDS = 3.0  # the ends (and drift) must differ by 3 standard errors
CLEAR_FACTOR = 2.0  # ends this far beyond Z_ENDS need no more repeats
MIN_SPREAD = 0.003  # relative floor of the spread: two equal readings do not prove zero noise

_THROUGHPUT = ("output_tok_s", "decode_tok_s", "request_throughput", "total_tok_s", "input_tok_s")
_SERVER = ("accept_len", "verify_ms", "gen_throughput")
_LATENCY = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_STATS = ("mean", "p50", "p90", "p95", "p99", "max")


def known_metrics() -> list[str]:
    names = [*_THROUGHPUT, "tok_s", *_SERVER]
    for lat in _LATENCY:
        names += [lat, *(f"{lat}.{s}" for s in _STATS)]
    return names


def higher_is_better(metric: str) -> bool:
    """Throughput and acceptance: higher is better; times (anything in ms) lower."""
    return not (metric.endswith("_ms") or "_ms." in metric)


def metrics_of(result: BenchResult) -> dict[str, float]:
    """Every figure a judge may ask for, flat (`ttft_ms` is the p50, else the mean)."""
    out: dict[str, float] = {}
    for name in _THROUGHPUT:
        value = getattr(result, name, None)
        if value is not None:
            out[name] = float(value)
    head = result.headline()
    if head is not None:
        out["tok_s"] = float(head)
    for lat in _LATENCY:
        stats = getattr(result, lat)
        for s in _STATS:
            value = getattr(stats, s)
            if value is not None:
                out[f"{lat}.{s}"] = float(value)
        main = stats.p50 if stats.p50 is not None else stats.mean
        if main is not None:
            out[lat] = float(main)
    if result.server is not None:
        for name in _SERVER:
            value = getattr(result.server, name)
            if value is not None:
                out[name] = float(value)
        for name, value in (result.server.extra or {}).items():
            out.setdefault(name, float(value))
    return out


def spread(good: Sequence[float], bad: Sequence[float]) -> float | None:
    """Pooled run-to-run sd of the ends' repeats (None until some end was measured twice)."""
    groups = [list(g) for g in (good, bad) if len(g) >= 2]
    if not groups:
        return None
    ss = sum(sum((x - statistics.fmean(g)) ** 2 for x in g) for g in groups)
    dof = sum(len(g) - 1 for g in groups)
    scale = statistics.fmean([abs(x) for g in (good, bad) for x in g]) or 1.0
    return max(math.sqrt(ss / dof), MIN_SPREAD * scale)


class Judge:
    """The ends as measured, and the rule every candidate is held to."""

    def __init__(
        self,
        metric: str,
        good: Sequence[float],
        bad: Sequence[float],
        *,
        threshold: float | None = None,
        min_gap_pct: float = 5.0,
    ) -> None:
        self.metric = metric
        self.higher = higher_is_better(metric)
        self.good = list(good)
        self.bad = list(bad)
        self.given = threshold
        self.min_gap_pct = min_gap_pct
        self.good_mean = statistics.fmean(self.good) if self.good else None
        self.bad_mean = statistics.fmean(self.bad) if self.bad else None
        self.sd = spread(self.good, self.bad)
        if threshold is not None:
            self.threshold: float | None = threshold
        elif self.good_mean is not None and self.bad_mean is not None:
            self.threshold = (self.good_mean + self.bad_mean) / 2
        else:
            self.threshold = None

    def band(self, n: int = 1) -> float | None:
        return None if self.sd is None else Z_BAND * self.sd / math.sqrt(max(n, 1))

    def ends(self) -> tuple[bool, bool, str]:
        """(distinguishable, clear enough to stop repeating, why) for the ends measured so far."""
        g, b = self.good_mean, self.bad_mean
        if g is None or b is None:
            return False, False, "the ends are not measured yet"
        gap = abs(g - b)
        gap_pct = gap / abs(g) * 100 if g else math.inf
        if self.given is not None:
            t = self.given
            good_side = g > t if self.higher else g < t
            bad_side = b <= t if self.higher else b >= t
            if not (good_side and bad_side):
                return False, True, f"the ends ({g:.2f} good, {b:.2f} bad) are not on both sides of {t:g}"
        if self.sd is None:
            ok = gap_pct >= self.min_gap_pct
            why = f"ends differ by {gap_pct:.1f}% ({g:.2f} vs {b:.2f}); noise unknown with one run each, "
            why += f"--min-gap {self.min_gap_pct:g}%"
            return ok, True, why
        se = self.sd * math.sqrt(1 / len(self.good) + 1 / len(self.bad))
        z = gap / se if se else math.inf
        ok = z >= Z_ENDS
        why = f"ends differ by {gap_pct:.1f}% ({g:.2f} vs {b:.2f}), {z:.1f} standard errors "
        why += f"(run-to-run sd {self.sd:.2f} over {len(self.good)}+{len(self.bad)} runs; needs {Z_ENDS:g})"
        return ok, ok and z >= Z_ENDS * CLEAR_FACTOR, why

    def classify(self, samples: Sequence[float]) -> str:
        """good | bad | ambiguous (inside the noise band, or exactly on the threshold)."""
        if not samples or self.threshold is None:
            return "ambiguous"
        mean = statistics.fmean(samples)
        band = self.band(len(samples))
        if band is not None and abs(mean - self.threshold) < band:
            return "ambiguous"
        if mean == self.threshold:
            return "ambiguous"
        if self.given is None and self.good_mean is not None and self.bad_mean is not None:
            closer_bad = abs(mean - self.bad_mean) < abs(mean - self.good_mean)
            return "bad" if closer_bad else "good"
        worse = mean < self.threshold if self.higher else mean > self.threshold
        return "bad" if worse else "good"

    def drifted(self, before: Sequence[float], after: float) -> bool:
        """The good end measured again at the end moved beyond the noise."""
        if self.sd is None or not before:
            return False
        se = self.sd * math.sqrt(1 + 1 / len(before))
        return abs(after - statistics.fmean(before)) > Z_ENDS * se

    def evidence(self) -> Evidence:
        ok, _, why = self.ends()
        g, b = self.good_mean, self.bad_mean
        return Evidence(
            metric=self.metric,
            higher_is_better=self.higher,
            good_samples=[round(x, 4) for x in self.good],
            bad_samples=[round(x, 4) for x in self.bad],
            good_mean=g,
            bad_mean=b,
            threshold=self.threshold,
            threshold_source="given" if self.given is not None else "midpoint",
            spread=self.sd,
            band=self.band(1),
            gap_pct=abs(g - b) / abs(g) * 100 if g and b is not None else None,
            distinguishable=ok,
            why=why,
        )
