"""Parser for guidellm's JSON report (`guidellm benchmark ... --outputs json`).

Format (shared/formats/real-clients/guidellm-vllm.json, guidellm 0.8.1, report `metadata.version` 2):
`{"metadata": {"guidellm_version"}, "config": ..., "benchmarks": [ {"config": {"strategy": {"type_",
"max_concurrency" | "streams" | "rate"}, "constraints": {"max_requests": {"args": {"count"}}}},
"duration", "metrics": {NAME: {"successful"|"errored"|"incomplete"|"total": {"mean", "median", "std_dev",
"max", "min", "count", "total_sum", "percentiles": {"p50", "p90", "p95", "p99", ...}}}}} ]}`.
Latencies ending `_ms` are milliseconds, `request_latency` is seconds; `request_totals` holds counts.
One BenchResult per benchmark (a sweep has several); each metric's successful mean is kept in `fields`.
"""

from __future__ import annotations

from typing import Any

from specdebug.core.bench.models import BenchResult, LatencyStats

# guidellm's inter_token_latency is (latency - TTFT) / (tokens - 1) per request, what sglang and vLLM
# call TPOT; its time_per_output_token is latency / tokens (TTFT included: 10.72 vs 10.65 ms in the
# sample), which no other client prints, so it stays in `fields` only.
LATENCIES = {  # guidellm metric -> (BenchResult field, scale to ms)
    "time_to_first_token_ms": ("ttft_ms", 1.0),
    "inter_token_latency_ms": ("tpot_ms", 1.0),
    "request_latency": ("e2e_ms", 1000.0),
}
RATES = {  # guidellm metric (successful mean) -> BenchResult field
    "output_tokens_per_second": "output_tok_s",
    "prompt_tokens_per_second": "input_tok_s",
    "tokens_per_second": "total_tok_s",
    "requests_per_second": "request_throughput",
    "request_concurrency": "mean_concurrency",
}


def is_guidellm(obj: dict[str, Any]) -> bool:
    """A guidellm report: names its version, or holds generative benchmarks."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "guidellm_version" in meta:
        return True
    benches = obj.get("benchmarks")
    return (
        isinstance(benches, list)
        and bool(benches)
        and all(isinstance(b, dict) and b.get("type_") == "generative_benchmark" for b in benches)
    )


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _stats(d: dict[str, Any], scale: float) -> LatencyStats:
    st = LatencyStats()
    pct = _dict(d.get("percentiles"))
    for src, dst in (("mean", "mean"), ("median", "p50"), ("max", "max"), ("std_dev", "std")):
        v = _num(d.get(src))
        if v is not None:
            setattr(st, dst, v * scale)
    for key in ("p90", "p95", "p99"):
        v = _num(pct.get(key))
        if v is not None:
            setattr(st, key, v * scale)
    v = _num(d.get("min"))
    if v is not None:
        st.extra["min"] = v * scale
    return st


def parse_guidellm_json(obj: dict[str, Any]) -> list[BenchResult]:
    """Every benchmark of the report, in order."""
    version = (obj.get("metadata") or {}).get("guidellm_version")
    out = []
    for bench in obj.get("benchmarks") or []:
        if isinstance(bench, dict):
            out.append(_one(bench, version))
    return out


def _one(bench: dict[str, Any], version: Any) -> BenchResult:
    res = BenchResult(kind="parsed", source_format="guidellm")
    metrics = _dict(bench.get("metrics"))
    for name, m in metrics.items():
        ok = m.get("successful") if isinstance(m, dict) else None
        if not isinstance(ok, dict):
            continue
        mean = _num(ok.get("mean"))
        if mean is not None:
            res.fields[name] = f"{mean:g}"
        if name in LATENCIES:
            field, scale = LATENCIES[name]
            setattr(res, field, _stats(ok, scale))
        elif name in RATES and mean is not None:
            setattr(res, RATES[name], mean)
    totals = _dict(metrics.get("request_totals"))
    for key, field in (("successful", "successful_requests"), ("errored", "failed_requests")):
        v = _num(totals.get(key))
        if v is not None:
            setattr(res, field, int(v))
    if _num(totals.get("incomplete")):
        res.warnings.append(f"{int(totals['incomplete'])} request(s) incomplete (guidellm request_totals)")
    for name, field in (
        ("prompt_token_count", "total_input_tokens"),
        ("output_token_count", "total_output_tokens"),
    ):
        ok = (metrics.get(name) or {}).get("successful") if isinstance(metrics.get(name), dict) else None
        total = _num(ok.get("total_sum")) if isinstance(ok, dict) else None
        if total is not None:
            setattr(res, field, int(total))
    res.duration_s = _num(bench.get("duration"))
    cfg = _dict(bench.get("config"))
    strategy = _dict(cfg.get("strategy"))
    kind = strategy.get("type_")
    res.config.backend = f"guidellm {version} {kind}" if version else f"guidellm {kind}"
    if kind == "synchronous":
        res.config.concurrency = 1
    elif isinstance(strategy.get("streams"), int):
        res.config.concurrency = strategy["streams"]
    elif kind == "concurrent" and isinstance(strategy.get("max_concurrency"), int):
        res.config.concurrency = strategy["max_concurrency"]
    if _num(strategy.get("rate")) is not None:
        res.config.request_rate = f"{strategy['rate']:g}"
    constraints = _dict(cfg.get("constraints"))
    count = ((constraints.get("max_requests") or {}).get("args") or {}).get("count")
    if isinstance(count, int):
        res.config.requests = count
    for w in bench.get("warnings") or []:
        if isinstance(w, dict) and isinstance(w.get("message"), str):
            res.warnings.append(f"guidellm: {w['message'][:200]}")
    return res
