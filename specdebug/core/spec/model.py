"""The speculation advisor's model (issue 42): tok/s of a chain of k drafts per cycle, predicted from
the configs that were measured, with an interval.  Pure: unit tests check every formula by hand.
docs/spec-advisor.md says the same in prose.

Tokens per cycle.  r_i = P(the first i drafts are all accepted).  A cycle yields the accepted drafts
plus the target's own (bonus) token, so
    E(k) = 1 + r_1 + ... + r_k.
Where r_i comes from: vLLM's `spec_decode_num_accepted_tokens_per_pos{position=i-1} / num_drafts`
(a later position is only accepted after the earlier ones, so the counter is exactly r_i); the
stream's tokens per burst on any engine (core.bench.bursts.reach_by_position: a burst of n tokens
accepted the first n - 1 drafts); SGLang's accept length A(k) of configs run at depths k:
r_k = A(k) - A(k - 1) between measured depths (A(k) itself gives E(k) = A(k)).  Beyond the deepest
measured position K the conditional acceptance q = r_K / r_(K-1) is carried on (r_(K+j) = r_K q^j),
said so, with q moved by the measured change of q between the last two positions (at least
Q_SPREAD_FLOOR) for the interval.

Cycle time.  Each config's cycle is A x 1000 / measured tok/s (the mean cycle the client saw: it
carries the same per-token overheads the prediction is judged by).  Cycle against depth k is a
line: k draft steps plus a verify whose cost grows with the tokens verified (k + 1).  With two or
more depths measured (configs off the fit left out) the line is a least-squares fit over them
(core.spec.arith.fit_line).  With one depth measured, the baseline's plain decode step is depth 0:
a verify cannot cost less than a decode step, so the cycle's slope lies between the draft step
(from SGLang's draft lines; 0 where none is logged, n-gram) and the slope of the line through the
decode step; the prediction takes the middle and the interval the whole range.  The decode step is
not a point of a fit over two or more depths: speculation adds a fixed cost (proposer, rejection
sampling, draft extend) that a plain decode does not pay, so depth 0 sits below the line.

A config far above the line of the others (more than OFF_FIT and outside its noise) has another
problem (the story's 3-step without NCCL tuning: 30 ms measured against ~22 fitted): it is left
out of the fit and named; its acceptance is still used (NCCL does not change what is accepted).

Interval.  Cycle: +-Z standard errors of the fit's prediction (the noise per point is the larger
of the measured noise, i.e. the spread of repeated results of one config, else the bench's
per-request spread, and the fit's residuals) plus, with one depth, the slope range.  Tokens: the
per-position standard errors (binomial over the drafts counted, or the spread between configs),
plus the extrapolation's range.  low = E_low / cycle_high, high = E_high / cycle_low.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from specdebug.core.spec import arith

#: standard errors each side of an interval (about 95 %)
Z = 2.0
#: a measured noise below this is not believed (the client's timing of one stream on a shared host)
NOISE_FLOOR = 0.015
#: a config this far above the fit of the others (and outside its noise) has another problem
OFF_FIT = arith.EXCESS_FLAG
#: the least the extrapolated conditional acceptance is moved for the interval
Q_SPREAD_FLOOR = 0.05


# ---------------------------------------------------------------------------------------------
# tokens per cycle


@dataclass
class AcceptObs:
    """What one measured config says about acceptance: r_1..r_n (per position), else its accept
    length A only; `count` the drafts (cycles) it was counted over, when known."""

    config: str
    depth: int
    per_position: list[float] | None = None
    accept_len: float | None = None
    count: float | None = None
    source: str = ""


@dataclass
class Tokens:
    """E(k) with its interval and where it came from."""

    mid: float
    low: float
    high: float
    extrapolated: bool = False
    source: str = ""


@dataclass
class AcceptModel:
    """r_i (mean, standard error) per position, C(k) = r_1 + ... + r_k where known."""

    reach: dict[int, tuple[float, float]] = field(default_factory=dict)
    sums: dict[int, tuple[float, float]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def deepest(self) -> int:
        return max(self.sums, default=0)

    def tokens(self, k: int) -> Tokens | None:
        """E(k), measured where C(k) is known, extrapolated beyond the deepest position; None when
        the positions up to k are not known (cannot tell)."""
        if k in self.sums:
            c, se = self.sums[k]
            return Tokens(1 + c, 1 + c - Z * se, 1 + c + Z * se, False, _positions_source(self, k))
        deepest = self.deepest
        if k < deepest:
            return None
        return self._extrapolate(k, deepest)

    def _extrapolate(self, k: int, deepest: int) -> Tokens | None:
        if deepest not in self.reach:
            return None
        r_last, se_last = self.reach[deepest]
        prev = 1.0 if deepest == 1 else self.reach.get(deepest - 1, (None, 0.0))[0]
        if prev is None or prev <= 0:
            return None
        q = min(1.0, r_last / prev)
        dq = Q_SPREAD_FLOOR
        before = self.reach.get(deepest - 2, (1.0, 0.0))[0] if deepest >= 2 else None
        if before is not None and deepest >= 2 and before > 0:
            dq = max(dq, abs(q - prev / before))
        c, se = self.sums[deepest]

        def tail(qq: float) -> float:
            qq = min(1.0, max(0.0, qq))
            return sum(r_last * qq**j for j in range(1, k - deepest + 1))

        mid, lo, hi = c + tail(q), c - Z * se + tail(q - dq), c + Z * se + tail(q + dq)
        lo = max(lo, c - Z * se)
        src = (
            f"{_positions_source(self, deepest)}; positions {deepest + 1}..{k} extrapolated with the "
            f"conditional acceptance {q:.3f} of position {deepest} (+-{dq:.3f})"
        )
        return Tokens(1 + mid, 1 + lo, 1 + hi, True, src)


def _positions_source(m: AcceptModel, k: int) -> str:
    return f"r_1..r_{k} from " + "; ".join(m.sources) if m.sources else f"positions 1..{k}"


def accept_model(obs: Sequence[AcceptObs]) -> AcceptModel:
    """Merge what each config says into r_i and C(k): per position where a config gives them (mean
    over configs; error the binomial one over its drafts or the spread between configs), else
    C(k) = A(k) - 1 of an accept length, and r_k = C(k) - C(k-1) between consecutive known sums."""
    m = AcceptModel()
    by_pos: dict[int, list[tuple[float, float | None]]] = {}
    sums_only: dict[int, list[float]] = {}
    for o in obs:
        if o.per_position:
            for i, r in enumerate(o.per_position[: o.depth], 1):
                by_pos.setdefault(i, []).append((min(1.0, max(0.0, r)), o.count))
            m.sources.append(f"{o.config}: per position ({o.source})")
        elif o.accept_len is not None:
            sums_only.setdefault(o.depth, []).append(o.accept_len - 1.0)
            m.sources.append(f"{o.config}: accept length {o.accept_len:.3f} at depth {o.depth} ({o.source})")
    for i, vals in sorted(by_pos.items()):
        m.reach[i] = _mean_se([v for v, _ in vals], [n for _, n in vals])
    contiguous = 0
    while contiguous + 1 in m.reach:
        contiguous += 1
    running, var = 0.0, 0.0
    for i in range(1, contiguous + 1):
        r, se = m.reach[i]
        running, var = running + r, var + se  # errors of one draft's positions move together: summed
        m.sums[i] = (running, var)
    for k, cs in sorted(sums_only.items()):
        if k in m.sums:
            continue
        mean, se = _mean_se(cs, [None] * len(cs))
        m.sums[k] = (mean, max(se, NOISE_FLOOR * (1 + mean)))
    for k in sorted(m.sums):  # r_k between consecutive known sums (SGLang's accept length per depth)
        if k not in m.reach and (k - 1 in m.sums or k == 1):
            below = m.sums[k - 1] if k > 1 else (0.0, 0.0)
            m.reach[k] = (max(0.0, m.sums[k][0] - below[0]), m.sums[k][1] + below[1])
    return m


def _mean_se(values: list[float], counts: list[float | None]) -> tuple[float, float]:
    """Mean and its standard error: the larger of the spread between values and the binomial error."""
    n = len(values)
    mean = sum(values) / n
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else 0.0
    drafts = sum(c for c in counts if c) if any(counts) else 0.0
    binom = math.sqrt(mean * (1 - mean) / drafts) if drafts > 0 and 0 <= mean <= 1 else 0.0
    return mean, max(spread, binom)


# ---------------------------------------------------------------------------------------------
# cycle time


@dataclass
class CyclePoint:
    """One measured config's cycle (ms) at its depth; `noise` relative, with its source."""

    config: str
    depth: int
    cycle_ms: float
    noise: float = NOISE_FLOOR
    source: str = ""
    noise_source: str = ""


