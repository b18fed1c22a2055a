"""Pure formulas of speculative decoding at batch 1, so each number can be checked by hand.

One speculative cycle = the draft steps + one target verify over the draft tokens; it yields the
accept length A tokens (counting the bonus token, as SGLang and vLLM report it).  Hence
    predicted tok/s = A * 1000 / (draft_ms + verify_ms)
and speculation pays off against a plain decode step of T ms once A > (draft_ms + verify_ms) / T.
The verify fit is a least-squares line of verify time against the tokens verified, over the other
configs of the session (leave-one-out, so a slow verify cannot hide in its own fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: a verify this much above what the other configs' fit predicts is flagged
EXCESS_FLAG = 0.15


def cycle_ms(draft_ms: float, verify_ms: float) -> float:
    """Cost of one speculative cycle (draft steps + target verify)."""
    return draft_ms + verify_ms


def predicted_tok_s(accept_len: float, cycle: float) -> float | None:
    """Tokens/s of one stream when each cycle of `cycle` ms yields `accept_len` tokens."""
    return accept_len * 1000.0 / cycle if cycle > 0 else None


def break_even_accept_len(cycle: float, baseline_step_ms: float) -> float | None:
    """Accept length at which speculation only matches the plain decode of `baseline_step_ms`."""
    return cycle / baseline_step_ms if baseline_step_ms > 0 else None


def step_ms_of(tok_s: float) -> float | None:
    """Plain decode step time (ms) of a non-speculative stream measured at `tok_s`."""
    return 1000.0 / tok_s if tok_s > 0 else None


@dataclass(frozen=True)
class Line:
    """verify_ms = intercept + slope * tokens, fitted over `n` points."""

    intercept: float
    slope: float
    n: int

    def at(self, tokens: float) -> float:
        return self.intercept + self.slope * tokens


def fit_line(points: Sequence[tuple[float, float]]) -> Line | None:
    """Least squares over (tokens, ms); None when fewer than two distinct token counts (no line)."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    slope = sxy / sxx
    return Line(intercept=my - slope * mx, slope=slope, n=n)


def excess(measured: float, predicted: float) -> float | None:
    """How far above the prediction a measurement is, as a fraction (negative: below)."""
    return (measured - predicted) / predicted if predicted > 0 else None


def flagged(measured: float, predicted: float, threshold: float = EXCESS_FLAG) -> bool:
    """Is the measured verify more than `threshold` above the fit?"""
    e = excess(measured, predicted)
    return e is not None and e > threshold
