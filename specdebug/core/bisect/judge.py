"""Effects, not sides: a config's measurements as a share of the good-bad gap, with its uncertainty.

Pure.  Throughput is judged as its inverse (time per token), so independent slowdowns add up and
the shares of several culprits can be summed; latencies are used as they are.  The run-to-run
noise is relative (a fraction of the figure: a server that decodes 10x slower also scatters 10x more in
time per token, as the real vLLM tier shows: 433-524 tok/s with speculation, 42-67 without): the pooled
sd of the log of every config measured more than once (the ends are always measured at least twice), and
a config's uncertainty is that fraction of its own level.  The uncertainty of a share uses Student's t at 99 % for the
degrees of freedom that noise estimate has: two readings of each end prove little, and say so.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from specdebug.core.bench.models import BenchResult
from specdebug.core.bisect.models import Evidence

DECISIVE = 2.0  # ends this many times the 99 % margin apart after one run each need no second run
# ... and one run of a config at the bad end's level is placed within this share of the gap at 99 % (the
# confirmation's precision, plan.CONFIRM_PRECISION): else the confirmation repeats instead, and a repeat
# with one degree of freedom (t99 = 63.7) decides less than the ends' second runs (the sim: 12 launches, not 9)
PRECISE = 0.2
MIN_SPREAD = 0.003  # relative floor of the spread: two equal readings do not prove zero noise
# the noise the search works with while nothing measures it (each end run once, no per-step figure): a
# working figure for where to look next, never for a verdict (verify.py fits every reading before any
# culprit is named, and "the same" is said only on a noise measured)
PRIOR = 0.01
MIN_RUNS_DOF = 2  # repeats measure the run-to-run noise from this many degrees of freedom on
ONE_RUN_GAP_PCT = 15.0  # ends this far apart after one run each begin the search (Judge.one_run_enough)
PRIOR_DOF = 5
# Student's t, two-sided 99 %, by degrees of freedom (interpolated between, 2.576 beyond)
_T99: tuple[tuple[int, float], ...] = ((1, 63.66), (2, 9.925), (3, 5.841), (4, 4.604), (5, 4.032))
_T99 += ((6, 3.707), (7, 3.499), (8, 3.355), (9, 3.250), (10, 3.169), (12, 3.055), (15, 2.947))
_T99 += ((20, 2.845), (30, 2.750), (60, 2.660))

_THROUGHPUT = ("output_tok_s", "decode_tok_s", "request_throughput", "total_tok_s", "input_tok_s")
_SERVER = ("accept_len", "verify_ms", "gen_throughput")
_LATENCY = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_STATS = ("mean", "p50", "p90", "p95", "p99", "max")


# the metrics a front end offers first, with what each is (the Bisect pane's `j`; `specdebug bisect
# --metric` takes any of known_metrics()): the client's figures time the client's machine too, the
# server's come from its own log and /metrics
METRIC_CHOICES: tuple[tuple[str, str], ...] = (
    ("output_tok_s", "the client's tok/s"),
    (
        "gen_throughput",
        "the whole server's generation tok/s (/metrics, else its log): not this client's timing",
    ),
    ("tpot_ms", "the client's time per output token"),
    ("ttft_ms", "the client's time to first token"),
    ("verify_ms", "the server log's verify time (the profile's verify_ms pattern)"),
    ("accept_len", "the server's accept length"),
)

# beside a server figure read from its log: the standard error of its mean over the run's lines, and the
# lines (the noise of the server's own per-step figure within one run: known after a single launch)
SE_SUFFIX = ".se"
LINES_SUFFIX = ".lines"
START_METRIC = "failed_start"  # 1 when the config did not start, 0 when it did (the bad end does not start)


def known_metrics() -> list[str]:
    names = [*_THROUGHPUT, "tok_s", *_SERVER]
    for lat in _LATENCY:
        names += [lat, *(f"{lat}.{s}" for s in _STATS)]
    return names


def higher_is_better(metric: str) -> bool:
    """Throughput and acceptance: higher is better; times (anything in ms) lower."""
    return not (metric.endswith("_ms") or "_ms." in metric or metric == START_METRIC)


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
        for name, se in (result.server.se or {}).items():
            if name in out and name not in result.server.sources:  # from the log's lines, not /metrics
                out[f"{name}{SE_SUFFIX}"] = float(se)
                out[f"{name}{LINES_SUFFIX}"] = float(result.server.samples)
    return out


def t99(dof: int) -> float:
    """Two-sided 99 % quantile of Student's t (inf for no degrees of freedom)."""
    if dof < 1:
        return math.inf
    for (d0, t0), (d1, t1) in itertools.pairwise(_T99):
        if dof == d0:
            return t0
        if d0 < dof < d1:
            return t0 + (t1 - t0) * (dof - d0) / (d1 - d0)
    return _T99[-1][1] if dof <= _T99[-1][0] else 2.576


