"""The stream's token bursts -> the speculative cycle time (core.bench.bursts), on fake arrival times:
one burst per engine step, coalesced chunks joined, merged steps left out once the config's tokens
per cycle are known, tokens per burst counted only where exact."""

from __future__ import annotations

import math

import pytest

from specdebug.core.bench.builtin import RequestRecord
from specdebug.core.bench.bursts import (
    MIN_GAPS,
    bursts_of,
    cycle_stats,
    reach_by_position,
    recompute,
    request_samples,
    stream_cycles,
    thin,
)
from specdebug.core.bench.chunks import chunk_tokens


def arrivals(cycle_s: float, tokens: list[int], start: float = 1.0) -> tuple[list[float], list[int]]:
    """One chunk per step: the prefill's token at `start`, then one chunk every `cycle_s`."""
    times = [start + i * cycle_s for i in range(len(tokens) + 1)]
    return times, [1, *tokens]


def test_each_gap_after_the_prefill_chunk_is_one_cycle() -> None:
    times, toks = arrivals(0.020, [3, 1, 2, 3, 3, 1, 2, 3, 2, 3, 1])
    bursts = bursts_of(times, toks)
    assert len(bursts) == 11 and all(g == pytest.approx(0.020) for g, _ in bursts)
    assert [n for _, n in bursts] == [3, 1, 2, 3, 3, 1, 2, 3, 2, 3, 1]


def test_chunks_the_transport_coalesced_are_one_burst() -> None:
    # step 2's output arrives as two SSE events 50 us apart (one TCP read split in two)
    times = [1.0, 1.020, 1.04, 1.04005, 1.060]
    assert bursts_of(times, [1, 3, 1, 2, 3]) == [
        pytest.approx((0.020, 3)),
        pytest.approx((0.020, 3)),
        pytest.approx((0.020, 3)),
    ]


def test_the_cycle_distribution_of_a_steady_stream() -> None:
    times, toks = arrivals(0.020, [3, 1, 2] * 10)
    got = cycle_stats(request_samples(times, toks, exact=True), requests=1, tokens_exact=True)
    assert got.n == 30 and got.median_ms == pytest.approx(20.0)
    assert got.p10_ms == pytest.approx(20.0) and got.p90_ms == pytest.approx(20.0)
    # the last burst may be cut by max_tokens: its tokens are not counted (its gap is)
    assert sum(got.tokens_per_burst.values()) == 29
    assert got.mean_tokens_per_burst == pytest.approx((3 + 1 + 2) * 29 / 3 / 29, rel=0.05)
    assert got.describe().startswith("stream bursts: median of 30 gaps")


def test_bursts_of_merged_steps_drop_out_once_the_tokens_per_cycle_are_known() -> None:
    # 3 speculative tokens -> at most 4 tokens per cycle; the API server fell behind twice and sent
    # two steps in one chunk (7 and 8 tokens after a double gap)
    times, toks = arrivals(0.010, [4, 2, 4, 3, 1, 4, 4, 2, 3, 4])
    times += [times[-1] + 0.020, times[-1] + 0.040, times[-1] + 0.050]
    toks += [7, 8, 3]
    samples = request_samples(times, toks, exact=True)
    raw = cycle_stats(samples, requests=1, tokens_exact=True)
    assert raw.left_out == 0 and raw.p90_ms == pytest.approx(20.0, rel=0.2)
    known = recompute(raw, max_tokens_per_cycle=4)
    assert known.left_out == 2 and known.median_ms == pytest.approx(10.0)
    assert known.p90_ms == pytest.approx(10.0) and max(known.tokens_per_burst) == 4
    assert any("more than 4 tokens" in n for n in known.notes)


def test_too_few_gaps_is_cannot_tell() -> None:
    times, toks = arrivals(0.02, [2] * (MIN_GAPS - 2))
    got = cycle_stats(request_samples(times, toks, exact=True))
    assert got.median_ms is None and "fewer than" in got.notes[0]
    assert got.describe().startswith("stream bursts: cannot tell")


