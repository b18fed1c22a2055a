"""The additive fit: every reading of this run explained by the good end plus the named culprits' effects.

Pure.  Shares of time per token add (judge.py): a config's cost is the good end's plus the effect of each
named culprit it holds (a set that hurts only together is one term, there when all its knobs are).
Fitted by weighted least squares (the noise is relative: weights 1/level^2) over every measurement of
this run, configs the model predicts equal are replicates for free: the residuals measure the run-to-run
noise with n - p degrees of freedom, and no launch is spent up front to measure it (issue 39: each end
measured twice made one culprit among 4 cost 7 launches).  The noise is floored by the runs' own
within-run standard error (the server's per-step lines) and a relative floor: a fit that happens to pass
close to few readings proves no quiet box.  Decisions use Student's t at 99 % for the fit's dof.

What the fit says (`check`): confirmed (every term significantly slower, by at least MIN_SHARE of the gap,
and every reading within the noise of its prediction), drift (the residuals move steadily with launch
order: a box that speeds up or slows down is drift, never noise), unexplained (a reading departs from
the model beyond the noise), or undecided (too few dof or too wide: a repeat is asked of the config whose
repeat makes the weakest term most certain, `best_repeat`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specdebug.core.bisect.judge import MIN_SPREAD, t99

MIN_SHARE = 0.05  # a term's effect must be at least this share of the gap (as plan.MIN_SHARE)
MIN_DOF = 3  # a fit that happens to pass close to 2 spare readings of a noisy box is no measured noise
TRUSTED_LINES = 0.01  # as judge.PRIOR: lines wider than this are taken for a pattern, not the noise
REF_T = 2.845  # t99 at 20 dof: the runs' own noise is known from their many lines
DRIFT_MOVED = 0.25  # a steady trend matters once it moved this share of the gap over the run


@dataclass(frozen=True)
class Obs:
    """One measurement: the units applied (the plan's indices), its cost (time per token, or the
    latency), when it finished, and its own relative standard error over its lines (None: unknown)."""

    units: frozenset[int]
    cost: float
    at: float = 0.0
    within: float | None = None


@dataclass
class Fit:
    terms: list[frozenset[int]]
    base: float  # the good end's cost
    effects: list[float]  # each term's effect, in cost units
    cov: list[list[float]]  # (X'WX)^-1: times sd^2 the covariance of (base, effects)
    sd: float  # the relative noise used: max(residual sd, within-run se, floor)
    resid_sd: float | None  # the residuals' own (None: no dof)
    dof: int
    t: float
    residuals: list[float]  # relative, per observation
    leverage: list[float]
    obs: list[Obs]

    @property
    def gap(self) -> float:
        return sum(self.effects)

    def effect_se(self, j: int) -> float:
        """The standard error of term j's effect, in cost units (relative noise at the good end's level)."""
        return self.sd * abs(self.base) * math.sqrt(max(self.cov[j + 1][j + 1], 0.0))

    def gap_se(self) -> float:
        """The standard error of the fitted gap (every term's effect summed), in cost units."""
        k = range(1, len(self.effects) + 1)
        var = sum(self.cov[a][b] for a in k for b in k)
        return self.sd * abs(self.base) * math.sqrt(max(var, 0.0))

    def share(self, j: int) -> tuple[float, float, float]:
        """Term j's effect as a share of the fitted gap: (share, low, high) at 99 %."""
        gap = self.gap or math.inf
        e, half = self.effects[j], self.t * self.effect_se(j)
        return e / gap, (e - half) / gap, (e + half) / gap


@dataclass
class Verdict:
    state: str  # confirmed | undecided | unexplained | drift | unfit
    why: str
    fit: Fit | None = None
    worst: frozenset[int] | None = None  # unexplained: the config that departs most from the fit


def _design(obs: Sequence[Obs], terms: Sequence[frozenset[int]]) -> list[list[float]]:
    return [[1.0, *(1.0 if t <= o.units else 0.0 for t in terms)] for o in obs]


def _inverse(a: list[list[float]]) -> list[list[float]] | None:
    """Gauss-Jordan inverse of a small symmetric matrix (None: singular: a term no reading separates)."""
    n = len(a)
    m = [[*row, *(1.0 if i == j else 0.0 for j in range(n))] for i, row in enumerate(a)]
    scale = max((abs(x) for row in a for x in row), default=1.0) or 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-10 * scale:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        p = m[col][col]
        m[col] = [x / p for x in m[col]]
        for r in range(n):
            if r != col and m[r][col]:
                f = m[r][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [row[n:] for row in m]


def _solve(
    x: list[list[float]], y: list[float], w: list[float]
) -> tuple[list[float], list[list[float]]] | None:
    p = len(x[0])
    xtx = [[sum(w[i] * x[i][a] * x[i][b] for i in range(len(y))) for b in range(p)] for a in range(p)]
    inv = _inverse(xtx)
    if inv is None:
        return None
    xty = [sum(w[i] * x[i][a] * y[i] for i in range(len(y))) for a in range(p)]
    beta = [sum(inv[a][b] * xty[b] for b in range(p)) for a in range(p)]
    return beta, inv


def within_floor(obs: Sequence[Obs]) -> float:
    """The runs' own noise (rms of their within-run relative se), or the floor."""
    ws = [o.within for o in obs if o.within is not None and o.within > 0]
    rms = math.sqrt(sum(w * w for w in ws) / len(ws)) if ws else 0.0
    return max(rms, MIN_SPREAD)


def fit(obs: Sequence[Obs], terms: Sequence[frozenset[int]]) -> Fit | None:
    """The additive model over these observations (None: fewer readings than terms, or a term that no
    reading separates from the others)."""
    obs = [o for o in obs if o.cost > 0 and math.isfinite(o.cost)]
    terms = list(terms)
    if len(obs) < len(terms) + 1:
        return None
    x = _design(obs, terms)
    y = [o.cost for o in obs]
    w = [1.0 / (c * c) for c in y]
    solved = None
    for _ in range(2):  # weights from the readings, then from the fitted levels
        solved = _solve(x, y, w)
        if solved is None:
            return None
        beta = solved[0]
        pred = [sum(b * xi for b, xi in zip(beta, row, strict=True)) for row in x]
        if any(p <= 0 for p in pred):
            break
        w = [1.0 / (p * p) for p in pred]
    assert solved is not None
    beta, inv = solved
    pred = [sum(b * xi for b, xi in zip(beta, row, strict=True)) for row in x]
    resid = [(yi - pi) / abs(pi) if pi else math.inf for yi, pi in zip(y, pred, strict=True)]
    dof = len(obs) - len(terms) - 1
    resid_sd = math.sqrt(sum(r * r for r in resid) / dof) if dof > 0 else None
    base = beta[0]
    # inv is (X'WX)^-1 with W = 1/level^2: scaled to the good end's level, its diagonal times sd^2 is the
    # relative variance of each coefficient
    scaled = [[v / (base * base) if base else math.inf for v in row] for row in inv]
    lev = [
        w[i] * sum(x[i][a] * inv[a][b] * x[i][b] for a in range(len(beta)) for b in range(len(beta)))
        for i in range(len(obs))
    ]
    # the residuals measure the run-to-run noise; the runs' own lines are no floor (the sim's scatter
    # 2.7 % per run while its launches agree to 0.5 %), the relative floor is
    sd = max(resid_sd or 0.0, MIN_SPREAD)
    return Fit(terms, base, beta[1:], scaled, sd, resid_sd, dof, t99(dof), resid, lev, list(obs))


def pure_error(obs: Sequence[Obs]) -> tuple[float, int]:
    """The run-to-run noise from configs measured more than once, whatever the model: (relative sd, dof)."""
    groups: dict[frozenset[int], list[float]] = {}
    for o in obs:
        groups.setdefault(o.units, []).append(math.log(o.cost))
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups.values() if len(g) > 1)
    dof = sum(len(g) - 1 for g in groups.values())
    return (math.sqrt(ss / dof), dof) if dof else (0.0, 0)


def lack_of_fit(f: Fit) -> tuple[frozenset[int], float, float, float] | None:
    """The config whose mean reading departs most from the fit, beyond the noise of a run as the runs
    themselves show it ((units, z, reference noise, bound); None: every config within it).  The reference
    is not the residuals' own sd (a missing contributor inflates it and hides itself: one culprit of a
    90/10 pair named and "confirmed"), but the runs' within-run se and the scatter of repeated configs:
    what a run scatters by, model or not.  Without a within-run figure (the client's metric) the fit's sd."""
    has_within = any(o.within for o in f.obs)
    pe_sd, pe_dof = pure_error(f.obs)
    lines = within_floor(f.obs) if has_within else math.inf
    trusted = lines <= TRUSTED_LINES  # lines that scatter more are a pattern, not the launch's noise
    # the repeats' scatter replaces the lines only once it is significantly wider (chi-square at 99 %):
    # one repeat that differs by chance must not widen the reference and hide a contributor
    louder = pe_dof >= 1 and pe_dof * pe_sd**2 > chi2_99(pe_dof) * lines**2
    if trusted and not louder:
        ref, bound, chi = lines, REF_T, True
    elif pe_dof >= 2:
        ref, bound, chi = max(pe_sd, MIN_SPREAD), t99(pe_dof), False
    else:
        ref, bound, chi = f.sd, f.t, False  # no noise but the model's own: the weakest test
    groups: dict[frozenset[int], list[int]] = {}
    for i, o in enumerate(f.obs):
        groups.setdefault(o.units, []).append(i)
    worst: tuple[frozenset[int], float, float, float] | None = None
    for units, idx in groups.items():
        k = len(idx)
        mean = sum(f.residuals[i] for i in idx) / k
        h = sum(f.leverage[i] for i in idx) / k
        z = abs(mean) / (ref * math.sqrt(max(1 / k - h, 0.05 / k)))
        if worst is None or z > worst[1]:
            worst = (units, z, ref, bound)
    if worst is None or worst[1] > bound:
        return worst
    # every config within the bound, but together the residuals too wide for the runs' own noise
    # (chi-square at 99 %): a contributor the culprits miss spreads over the readings that show it
    # (a 10 % knob beside a 90 % one read 2.5 % of the level on the rest, split with the good end)
    q = sum(r * r for r in f.residuals) / (ref * ref)
    if chi and f.dof >= 1 and q > chi2_99(f.dof):
        return worst
    return None


def chi2_99(dof: int) -> float:
    """The 99 % quantile of chi-square (Wilson-Hilferty: within 1 % from 3 dof on)."""
    a = 2 / (9 * dof)
    return dof * (1 - a + 2.326 * math.sqrt(a)) ** 3


def drift_stat(f: Fit) -> tuple[float, float] | None:
    """(slope per second, relative; t statistic) of the residuals against time, when it is beyond the
    99 % t at its dof (None: no steady trend, or too few readings)."""
    pts = [(o.at, r) for o, r in zip(f.obs, f.residuals, strict=True)]
    dof = f.dof - 1
    if dof < 1:
        return None
    tb = sum(t for t, _ in pts) / len(pts)
    rb = sum(r for _, r in pts) / len(pts)
    den = sum((t - tb) ** 2 for t, _ in pts)
    if den <= 0:
        return None
    slope = sum((t - tb) * (r - rb) for t, r in pts) / den
    rest = sum((r - rb - slope * (t - tb)) ** 2 for t, r in pts)
    se = max(math.sqrt(rest / dof), MIN_SPREAD) / math.sqrt(den)
    stat = abs(slope) / se if se > 0 else math.inf
    return (slope, stat) if stat > t99(dof) else None


def check(f: Fit | None, names: Sequence[str], *, nuisance: int | None = None) -> Verdict:
    """What the fit says of the named terms (see the module's doc)."""
    if f is None:
        return Verdict("unfit", "too few readings to fit the culprits' effects")
    if f.dof < MIN_DOF:
        return Verdict(
            "undecided",
            f"{f.dof} reading(s) beyond the fit's own parameters: too few to measure the noise",
            f,
        )
    gap = f.gap
    if gap <= 0:
        return Verdict("unexplained", "the culprits' fitted effects do not make the bad end slower", f)
    found = drift_stat(f)
    if found is not None:
        span = max(o.at for o in f.obs) - min(o.at for o in f.obs)
        moved = abs(found[0]) * span * abs(f.base)
        if moved >= DRIFT_MOVED * gap:
            way = "slower" if found[0] > 0 else "faster"
            return Verdict(
                "drift",
                f"the readings move steadily {way} with launch order beyond what the culprits explain "
                f"({found[1]:.1f} standard errors from flat, {moved / gap:.0%} of the gap over the run): "
                "drift, not noise",
                f,
            )
    worst = lack_of_fit(f)
    if worst is not None:
        units, z, ref, bound = worst
        return Verdict(
            "unexplained",
            f"a config departs from the culprits' additive fit by {z:.1f} standard errors (99 % bound "
            f"{bound:.1f}, against the runs' own noise {ref:.1%})",
            f,
            units,
        )
    for j, _term in enumerate(f.terms):
        if j == nuisance:
            continue  # the unresolved rest: fitted, its share said, no culprit claim to test
        share, low, _high = f.share(j)
        if low <= 0 or share < MIN_SHARE:
            return Verdict(
                "undecided",
                f"{names[j]}: {share:.0%} of the gap, {low:.0%} at 99 % (noise {f.sd:.1%} over {f.dof} dof)",
                f,
            )
    return Verdict(
        "confirmed",
        f"every reading ({len(f.obs)}) within the noise of the culprits' additive fit "
        f"(noise {f.sd:.1%} per run, {f.dof} dof from replicates the model predicts equal)",
        f,
    )


def weakest(f: Fit) -> float:
    """The smallest term's lower 99 % bound in standard errors over the bound (>= 1: decided)."""
    out = math.inf
    for j in range(len(f.terms)):
        se = f.effect_se(j)
        out = min(out, f.effects[j] / (f.t * se) if se > 0 else math.inf)
    return out


def best_repeat(f: Fit, candidates: Sequence[frozenset[int]]) -> frozenset[int] | None:
    """The config whose one more run makes the weakest term most certain (its variance and the dof it
    adds), or, with a reading off the fit, that reading's config (a fluke or not)."""
    if not candidates:
        return None
    best, score = None, -math.inf
    p = len(f.terms) + 1
    for units in candidates:
        row = [1.0, *(1.0 if t <= units else 0.0 for t in f.terms)]
        level = f.base + sum(e for e, t in zip(f.effects, f.terms, strict=True) if t <= units)
        w = (f.base / level) ** 2 if level > 0 else 1.0
        # Sherman-Morrison: (A + w r r')^-1 = A^-1 - w A^-1 r r' A^-1 / (1 + w r' A^-1 r)
        ar = [sum(f.cov[a][b] * row[b] for b in range(p)) for a in range(p)]
        denom = 1.0 + w * sum(row[a] * ar[a] for a in range(p))
        t = t99(f.dof + 1)
        s = math.inf
        for j in range(len(f.terms)):
            var = f.cov[j + 1][j + 1] - w * ar[j + 1] ** 2 / denom
            se = f.sd * abs(f.base) * math.sqrt(max(var, 1e-18))
            s = min(s, f.effects[j] / (t * se))
        if s > score:
            best, score = units, s
    return best