@dataclass(frozen=True)
class Reading:
    """A config's effect: `share` of the good-bad gap (0 = the good end, 1 = the bad end), its
    standard error and the t the comparisons use; `n` measurements."""

    share: float
    se: float = 0.0
    t: float = 0.0
    n: int = 0

    @property
    def low(self) -> float:
        return self.share - self.t * self.se

    @property
    def high(self) -> float:
        return self.share + self.t * self.se


ZERO = Reading(0.0)  # the good end, by definition
FULL = Reading(1.0)  # the bad end, by definition


def plausible(x: Reading, y: Reading) -> bool:
    """x and y may be the same effect (their difference is within the noise)."""
    t = max(x.t, y.t)
    return abs(x.share - y.share) <= t * math.hypot(x.se, y.se) if math.isfinite(t) else True


def above(x: Reading, y: Reading) -> bool:
    """x is clearly a bigger effect than y."""
    return x.share > y.share and not plausible(x, y)


@dataclass
class Noise:
    sd: float  # relative: the sd of log(cost), about the sd as a fraction of the cost (see Judge.cost)
    dof: int
    measured: bool  # False: the floor, not the data (no config measured twice)
    # where it comes from: runs (configs measured more than once) | steps (the server's per-step figure:
    # its lines' spread within each run, taken as one run's noise while no repeat shows more) | floor
    source: str = "runs"


@dataclass(frozen=True)
class Within:
    """One run's own noise: the relative standard error of its figure over its lines, and their dof."""

    rel: float
    dof: int


def pooled_within(runs: Sequence[Within]) -> Noise | None:
    """The relative noise of one run's figure from the runs' own lines (dof-weighted), or None."""
    dof = sum(w.dof for w in runs if w.dof > 0)
    if not runs or dof < 1:
        return None
    var = sum(w.dof * w.rel**2 for w in runs if w.dof > 0) / dof
    return Noise(max(math.sqrt(var), MIN_SPREAD), dof, True, "steps")


