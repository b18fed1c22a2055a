"""The judge's noise is relative: a server 10x slower scatters 10x more in time per token.

The readings are the real vLLM tier's (tests/real/test_bisect_real.py, CPU build, TP 1): n-gram speculation
on read 433-524 tok/s, off 42-67 tok/s.  Pooled in absolute time per token the slow end's scatter swamped the
fast end's and the ends, 8x apart, read as 2.8 standard errors ("cannot-tell"); relative, they are far apart.
"""

from __future__ import annotations

from specdebug.core.bisect.judge import Judge

GOOD = [497.65, 523.53, 466.39, 433.71]
BAD = [42.23, 64.58, 67.19, 56.09]


def test_ends_an_order_of_magnitude_apart_are_distinct_despite_the_slow_ends_scatter() -> None:
    judge = Judge("output_tok_s", GOOD, BAD)
    state, why, _ = judge.ends()
    assert state == "distinct", why


def test_a_reading_near_the_slow_end_is_bad_and_one_near_the_fast_end_is_good() -> None:
    judge = Judge("output_tok_s", GOOD, BAD)
    assert judge.classify([60.0, 58.0]) == "bad"
    assert judge.classify([480.0, 470.0]) == "good"


def test_the_spread_is_a_fraction_whatever_the_level() -> None:
    """The same relative scatter at both ends reads as one percentage, at 100 tok/s or at 10."""
    fast = Judge("output_tok_s", [100.0, 110.0, 105.0], [50.0, 55.0, 52.5])
    slow = Judge("output_tok_s", [10.0, 11.0, 10.5], [5.0, 5.5, 5.25])
    assert fast.ends()[0] == slow.ends()[0] == "distinct", fast.ends()[1]
    assert abs(fast.rel - slow.rel) < 1e-9 and 0.03 < fast.rel < 0.07