@dataclass
class Cycle:
    mid: float
    low: float
    high: float


@dataclass
class CycleModel:
    """Cycle time against depth: a fitted line (two or more depths) or a slope range through one
    measured depth bounded by the baseline's decode step."""

    kind: str  # "fit" (least squares over depths) or "bounded" (one depth + the decode step)
    points: list[CyclePoint]
    line: arith.Line | None = None
    sigma_ms: float = 0.0
    residual_ms: float | None = None
    slope_range: tuple[float, float] | None = None
    left_out: list[tuple[CyclePoint, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def at(self, k: int) -> Cycle:
        if self.kind == "fit":
            assert self.line is not None
            xs = [float(p.depth) for p in self.points]
            n, mx = len(xs), sum(xs) / len(xs)
            sxx = sum((x - mx) ** 2 for x in xs)
            se = self.sigma_ms * math.sqrt(1 / n + (k - mx) ** 2 / sxx) if sxx > 0 else self.sigma_ms
            mid = self.line.at(k)
            return Cycle(mid, mid - Z * se, mid + Z * se)
        assert self.slope_range is not None
        ref = self.points[0]
        lo_s, hi_s = self.slope_range
        ends = [ref.cycle_ms + (k - ref.depth) * s for s in (lo_s, hi_s)]
        mid = ref.cycle_ms + (k - ref.depth) * (lo_s + hi_s) / 2
        noise = Z * ref.noise * ref.cycle_ms
        return Cycle(mid, min(ends) - noise, max(ends) + noise)

    def describe(self) -> str:
        if self.kind == "fit" and self.line is not None:
            res = f", residual {self.residual_ms:.2f} ms" if self.residual_ms is not None else ""
            return (
                f"cycle = {self.line.intercept:.2f} + {self.line.slope:.2f} ms x depth, least squares over "
                f"{', '.join(f'{p.config} (depth {p.depth}, {p.cycle_ms:.2f} ms)' for p in self.points)}{res}"
            )
        assert self.slope_range is not None
        p = self.points[0]
        return (
            f"cycle = {p.cycle_ms:.2f} ms at depth {p.depth} ({p.config}) + {self.slope_range[0]:.2f}.."
            f"{self.slope_range[1]:.2f} ms per depth (one depth measured: the slope lies between the draft "
            "step and the line through the baseline's decode step; the middle is taken)"
        )


def slope_bounds(
    ref: CyclePoint, base_step_ms: float, draft_step_ms: float | None
) -> tuple[float, float] | None:
    """The cycle's slope per depth through one measured depth: at least the draft step (0 unknown), at
    most the slope that puts depth 0 at the plain decode step (a verify costs no less than a decode).
    None when the decode step is longer than the measured cycle's verify part: it bounds nothing (the
    plain decode has another problem, or the box changed between the two measurements)."""
    lo = draft_step_ms or 0.0
    rise = ref.cycle_ms - lo * ref.depth - base_step_ms
    if rise < 0:
        return None
    return lo, lo + rise / ref.depth


def _upper_from(
    others: list[CyclePoint], k: int, base_step_ms: float | None, draft_step_ms: float | None
) -> float | None:
    """The most the cycle at depth k can be, judged by the other configs (None: cannot tell)."""
    depths = {p.depth for p in others}
    if len(depths) >= 2:
        line = arith.fit_line([(float(p.depth), p.cycle_ms) for p in others])
        return line.at(k) if line is not None else None
    if len(depths) == 1 and base_step_ms is not None:
        ref = max(others, key=lambda p: p.cycle_ms)
        bounds = slope_bounds(ref, base_step_ms, draft_step_ms)
        return max(ref.cycle_ms + (k - ref.depth) * s for s in bounds) if bounds is not None else None
    return None


def off_fit(
    points: list[CyclePoint], base_step_ms: float | None, draft_step_ms: float | None
) -> tuple[list[CyclePoint], list[tuple[CyclePoint, str]]]:
    """Leave out, worst first, each config more than OFF_FIT (and its noise) above what the others
    allow: it has another problem.  Returns (kept, [(left out, why)])."""
    kept, out = list(points), []
    while len(kept) >= 2:
        worst: tuple[float, CyclePoint, float] | None = None
        for p in kept:
            upper = _upper_from([o for o in kept if o is not p], p.depth, base_step_ms, draft_step_ms)
            if upper is None or upper <= 0:
                continue
            excess = (p.cycle_ms - upper) / upper
            if excess > max(OFF_FIT, Z * p.noise) and (worst is None or excess > worst[0]):
                worst = (excess, p, upper)
        if worst is None:
            break
        excess, p, upper = worst
        kept.remove(p)
        out.append(
            (
                p,
                f"cycle {p.cycle_ms:.2f} ms is {excess * 100:+.0f} % above the {upper:.2f} ms the others allow",
            )
        )
    return kept, out


def cycle_model(
    points: list[CyclePoint], base_step_ms: float | None, draft_step_ms: float | None
) -> CycleModel | str:
    """The cycle against depth from the configs in the fit, or why it cannot be told."""
    kept, left = off_fit(points, base_step_ms, draft_step_ms)
    depths = sorted({p.depth for p in kept})
    if len(depths) >= 2:
        model: CycleModel | str = _fitted(kept, base_step_ms, draft_step_ms or 0.0)
    elif len(depths) == 1 and base_step_ms is not None:
        ref = kept[0]
        if len(kept) > 1:  # several configs at the one depth: their mean
            mean = sum(p.cycle_ms for p in kept) / len(kept)
            names = ", ".join(p.config for p in kept)
            ref = CyclePoint(names, ref.depth, mean, max(p.noise for p in kept), "mean of " + names)
        bounds = slope_bounds(ref, base_step_ms, draft_step_ms)
        if bounds is None:
            return (
                f"cannot tell: one depth measured, and the baseline's decode step {base_step_ms:.2f} ms is "
                f"longer than its cycle ({ref.cycle_ms:.2f} ms at depth {ref.depth}), so it bounds nothing "
                "(the plain decode has another problem, or the box changed between them): measure another depth"
            )
        model = CycleModel("bounded", [ref], slope_range=bounds)
    else:
        return (
            "cannot tell: one depth measured and no plain-decode baseline: measure another depth "
            "or the baseline (no speculation)"
        )
    if isinstance(model, CycleModel):
        model.left_out = left
    return model


def _fitted(kept: list[CyclePoint], base_step_ms: float | None, lo: float) -> CycleModel | str:
    """Least squares over two or more depths.  A cycle cannot fall with depth (a draft costs at least
    `lo`): a slope below that within the noise is held at `lo` (said so); beyond it the measurements
    disagree (the box changed between them) and the answer is cannot tell."""
    line = arith.fit_line([(float(p.depth), p.cycle_ms) for p in kept])
    assert line is not None
    noise_ms = max(p.noise * p.cycle_ms for p in kept)
    xs = [float(p.depth) for p in kept]
    sxx = sum((x - sum(xs) / len(xs)) ** 2 for x in xs)
    notes: list[str] = []
    params = 2
    if line.slope < lo:
        se_slope = noise_ms / math.sqrt(sxx)
        if line.slope < lo - Z * se_slope:
            how = "falls with depth" if line.slope < 0 else f"rises by less than a draft step ({lo:.2f} ms)"
            return (
                f"cannot tell: the measured cycle {how} ({line.slope:+.2f} ms a depth, beyond their noise "
                f"of {se_slope:.2f}): the configs disagree (the box changed between them?); measure them "
                "again, one after the other"
            )
        notes.append(
            f"the fitted slope {line.slope:+.2f} ms a depth is below the draft step {lo:.2f} ms (within the "
            f"noise): held at {lo:.2f}"
        )
        line = arith.Line(
            intercept=sum(p.cycle_ms - lo * p.depth for p in kept) / len(kept), slope=lo, n=len(kept)
        )
        params = 1
    resid = [p.cycle_ms - line.at(p.depth) for p in kept]
    dof = len(kept) - params
    res_ms = math.sqrt(sum(r * r for r in resid) / dof) if dof > 0 else None
    model = CycleModel("fit", kept, line=line, sigma_ms=max(noise_ms, res_ms or 0.0), residual_ms=res_ms)
    model.notes += notes
    if res_ms is not None and res_ms > OFF_FIT * sum(p.cycle_ms for p in kept) / len(kept):
        model.notes.append(f"the fit is poor (residual {res_ms:.2f} ms): the cycle is not a line in depth")
    if base_step_ms is not None and line.intercept < base_step_ms * (1 - OFF_FIT):
        model.notes.append(
            f"the fit puts depth 0 at {line.intercept:.2f} ms, below the baseline's decode step "
            f"{base_step_ms:.2f} ms: the plain decode has another problem, or the box changed between them"
        )
    return model


# ---------------------------------------------------------------------------------------------
# the prediction


@dataclass
class Prediction:
    depth: int
    predicted_tok_s: float
    low: float
    high: float
    tokens: Tokens
    cycle: Cycle


def predict(k: int, acc: AcceptModel, cyc: CycleModel) -> Prediction | None:
    """tok/s at depth k = E(k) x 1000 / cycle(k); low and high from the ends of both intervals."""
    tok = acc.tokens(k)
    if tok is None:
        return None
    c = cyc.at(k)
    if c.mid <= 0:
        return None
    # a noisy line far from its points can reach 0 ms: the high end is then bounded by a tenth of the cycle
    c.low = max(c.low, 0.1 * c.mid)
    return Prediction(k, tok.mid * 1000 / c.mid, tok.low * 1000 / c.high, tok.high * 1000 / c.low, tok, c)


def relative_noise(values: Sequence[float]) -> float | None:
    """Relative standard deviation of repeated results of one config (None: fewer than two)."""
    xs = [v for v in values if v and v > 0]
    if len(xs) < 2:
        return None
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) / mean
