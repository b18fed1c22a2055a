"""The cycle time of speculative decoding, read from the stream's timing (pure: unit tests feed it
fake arrival times).

Why: vLLM logs no verify time, so the speculation arithmetic had no cycle cost there.  The stream
carries it: an engine sends one chunk per engine step (vLLM's completion_stream_generator yields one
`data:` event per RequestOutput, and with speculation a step's output holds accepted + 1 tokens), so
with speculation the tokens arrive in bursts, one burst per draft+verify cycle, and the gap between
two bursts is one cycle.

What can blur it, and what is done about it:
- the transport coalesces events (two SSE events in one TCP read arrive microseconds apart):
  chunks closer than `merge_gap_s` are one burst;
- vLLM's RequestOutputCollector merges the outputs of several steps into one chunk when the API
  server falls behind the engine, and `--stream-interval N` holds tokens back until N are ready:
  the gap is then several cycles.  A burst carrying more tokens than one cycle can yield (draft
  tokens + 1, when the caller knows it) is left out; the median is robust to the few that remain;
- the first chunk of a request is the prefill's token (TTFT, not a cycle): gaps start after it;
- the last burst of a request may be cut by max_tokens: its tokens are left out of the
  tokens-per-burst counts (its gap is a full cycle and is kept).

Tokens per burst are exact only where the server sent a running usage count in each chunk
(`continuous_usage_stats`); otherwise each chunk counts as one token and only the gaps are used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from specdebug.core.bench.models import MAX_STREAM_SAMPLES, StreamCycles, percentile

#: two chunks closer than this are one burst (the transport's coalescing, not an engine step)
MERGE_GAP_S = 0.0002
#: fewer gaps than this give no cycle time ("cannot tell")
MIN_GAPS = 8
#: the highest token count kept per burst (a burst of more is not one cycle of any sane config)
MAX_BURST_TOKENS = 64

Sample = tuple[float, int]  # (gap before the burst in ms, tokens in the burst; 0 = not counted)


class StreamedRequest(Protocol):
    """What a client recorded of one request (core.bench.builtin.RequestRecord)."""

    chunk_times: list[float]  # arrival of each chunk carrying tokens (s)
    chunk_tokens: list[int]
    running_usage: bool  # every such chunk carried a running usage count


def bursts_of(
    times: Sequence[float], tokens: Sequence[int], merge_gap_s: float = MERGE_GAP_S
) -> list[tuple[float, int]]:
    """Chunk arrivals (s) and their tokens -> bursts after the first one: (gap before it in s,
    tokens in it).  Chunks within `merge_gap_s` of the previous one join its burst."""
    starts: list[float] = []
    counts: list[int] = []
    last = None
    for t, n in zip(times, tokens, strict=False):
        if last is not None and t - last < merge_gap_s and counts:
            counts[-1] += n
        else:
            starts.append(t)
            counts.append(n)
        last = t
    return [(starts[i] - starts[i - 1], counts[i]) for i in range(1, len(starts))]


def request_samples(times: Sequence[float], tokens: Sequence[int], exact: bool) -> list[Sample]:
    """One request's (gap ms, tokens) per burst; tokens 0 where not counted (inexact counts, or the
    last burst, which max_tokens may have cut)."""
    bursts = bursts_of(times, tokens)
    out: list[Sample] = []
    for i, (gap, n) in enumerate(bursts):
        counted = n if exact and i < len(bursts) - 1 else 0
        out.append((round(gap * 1000.0, 4), counted))
    return out


def thin(samples: list[Sample], limit: int = MAX_STREAM_SAMPLES) -> list[Sample]:
    """At most `limit` samples, evenly spread over the run (not the first `limit`)."""
    if len(samples) <= limit:
        return samples
    step = len(samples) / limit
    return [samples[int(i * step)] for i in range(limit)]


def cycle_stats(
    samples: Iterable[Sample],
    *,
    requests: int = 0,
    tokens_exact: bool = False,
    max_tokens_per_cycle: int | None = None,
    keep: int = MAX_STREAM_SAMPLES,
) -> StreamCycles:
    """The cycle-time distribution of (gap ms, tokens) bursts.

    `max_tokens_per_cycle` (draft tokens + 1, from the config) leaves out bursts that carry more:
    several steps merged into one chunk, so their gap is several cycles."""
    all_samples = [(float(g), int(n)) for g, n in samples if g == g and 0.0 < g < float("inf")]
    cap = min(max_tokens_per_cycle or MAX_BURST_TOKENS, MAX_BURST_TOKENS)
    kept = [(g, n) for g, n in all_samples if n <= cap]
    res = StreamCycles(
        requests=requests,
        tokens_exact=tokens_exact,
        left_out=len(all_samples) - len(kept),
        samples=thin(kept, keep),
    )
    if res.left_out:
        res.notes.append(
            f"{res.left_out} bursts carried more than {cap} tokens (several steps in one chunk): left out"
        )
    gaps = sorted(g for g, _ in kept)
    res.n = len(gaps)
    if res.left_out > res.n:
        # the kept bursts are those where the server's output (or this client's reading) kept up, not a
        # sample of cycles: the real CPU build at TP 2 on 2 cores kept 11 of 96, median 20.5 ms against the
        # 14.2 ms its own rate implies.  Whole-stream rates cannot stand in: they give the measured rate back.
        res.notes.append(
            f"{res.left_out} of {res.left_out + res.n} bursts merged several steps (the server's output or this "
            "client fell behind): the stream does not show the cycle here, cannot tell"
        )
        return res
    if res.n < MIN_GAPS:
        res.notes.append(f"{res.n} gaps between bursts, fewer than {MIN_GAPS}")
        return res
    res.median_ms = percentile(gaps, 50)
    res.p10_ms = percentile(gaps, 10)
    res.p90_ms = percentile(gaps, 90)
    res.mean_ms = sum(gaps) / len(gaps)
    counted = [(g, n) for g, n in kept if n > 0]
    if tokens_exact and counted:
        hist: dict[int, int] = {}
        by: dict[int, list[float]] = {}
        for g, n in counted:
            hist[n] = hist.get(n, 0) + 1
            by.setdefault(n, []).append(g)
        res.tokens_per_burst = dict(sorted(hist.items()))
        res.median_ms_by_tokens = {n: percentile(sorted(v), 50) for n, v in sorted(by.items())}
        res.mean_tokens_per_burst = sum(n for _, n in counted) / len(counted)
    elif not tokens_exact:
        res.notes.append("no running usage in the chunks: tokens per burst not counted")
    return res


def stream_cycles(ok: Sequence[StreamedRequest]) -> StreamCycles:
    """The cycle time from the bursts of every successful request (core.bench.bursts): the gaps
    between token bursts, tokens per burst exact where every chunk carried a running usage."""
    exact = all(r.running_usage for r in ok)
    samples = [s for r in ok for s in request_samples(r.chunk_times, r.chunk_tokens, exact)]
    return cycle_stats(samples, requests=len(ok), tokens_exact=exact)


def reach_by_position(cycles: StreamCycles, positions: int) -> list[float] | None:
    """P(a draft token at position i is accepted), i = 1..positions, from the tokens-per-burst
    counts (a burst of k tokens accepted the first k - 1 drafts): the per-position acceptance the
    speculation advisor needs, on any engine.  None without exact counts."""
    total = sum(cycles.tokens_per_burst.values())
    if not cycles.tokens_exact or total == 0:
        return None
    return [
        sum(c for k, c in cycles.tokens_per_burst.items() if k >= i + 1) / total
        for i in range(1, positions + 1)
    ]


def recompute(cycles: StreamCycles, max_tokens_per_cycle: int | None) -> StreamCycles:
    """The same bursts with the config's tokens per cycle known (spec knows it from the argv)."""
    if max_tokens_per_cycle is None or not cycles.samples:
        return cycles
    again = cycle_stats(
        cycles.samples,
        requests=cycles.requests,
        tokens_exact=cycles.tokens_exact,
        max_tokens_per_cycle=max_tokens_per_cycle,
    )
    again.left_out += cycles.left_out
    again.notes = [*(n for n in cycles.notes if n not in again.notes), *again.notes]
    if len(cycles.samples) < cycles.n + cycles.left_out:
        again.notes.append(f"recomputed from {len(cycles.samples)} of {cycles.n} kept bursts")
    return again