def test_without_running_usage_only_the_gaps_count() -> None:
    times, toks = arrivals(0.02, [1] * 20)
    got = cycle_stats(request_samples(times, toks, exact=False), tokens_exact=False)
    assert got.median_ms == pytest.approx(20.0)
    assert got.tokens_per_burst == {} and got.mean_tokens_per_burst is None
    assert any("tokens per burst not counted" in n for n in got.notes)


def test_non_finite_or_negative_gaps_are_not_cycles() -> None:
    good = [(20.0, 2)] * 10
    got = cycle_stats([*good, (math.inf, 2), (math.nan, 2), (-5.0, 2), (0.0, 1)], tokens_exact=True)
    assert got.n == 10 and got.median_ms == 20.0


def test_samples_are_bounded_and_spread_over_the_run() -> None:
    samples = [(float(i), 2) for i in range(5000)]
    kept = thin(samples, 100)
    assert len(kept) == 100 and kept[0][0] == 0.0 and kept[-1][0] > 4900
    assert len(cycle_stats(samples, tokens_exact=True).samples) == 512


def test_per_position_acceptance_from_the_tokens_per_burst() -> None:
    # 10 bursts: 4 of 1 token (no draft accepted), 3 of 2, 2 of 3, 1 of 4 (3 drafts accepted)
    samples = [(10.0, 1)] * 4 + [(10.0, 2)] * 3 + [(10.0, 3)] * 2 + [(10.0, 4)]
    got = cycle_stats(samples, tokens_exact=True)
    assert reach_by_position(got, 3) == pytest.approx([0.6, 0.3, 0.1])
    assert reach_by_position(cycle_stats(samples, tokens_exact=False), 3) is None


def test_the_builtin_client_summarises_every_request() -> None:
    recs = []
    for start in (1.0, 5.0):
        times, toks = arrivals(0.015, [2, 3, 1] * 5, start)
        recs.append(RequestRecord(ok=True, chunk_times=times, chunk_tokens=toks, running_usage=True))
    got = stream_cycles(recs)
    assert got.requests == 2 and got.n == 30 and got.median_ms == pytest.approx(15.0)
    assert got.tokens_exact
    recs[1].running_usage = False
    assert not stream_cycles(recs).tokens_exact


def test_a_chunk_whose_text_was_held_back_still_counts_its_tokens() -> None:
    step = {"choices": [{"text": "", "index": 0}], "usage": {"completion_tokens": 7}}
    assert chunk_tokens(step, "", 7, 4) == 3
    assert chunk_tokens(step, "", 1, None) == 1  # the first token's text held back
    role = {"choices": [{"delta": {"role": "assistant", "content": ""}}], "usage": {"completion_tokens": 0}}
    assert chunk_tokens(role, "", 0, None) == 0
    final_usage = {"choices": [], "usage": {"completion_tokens": 7}}
    assert chunk_tokens(final_usage, "", 7, 7) == 0
    assert chunk_tokens(final_usage, "", 7, None) == 0  # usage only in the final chunk
    assert chunk_tokens({"choices": [{"text": "ab"}]}, "ab", None, None) == 1
    assert chunk_tokens({"choices": [{"text": "ab"}]}, "ab", 9, 6) == 3


def test_a_stream_whose_bursts_mostly_merged_steps_gives_no_cycle() -> None:
    """The real CPU build at TP 2 on 2 cores: 85 of 96 bursts carried several steps; the 11 kept ones
    (median 20.5 ms) were not a sample of cycles (its own rate implied 14.2 ms).  Cannot tell, said so."""
    from specdebug.core.bench.bursts import cycle_stats

    merged = [(60.0, 12)] * 85
    single = [(20.5, 4)] * 11
    res = cycle_stats(merged + single, requests=3, tokens_exact=True, max_tokens_per_cycle=4)
    assert res.median_ms is None
    assert any("merged several steps" in n and "cannot tell" in n for n in res.notes), res.notes
