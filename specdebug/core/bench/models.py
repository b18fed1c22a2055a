"""The one result model every benchmark produces: built-in client, external command, or a parsed file.

A result is only worth keeping with the conditions that produced it, so besides the client-side
figures it carries the profile fingerprint, the host, the server-side spec metrics seen in the log
during the run, the GPU state before and after, and warnings (warmup, throttling, errors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from specdebug.core.hosts import GpuInfo
from specdebug.core.metrics import ServerProm
from specdebug.core.model import Model
from specdebug.engines import EngineName


class LatencyStats(Model):
    """Distribution of one latency in milliseconds; a field is None when the source did not have it."""

    mean: float | None = None
    p50: float | None = None  # "Median" in the external formats
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    std: float | None = None
    extra: dict[str, float] = Field(default_factory=dict)  # other percentiles, e.g. {"p99.9": ...}

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> LatencyStats:
        """Stats of raw samples (ms), percentiles by linear interpolation as numpy's default."""
        if not samples:
            return cls()
        xs = sorted(samples)
        mean = sum(xs) / len(xs)
        var = sum((x - mean) ** 2 for x in xs) / len(xs)
        return cls(
            mean=mean,
            p50=percentile(xs, 50),
            p90=percentile(xs, 90),
            p95=percentile(xs, 95),
            p99=percentile(xs, 99),
            max=xs[-1],
            std=math.sqrt(var),
        )

    def is_empty(self) -> bool:
        return all(v is None for k, v in self if k != "extra") and not self.extra


def percentile(sorted_xs: Sequence[float], q: float) -> float:
    """q-th percentile of already sorted data, linear interpolation between closest ranks."""
    if not sorted_xs:
        raise ValueError("no samples")
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    frac = pos - lo
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * frac


class ServerMetrics(Model):
    """Server-side figures from the log lines the server wrote during the run (means over the samples)."""

    accept_len: float | None = None
    verify_ms: float | None = None
    gen_throughput: float | None = None
    samples: int = 0  # number of metric samples seen in the log slice
    log_bytes: int = 0  # size of the log slice scanned
    extra: dict[str, float] = Field(default_factory=dict)  # profile-defined patterns (means)
    # figure -> the standard error of its mean over the log lines (robust: MAD of the lines / sqrt(lines)),
    # when 3 or more lines gave it: the noise of the server's own per-step figure within this run
    se: dict[str, float] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)  # field -> "log" or "/metrics" when not the log
    # field -> what the figure is and over which window (the whole server, its log interval or the
    # bench's /metrics window): never a per-stream figure, so never beside the client's decode rate bare
    what: dict[str, str] = Field(default_factory=dict)


#: bursts a result keeps (gap, tokens), evenly thinned past this: a bound on the journal's size
MAX_STREAM_SAMPLES = 512


