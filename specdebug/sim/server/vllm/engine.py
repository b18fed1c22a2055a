"""The sim's vLLM flavour of the shared batching engine: vLLM's counters, stats lines and /metrics.

Same cost model and scheduling as the SGLang side (`engine.Engine`); what differs is what the server
says about it.  vLLM prints no per-batch lines: the API server's LoggingStatLogger prints, every
VLLM_LOG_STATS_INTERVAL seconds (default 10; 5 in older versions) and only when not idle, the stats
line and right after it the `SpecDecoding metrics:` line (vllm/v1/metrics/loggers.py,
vllm/v1/spec_decode/metrics.py).  Counters (drafts, draft tokens, accepted tokens, accepted per
position) are also exported on /metrics with vLLM's names (`_total` suffix).

Line shapes by --server-version (current-sources.md "vLLM spec log line" / "vLLM spec older"; boundaries
approximate): < 0.9 `SpecDecoding metrics: Draft acceptance rate: x%, Accepted: N tokens, Drafted: N
tokens`; 0.9-0.10 `Draft acceptance rate` first, then mean length, throughputs, counts, per-position;
>= 0.11 `Mean acceptance length` first ... `Avg Draft acceptance rate: x%`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from specdebug.sim.server.common.engine import HISTOGRAM_BUCKETS, Engine, Histogram, Request
from specdebug.sim.server.sglang.shapes import version_tuple


@dataclass
class SpecCounters:
    """vLLM's SpecDecodingStats: one draft per request per step with speculation."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)

    def add(self, accepts: list[int], k: int) -> None:
        if len(self.per_pos) < k:
            self.per_pos += [0] * (k - len(self.per_pos))
        for a in accepts:
            took = max(0, min(a - 1, k))  # accept length counts the bonus token
            self.drafts += 1
            self.draft_tokens += k
            self.accepted += took
            for i in range(took):
                self.per_pos[i] += 1


