"""Interleaved repeats (--interleave): a candidate's repeats alternate with an end, and drift is taken out.

Pure.  Every measurement is a launch, so a candidate measured again is a fresh server; back to back,
a box that warms up or gains a tenant moves only that candidate.  With --interleave the order is
candidate, end, candidate, end ... (the end alternates good, bad), and every value is corrected by
the linear drift fitted to the ends' measurements (pooled within-config slope against the time the
benchmark finished), so a linear drift lands on no config.  Cost: one extra launch (an end) before
each repeat of a candidate; a candidate clear at its first measurement costs nothing extra.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from specdebug.core.bisect.judge import t99

Step = Literal["candidate", "reference"]


def next_step(
    verdict: str, samples: int, repeats: int, *, interleave: bool, fresh_reference: bool
) -> Step | None:
    """What to measure next for a config: itself, an end first (interleaved), or nothing (judged).

    `verdict` is the book's (need | ambiguous | good | bad | skip); `fresh_reference` is True once an
    end was measured after this config's last sample."""
    if verdict == "need":
        return "candidate"
    if verdict != "ambiguous" or samples >= repeats:
        return None
    if interleave and not fresh_reference:
        return "reference"
    return "candidate"


def reference_end(count: int) -> Literal["good", "bad"]:
    """The end measured as the count-th reference of the run: good, bad, good, ..."""
    return "good" if count % 2 == 0 else "bad"


def drift_slope(groups: Sequence[Sequence[tuple[float, float]]], *, z: float = 2.0) -> float | None:
    """Pooled within-group least-squares slope of value against time ((t, x) points per config).

    None until some config was measured twice at different times, and None while the slope is
    within `z` standard errors of zero: a slope fitted to noise would move every value for nothing."""
    fitted = [
        (pts, sum(t for t, _ in pts) / len(pts), sum(x for _, x in pts) / len(pts)) for pts in groups if pts
    ]
    num = sum((t - tb) * (x - xb) for pts, tb, xb in fitted for t, x in pts)
    den = sum((t - tb) ** 2 for pts, tb, _ in fitted for t, _ in pts)
    if den <= 0:
        return None
    slope = num / den
    dof = sum(len(pts) for pts, _, _ in fitted) - len(fitted) - 1
    if dof < 1:
        return slope if z <= 0 else None
    resid = sum((x - xb - slope * (t - tb)) ** 2 for pts, tb, xb in fitted for t, x in pts)
    se = math.sqrt(resid / dof / den)
    return slope if abs(slope) > z * se else None


def detrend(points: Sequence[tuple[float, float]], slope: float | None, t0: float) -> list[float]:
    """Values as they would have read at time t0 under the fitted linear drift."""
    if slope is None:
        return [x for _, x in points]
    return [x - slope * (t - t0) for t, x in points]


def steady_drift(groups: Sequence[Sequence[tuple[float, float]]]) -> tuple[float, float] | None:
    """(slope, t statistic) when the configs' readings move steadily with time beyond the 99 % t for
    the fit's degrees of freedom (None: they do not, or too few readings to tell).  The ends of a box
    that speeds up or slows down while they alternate read as a wide noise; this tells the two apart."""
    fitted = [
        (pts, sum(t for t, _ in pts) / len(pts), sum(x for _, x in pts) / len(pts)) for pts in groups if pts
    ]
    den = sum((t - tb) ** 2 for pts, tb, _ in fitted for t, _ in pts)
    dof = sum(len(pts) for pts, _, _ in fitted) - len(fitted) - 1
    if den <= 0 or dof < 1:
        return None
    slope = sum((t - tb) * (x - xb) for pts, tb, xb in fitted for t, x in pts) / den
    resid = sum((x - xb - slope * (t - tb)) ** 2 for pts, tb, xb in fitted for t, x in pts)
    se = math.sqrt(resid / dof / den)
    stat = abs(slope) / se if se > 0 else math.inf if slope else 0.0
    return (slope, stat) if stat > t99(dof) else None