class Judge:
    """The ends as measured, the noise, and a share of the gap for any config's values."""

    def __init__(
        self,
        metric: str,
        good: Sequence[float],
        bad: Sequence[float],
        *,
        others: Sequence[Sequence[float]] = (),
        threshold: float | None = None,
        min_gap_pct: float = 5.0,
        exact: bool = False,
        within: Sequence[Within] = (),
    ) -> None:
        self.metric = metric
        self.exact = exact  # start / no start: no noise
        self.higher = higher_is_better(metric)
        self.good = list(good)
        self.bad = list(bad)
        self.given = threshold
        self.min_gap_pct = min_gap_pct
        self.good_mean = statistics.fmean(self.good) if self.good else None
        self.bad_mean = statistics.fmean(self.bad) if self.bad else None
        self.noise = Noise(0.0, 0, False) if exact else self._noise([self.good, self.bad, *others])
        steps = None if exact else pooled_within(within)
        if steps is not None and steps.sd > PRIOR:
            # lines that scatter more than the prior (the sim's acceptance pattern: 2.7 % per run while its
            # runs agree to 0.5 %) would only ask for repeats: the prior, until the fit measures the noise
            steps = None
        if steps is not None and not self.noise.measured:
            # no config measured twice yet: one run's noise from its own lines.  Repeats, once there,
            # measure the run-to-run noise itself and win (a real box may move more between launches
            # than within one: the fit over every reading decides before any culprit is named)
            self.noise = steps
        if not exact and not self.noise.measured:
            self.noise = Noise(PRIOR, PRIOR_DOF, False, "prior")
        self.rel = self.noise.sd
        self.t = 0.0 if exact else t99(self.noise.dof)
        cg, cb = [self.cost(x) for x in self.good], [self.cost(x) for x in self.bad]
        self.g_cost = statistics.fmean(cg) if cg else None
        self.b_cost = statistics.fmean(cb) if cb else None
        # the spread at the good end's level, in cost units (what the evidence shows)
        self.sd = (
            self.rel * abs(self.g_cost) if self.g_cost is not None and math.isfinite(self.g_cost) else 0.0
        )
        self.threshold = (
            threshold
            if threshold is not None
            else (self.good_mean + self.bad_mean) / 2
            if self.good_mean is not None and self.bad_mean is not None
            else None
        )

    def cost(self, x: float) -> float:
        """Time per token for throughput (slowdowns add), the figure itself for latencies."""
        return (1.0 / x if x > 0 else math.inf) if self.higher else x

    def _noise(self, groups: Sequence[Sequence[float]]) -> Noise:
        """The pooled sd of log(cost) over the configs measured more than once (relative noise)."""
        costs = [[self.cost(x) for x in g] for g in groups if g]
        logs = [[math.log(x) for x in g] for g in costs if len(g) >= 2 and all(0 < x < math.inf for x in g)]
        dof = sum(len(g) - 1 for g in logs)
        if dof < MIN_RUNS_DOF:
            # one repeat is no noise to judge by (t99 at 1 dof is 63.7: every reading would turn undecided
            # and ask for more): the lines or the prior until a second, the fit before any name
            return Noise(MIN_SPREAD, 0, False, "floor")
        ss = sum(sum((x - statistics.fmean(g)) ** 2 for x in g) for g in logs)
        return Noise(max(math.sqrt(ss / dof), MIN_SPREAD), dof, True)

    def _sd_at(self, cost: float) -> float:
        """The run-to-run sd of one reading at this cost level, in cost units."""
        return self.rel * abs(cost) if math.isfinite(cost) else math.inf

    @property
    def gap(self) -> float | None:
        if self.g_cost is None or self.b_cost is None:
            return None
        return self.b_cost - self.g_cost

    def reading(self, values: Sequence[float]) -> Reading | None:
        """The share of the gap these values of one config show (None: no value, or no gap)."""
        gap = self.gap
        if not values or not gap or self.g_cost is None:
            return None
        costs = [self.cost(x) for x in values]
        mean = statistics.fmean(costs)
        share = (mean - self.g_cost) / gap
        # the noise of this config's mean and of the good end's, each at its own level (the gap itself
        # is taken as known: the ends were proven apart first, and its error would scale every share alike)
        var = (self._sd_at(mean) ** 2 / len(costs) + self._sd_at(self.g_cost) ** 2 / len(self.good)) / gap**2
        return Reading(share, math.sqrt(var), self.t, len(costs))

    def ends(self) -> tuple[str, str, int | None]:
        """(distinct | same | unresolved, why, repeats of each end that would settle it)."""
        g, b, gap = self.good_mean, self.bad_mean, self.gap
        if g is None or b is None or gap is None or self.g_cost is None:
            return "unresolved", "the ends are not measured yet", None
        gap_pct = abs(g - b) / abs(g) * 100 if g else math.inf
        if self.given is not None:
            t = self.given
            good_side = g > t if self.higher else g < t
            bad_side = b <= t if self.higher else b >= t
            if not (good_side and bad_side):
                return "same", f"the ends ({g:.2f} good, {b:.2f} bad) are not on both sides of {t:g}", None
        if self.exact:
            return "distinct", f"the good end starts, the bad end does not ({g:g} vs {b:g})", None
        assert self.b_cost is not None  # with bad_mean
        level = self._sd_at(self.g_cost) ** 2 + self._sd_at(self.b_cost) ** 2  # one run of each end
        se = math.sqrt(
            self._sd_at(self.g_cost) ** 2 / len(self.good) + self._sd_at(self.b_cost) ** 2 / len(self.bad)
        )
        z = abs(gap) / se if se else math.inf
        source = (
            f"noise not measured yet: a working {self.rel * 100:.0f}% per run until the fit measures it"
            if not self.noise.measured
            else f"noise {self.rel * 100:.1f}% per run from the server's per-step figure "
            f"(the spread of its log lines within each run, {self.noise.dof} dof; no repeat shows more)"
            if self.noise.source == "steps"
            else f"run-to-run sd {self.rel * 100:.1f}% over {len(self.good)}+{len(self.bad)} runs"
        )
        why = f"ends differ by {gap_pct:.1f}% ({g:.2f} vs {b:.2f}), {z:.1f} standard errors ({source}; "
        why += f"needs {self.t:.1f} at 99 %)"
        need = math.ceil(2.576**2 * level / gap**2) + 1 if gap and math.isfinite(level) else None
        if z >= self.t and gap_pct >= self.min_gap_pct:
            return "distinct", why, None
        if not self.noise.measured:
            return "unresolved", why, need  # "the same" only on a noise measured, never on the prior
        if z >= self.t:
            return "same", why + f"; smaller than --min-gap {self.min_gap_pct:g}%", None
        rel_half = self.t * se / abs(self.g_cost) * 100 if math.isfinite(self.t) else math.inf
        if gap_pct + rel_half < self.min_gap_pct:
            return "same", why + f"; the same within --min-gap {self.min_gap_pct:g}%", None
        return "unresolved", why, need

    def classify(self, values: Sequence[float]) -> str:
        """good | bad | ambiguous, for a row: the nearer end, ambiguous when both are plausible."""
        r = self.reading(values)
        if r is None:
            return "ambiguous"
        if plausible(r, ZERO) and plausible(r, FULL):
            return "ambiguous"
        return "bad" if r.share >= 0.5 else "good"

    def drifted(self, before: Sequence[float], after: Sequence[float]) -> bool:
        """The good end measured again at the end moved beyond the noise."""
        if not before or not after:
            return False
        cb = statistics.fmean([self.cost(x) for x in before])
        ca = statistics.fmean([self.cost(x) for x in after])
        se = self._sd_at(cb) * math.sqrt(1 / len(after) + 1 / len(before))
        return abs(ca - cb) > self.t * se if math.isfinite(self.t) else False

    def one_run_enough(self) -> bool:
        """One run of each end is enough to begin the search: they are apart by the noise known (the
        lines, or the prior) and by at least ONE_RUN_GAP_PCT.  A smaller gap is where a launch-to-launch
        noise the lines cannot see would fake or hide the difference (the sim's --noise 0.05 beside a 2 %
        change named a knob from one run of each end): the ends run again and measure it."""
        state = self.ends()[0]
        g, b = self.good_mean, self.bad_mean
        if state != "distinct" or g is None or b is None or not g:
            return False
        return self.exact or abs(g - b) / abs(g) * 100 >= ONE_RUN_GAP_PCT

    def decisive(self) -> bool:
        """The ends are distinct by at least DECISIVE times the margin the test needs (z >= DECISIVE t),
        and one run places a config at the bad end's level to PRECISE of the gap: one run of each end is enough, a second of
        each would decide nothing (issue 39).  Only on a noise measured (the server's per-step
        figure, or repeats): never on the floor."""
        if self.exact or not self.noise.measured or self.ends()[0] != "distinct":
            return False
        assert self.g_cost is not None and self.b_cost is not None and self.gap is not None
        se = math.sqrt(
            self._sd_at(self.g_cost) ** 2 / len(self.good) + self._sd_at(self.b_cost) ** 2 / len(self.bad)
        )
        precise = self.t * self.rel * math.hypot(self.b_cost / self.gap, self.g_cost / self.gap) <= PRECISE
        return abs(self.gap) >= DECISIVE * self.t * se and precise

    def evidence(self) -> Evidence:
        state, why, _ = self.ends()
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
            spread=self.sd if self.noise.measured else None,
            band=None,
            gap_pct=abs(g - b) / abs(g) * 100 if g and b is not None else None,
            distinguishable=state == "distinct",
            why=why,
            scale=f"1/{self.metric} (time per unit: slowdowns add)" if self.higher else self.metric,
            noise_dof=self.noise.dof,
        )