class VllmEngine(Engine):
    """Continuous batching with vLLM's accounting; no per-batch log lines."""

    def __init__(self, *args, server_version: str, log_stats: bool = True, **kwargs) -> None:
        kwargs.setdefault("decode_log_interval", 1 << 30)
        super().__init__(*args, **kwargs)
        self.version = version_tuple(server_version)
        self.log_stats = log_stats
        self.total = SpecCounters()  # for /metrics
        self.interval = SpecCounters()  # since the last stats line
        self.prompt_interval = 0
        self.gen_interval = 0
        self.last_prompt_tput = 0.0
        self.last_gen_tput = 0.0
        self.success_total = 0
        self.finished_by_reason: dict[str, int] = {}  # vllm:request_success{finished_reason}
        self._stats_at = time.monotonic()

    # --- accounting hooks --------------------------------------------------------------------------
    def _on_step(self, accepts: list[int]) -> None:
        if self.spec.enabled:
            k = self.spec.num_steps
            self.total.add(accepts, k)
            self.interval.add(accepts, k)

    def _log_prefill(self, batch: list[Request], new_tokens: int, duration: float) -> None:
        self.prompt_interval += new_tokens

    def _log_decode(self, bs: int, used: int) -> None:
        return None

    def _emit(self, req: Request, tokens: list[str]) -> None:
        self.gen_interval += len(tokens)
        if req.finished is not None:
            reason = req.finished.reason
            self.finished_by_reason[reason] = self.finished_by_reason.get(reason, 0) + 1
            if reason != "abort":
                self.success_total += 1
        super()._emit(req, tokens)

    @property
    def kv_usage(self) -> float:
        return self.used_tokens / self.max_total_tokens

    # --- the periodic stats lines (LoggingStatLogger.log) ---------------------------------------------
    def stats_lines(self, now: float | None = None) -> list[str]:
        """The lines of one log interval; [] when idle (vLLM logs those at DEBUG)."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self._stats_at, 1e-6)
        prompt_tput, gen_tput = self.prompt_interval / elapsed, self.gen_interval / elapsed
        idle = not any((prompt_tput, gen_tput, self.last_prompt_tput, self.last_gen_tput))
        self.last_prompt_tput, self.last_gen_tput = prompt_tput, gen_tput
        self.prompt_interval = self.gen_interval = 0
        self._stats_at = now
        spec, self.interval = self.interval, SpecCounters()
        if idle:
            return []
        lines = [
            "Engine 000: "
            f"Avg prompt throughput: {prompt_tput:.1f} tokens/s, Avg generation throughput: {gen_tput:.1f} tokens/s, "
            f"Running: {len(self.running)} reqs, Waiting: {len(self.waiting)} reqs, "
            f"GPU KV cache usage: {self.kv_usage * 100:.1f}%, Prefix cache hit rate: 0.0%"
        ]
        if self.spec.enabled and spec.drafts:
            lines.append(self.spec_line(spec, elapsed))
        return lines

    def spec_line(self, c: SpecCounters, elapsed: float) -> str:
        rate = c.accepted / c.draft_tokens * 100 if c.draft_tokens else math.nan
        if self.version < (0, 9):
            return f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Accepted: {c.accepted} tokens, Drafted: {c.draft_tokens} tokens"
        mean_len = 1 + c.accepted / c.drafts
        per_pos = ", ".join(f"{n / c.drafts:.3f}" for n in c.per_pos)
        tputs = (
            f"Accepted throughput: {c.accepted / elapsed:.2f} tokens/s, "
            f"Drafted throughput: {c.draft_tokens / elapsed:.2f} tokens/s, "
            f"Accepted: {c.accepted} tokens, Drafted: {c.draft_tokens} tokens, "
            f"Per-position acceptance rate: {per_pos}"
        )
        if self.version < (0, 11):
            return f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Mean acceptance length: {mean_len:.2f}, {tputs}"
        return f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, {tputs}, Avg Draft acceptance rate: {rate:.1f}%"


def _hist(name: str, h: Histogram, labels: str) -> list[str]:
    lines = [f"# HELP {name} Histogram.", f"# TYPE {name} histogram"]
    for bound, n in zip(HISTOGRAM_BUCKETS, h.counts, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(n)}')
    lines += [
        f'{name}_bucket{{{labels},le="+Inf"}} {float(h.count)}',
        f"{name}_count{{{labels}}} {float(h.count)}",
        f"{name}_sum{{{labels}}} {h.total}",
    ]
    return lines


# label sets as real vLLM 0.32 exports them (v1/metrics/loggers.py; tests/fixtures/metrics/render_vllm.py):
# every series of one engine carries model_name and engine="<DP rank>", several metrics more than one
# series per engine.  Older versions (boundary approximate): the reasons V1 had from the start only.
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")  # v1/engine FinishReason
FINISHED_REASONS_OLD = ("stop", "length", "abort")
WAITING_REASONS = ("capacity", "deferred")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
LABEL_SETS_SINCE = (0, 32)  # the first release read with them (0.32.0, the CPU build run here)


def render_vllm_metrics(e: VllmEngine, model_name: str, created: float) -> str:
    """Prometheus text with vLLM's names and label sets: counters with `_total` (+ `_created`), labels
    engine and model_name (sorted, as prometheus_client writes them), and the per-metric labels real
    vLLM adds (`finished_reason`, waiting `reason`, `sleep_state`, `position`): several series of one
    metric that are not DP ranks.  One engine (engine="0"): the sim runs no data-parallel engines."""
    labels = f'engine="0",model_name="{model_name}"'
    current = e.version >= LABEL_SETS_SINCE
    lines: list[str] = []

    def with_label(extra: str) -> str:
        return ",".join(sorted([*labels.split(","), extra]))

    def counter(name: str, help_text: str, value: float, extra: str = "") -> None:
        lbl = with_label(extra) if extra else labels
        lines.extend([f"{name}_total{{{lbl}}} {float(value)}", f"{name}_created{{{lbl}}} {created}"])

    def head(name: str, help_text: str, kind: str) -> None:
        lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"])

    gauges: list[tuple[str, str, list[tuple[str, float]]]] = [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            [("", len(e.running))],
        ),
        ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [("", len(e.waiting))]),
    ]
    if current:
        gauges += [
            ("vllm:num_requests_waiting_by_reason", "Number of waiting requests by reason.",
             [(f'reason="{r}"', len(e.waiting) if r == "capacity" else 0) for r in WAITING_REASONS]),
            ("vllm:engine_sleep_state", "Engine sleep state.",
             [(f'sleep_state="{s}"', 1 if s == "awake" else 0) for s in SLEEP_STATES]),
        ]  # fmt: skip
    gauges.append(
        ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", [("", e.kv_usage)])
    )
    for name, help_text, series in gauges:
        head(name, help_text, "gauge")
        for extra, value in series:
            lines.append(f"{name}{{{with_label(extra) if extra else labels}}} {float(value)}")
    for name, help_text, value in (
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", e.stats.prompt_tokens_total),
        ("vllm:generation_tokens", "Number of generation tokens processed.", e.stats.generation_tokens_total),
    ):
        head(name, help_text, "counter")
        counter(name, help_text, value)
    name = "vllm:request_success"
    head(name, "Count of successfully processed requests.", "counter")
    for reason in FINISHED_REASONS if current else FINISHED_REASONS_OLD:
        counter(name, "", e.finished_by_reason.get(reason, 0), f'finished_reason="{reason}"')
    if e.spec.enabled:
        t = e.total
        for name, help_text, value in (
            ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", t.drafts),
            ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", t.draft_tokens),
            ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", t.accepted),
        ):
            head(name, help_text, "counter")
            counter(name, help_text, value)
        name = "vllm:spec_decode_num_accepted_tokens_per_pos"
        head(name, "Accepted tokens per draft position.", "counter")
        for i in range(e.spec.num_steps):
            counter(name, "", t.per_pos[i] if i < len(t.per_pos) else 0, f'position="{i}"')
    lines += _hist("vllm:time_to_first_token_seconds", e.stats.ttft, labels)
    lines += _hist("vllm:e2e_request_latency_seconds", e.stats.e2e, labels)
    return "\n".join(lines) + "\n"