class StreamCycles(Model):
    """Cycle time measured from the stream's bursts of one benchmark (or one recomputation of it).

    `samples` keeps (gap ms, tokens) per burst (at most MAX_STREAM_SAMPLES, evenly thinned) so a reader
    that knows the config (spec, the advisor) can recompute with the tokens one cycle can yield;
    core.bench.bursts makes it."""

    source: str = "stream bursts"
    n: int = 0  # gaps (cycles) in the distribution
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    mean_ms: float | None = None
    requests: int = 0
    tokens_exact: bool = False  # per-burst tokens from the running usage of each chunk
    mean_tokens_per_burst: float | None = None  # = accept length (accepted + 1) when exact
    tokens_per_burst: dict[int, int] = Field(default_factory=dict)  # tokens -> bursts (exact only)
    median_ms_by_tokens: dict[int, float] = Field(default_factory=dict)  # tokens -> median gap
    left_out: int = 0  # bursts above the tokens one cycle can yield (merged steps)
    samples: list[tuple[float, int]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        """One line: what the cycle figure is and how many gaps it stands on."""
        if self.median_ms is None:
            return f"{self.source}: cannot tell ({'; '.join(self.notes) or 'no gaps'})"
        spread = (
            f", p10 {self.p10_ms:.2f} / p90 {self.p90_ms:.2f} ms"
            if self.p10_ms is not None and self.p90_ms is not None
            else ""
        )
        return (
            f"{self.source}: median of {self.n} gaps between token bursts{spread}, {self.requests} requests"
        )


class SpecDecoding(Model):
    """vLLM bench serve's "Speculative Decoding" section (computed by the client from /metrics deltas)."""

    acceptance_rate_pct: float | None = None
    acceptance_length: float | None = None
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    per_position_acceptance_pct: list[float] = Field(default_factory=list)


class BenchConfig(Model):
    """What was asked of the benchmark (the built-in client's knobs, or what an external block printed)."""

    requests: int | None = None
    concurrency: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    seed: int | None = None
    request_rate: str | None = None  # text: external tools print "inf"
    backend: str | None = None
    command: list[str] | None = None  # external command argv
    token_slack: int | None = None  # built-in: tokens past output_len before a request is stopped
    request_deadline_s: float | None = None  # built-in: the whole-request deadline


class NodeGpus(Model):
    """One node's GPUs around a benchmark of a deployment (its leader is benchmarked, every node's
    GPUs can slow it): the same snapshot as `gpu_before`/`gpu_after`, and why there is none."""

    before: list[GpuInfo] = Field(default_factory=list)
    after: list[GpuInfo] = Field(default_factory=list)
    error: str | None = None  # no snapshot: nvidia-smi failed or is missing on that node


BenchKind = Literal["builtin", "external", "parsed"]
SourceFormat = Literal["builtin", EngineName, "aiperf", "guidellm", "unknown"]  # an engine: its own client


class BenchResult(Model):
    """One benchmark run (or one parsed result block) with everything needed to trust it later."""

    kind: BenchKind = "builtin"
    source_format: SourceFormat = "builtin"
    label: str | None = None

    # who/where/when
    profile: str | None = None
    fingerprint: str | None = None
    server_version: str | None = None
    host: str | None = None
    started_at: float | None = None  # unix seconds
    finished_at: float | None = None
    argv: list[str] | None = None  # the profile's resolved launch argv (for config diffs in reports)
    env: dict[str, str] | None = None  # the profile's env, secrets masked
    config: BenchConfig = Field(default_factory=BenchConfig)

    # client-side figures
    status: Literal["done", "failed", "cancelled"] = "done"
    failure_reason: str | None = None  # why status is "failed" (too many failed requests, no result...)
    duration_s: float | None = None
    successful_requests: int | None = None
    failed_requests: int | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    total_output_tokens_retokenized: int | None = None
    output_tok_s: float | None = None  # total output tokens / wall duration (bench_serving's definition)
    decode_tok_s: float | None = None  # per-stream decode rate excluding TTFT (mean over requests)
    request_throughput: float | None = None
    input_tok_s: float | None = None
    total_tok_s: float | None = None
    peak_output_tok_s: float | None = None
    peak_concurrent_requests: float | None = None
    request_goodput: float | None = None
    mean_concurrency: float | None = None
    ttft_ms: LatencyStats = Field(default_factory=LatencyStats)
    itl_ms: LatencyStats = Field(default_factory=LatencyStats)
    tpot_ms: LatencyStats = Field(default_factory=LatencyStats)
    e2e_ms: LatencyStats = Field(default_factory=LatencyStats)
    accept_length: float | None = None  # as the external tool printed it
    spec: SpecDecoding | None = None
    stream_cycles: StreamCycles | None = None  # built-in: cycle time from the stream's token bursts
    errors: list[str] = Field(default_factory=list)  # first few error messages

    # conditions
    server: ServerMetrics | None = None
    server_prom: ServerProm | None = None  # the server's /metrics over the run's window
    gpu_before: list[GpuInfo] = Field(default_factory=list)
    gpu_after: list[GpuInfo] = Field(default_factory=list)
    gpus_by_node: dict[str, NodeGpus] = Field(default_factory=dict)  # a deployment: every node's (host ->)
    # share of the run some task waited for a CPU (Linux CPU pressure; None: not measured)
    box_cpu_wait: float | None = None  # on the box (the server's); a deployment: its most contended node
    cpu_wait_by_node: dict[str, float | None] = Field(default_factory=dict)  # a deployment: every node's
    client_cpu_wait: float | None = None  # on this machine (the built-in client's)
    warnings: list[str] = Field(default_factory=list)
    drift: dict[str, Any] | None = None  # what the box looked like before the run (core.drift), or {"error"}

    # external output kept as text
    fields: dict[str, str] = Field(default_factory=dict)  # every "Key: value" line of the result block
    unparsed_lines: list[str] = Field(default_factory=list)  # lines of the block no rule understood

    def headline(self) -> float | None:
        """The single tok/s figure to compare runs by (decode rate for one stream, else throughput);
        named, with its settings: core.bench.headline.headline_of."""
        from specdebug.core.bench.headline import headline_of

        return headline_of(self).value

    def gpu_warnings(self) -> list[str]:
        return [w for w in self.warnings if w.startswith("GPU")]

    def failed_fraction(self) -> float | None:
        """Share of the measured requests that failed (None when the source did not count them)."""
        ok, bad = self.successful_requests or 0, self.failed_requests or 0
        return bad / (ok + bad) if ok + bad else None

    def usable(self) -> bool:
        """A result that may serve as a baseline or in a comparison: the run completed and few
        enough of its requests failed (failed work is not a result)."""
        return self.status == "done"


#: Above this share of failed requests a benchmark is failed, not a (too optimistic) result.
MAX_FAILED_FRACTION = 0.05


def judge_failures(result: BenchResult, max_fraction: float = MAX_FAILED_FRACTION) -> BenchResult:
    """Mark a result failed, with the reason, when more than `max_fraction` of its requests failed
    (or none succeeded); a failed result keeps a reason.  Pure: the runner and `--parse` call it."""
    frac = result.failed_fraction()
    first = f": {result.errors[0]}" if result.errors else ""
    if result.status == "done" and frac is not None and frac > max_fraction:
        total = (result.successful_requests or 0) + (result.failed_requests or 0)
        result.status = "failed"
        result.failure_reason = (
            f"{result.failed_requests} of {total} requests failed ({frac * 100:.0f} %, "
            f"more than {max_fraction * 100:g} %){first}"
        )
    elif result.status == "done" and result.successful_requests == 0:
        result.status = "failed"
    if result.status == "failed" and not result.failure_reason:
        if frac is not None and result.failed_requests:
            total = (result.successful_requests or 0) + (result.failed_requests or 0)
            result.failure_reason = f"{result.failed_requests} of {total} requests failed{first}"
        elif result.errors:
            result.failure_reason = result.errors[0]
        else:
            result.failure_reason = "no successful request"
    return result


class BenchProgress(Model):
    """Progress report while a benchmark runs (requests and tokens; an external run's output lines
    are BenchLine events of their own: core.bench.events)."""

    type: Literal["progress"] = "progress"
    done_requests: int = 0
    total_requests: int = 0
    output_tokens: int = 0
    elapsed_s: float = 0.0
    tok_s: float | None = None
    phase: str = "running"  # "warmup", "running", "collecting"
