"""tests/pace.py: the rule the wall-clock tests compare by (strict on a free CPU; on a contended one
the order of magnitude: up to 4x slower, or 2x faster where the client read its first token late)."""

from __future__ import annotations

from tests import pace


class Fixed(pace.CpuWatch):
    def __init__(self, contended: bool) -> None:
        super().__init__()
        self._contended = contended

    @property
    def contended(self) -> bool:
        return self._contended


def test_a_free_cpu_compares_strictly_and_a_contended_one_by_order_of_magnitude() -> None:
    quiet, busy = Fixed(False), Fixed(True)
    assert pace.rate_ok(93.0, 94.0, 0.05, quiet) and not pace.rate_ok(88.4, 94.0, 0.05, quiet)
    assert pace.rate_ok(88.4, 94.0, 0.05, busy) and not pace.rate_ok(92.6, 86.4, 0.05, quiet)
    assert pace.rate_ok(92.6, 86.4, 0.05, busy)  # a busy run: the first token read late, the rest at once
    assert not pace.rate_ok(20.0, 94.0, 0.05, busy)  # four times slower: a fault, not load
    assert not pace.rate_ok(200.0, 94.0, 0.05, busy)  # twice as fast: a fault, not load
    assert pace.duration_ok(28.9, 20.0, 0.10, busy) and not pace.duration_ok(28.9, 20.0, 0.10, quiet)
    assert pace.duration_ok(15.0, 20.0, 0.10, busy) and not pace.duration_ok(15.0, 20.0, 0.10, quiet)
    assert not pace.duration_ok(9.0, 20.0, 0.10, busy)  # under half the model's cycle: a fault


def test_the_watch_measures_its_window() -> None:
    with pace.CpuWatch() as cpu:
        sum(range(10000))
    assert cpu.share is None or cpu.share >= 0.0
    assert cpu.describe().endswith(("contended", "quiet"))
