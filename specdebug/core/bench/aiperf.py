"""Parsers for NVIDIA aiperf results: `profile_export_aiperf.json` and the console table it prints.

Formats (shared/formats/real-clients/aiperf-vllm*.{json,txt}, aiperf 0.13.0, schema_version 1.4):
the JSON has one object per metric, `{"unit", "avg", "p1".."p99", "min", "max", "std", "count",
"sum"}` (run totals have `avg` only), plus `input_config` (endpoint, datasets, phases with their
concurrency) and `error_summary`.  The console prints the same metrics as box-drawn tables, one row
`│ Name (unit) │ avg │ min │ max │ p99 │ p90 │ p50 │ std │` (a long name wraps onto a second row
whose other cells are blank; thousands have ","; totals show N/A).

Mapping onto BenchResult: aiperf's "Inter Token Latency" is per request (decode time / (tokens - 1)),
which is what sglang and vLLM call TPOT, so it goes to `tpot_ms`; its "inter chunk latency" (gaps
between streamed chunks) is their ITL.  Every metric's average is also kept as text in `fields`.
"""

from __future__ import annotations

import re
from typing import Any

from specdebug.core.bench.models import BenchResult, LatencyStats

LATENCIES = {  # aiperf metric -> BenchResult latency field (all in ms)
    "time_to_first_token": "ttft_ms",
    "inter_token_latency": "tpot_ms",
    "inter_chunk_latency": "itl_ms",
    "request_latency": "e2e_ms",
}
TOTALS: dict[str, tuple[str, type]] = {  # aiperf metric (its avg) -> BenchResult field
    "benchmark_duration": ("duration_s", float),
    "request_count": ("successful_requests", int),
    "total_isl": ("total_input_tokens", int),
    "total_osl": ("total_output_tokens", int),
    "request_throughput": ("request_throughput", float),
    "input_token_throughput": ("input_tok_s", float),
    "output_token_throughput": ("output_tok_s", float),
    "total_token_throughput": ("total_tok_s", float),
    "effective_concurrency": ("mean_concurrency", float),
}
# console row name (unit stripped, lowercased) -> JSON metric name
CONSOLE_NAMES = {
    "time to first token": "time_to_first_token",
    "inter token latency": "inter_token_latency",
    "request latency": "request_latency",
    "output token throughput": "output_token_throughput",
    "input token throughput": "input_token_throughput",
    "request throughput": "request_throughput",
    "request count": "request_count",
    "effective concurrency": "effective_concurrency",
    "output token throughput per user": "output_token_throughput_per_user",
    "output sequence length": "output_sequence_length",
    "input sequence length": "input_sequence_length",
    "completed requests (success + error)": "completed_requests",
    "request error rate": "request_error_rate",
}
COLUMNS = ("avg", "min", "max", "p99", "p90", "p50", "std")
_ROW = re.compile(r"^\s*[│┃](?P<cells>.*)[│┃]\s*$")
_UNIT = re.compile(r"^(?P<name>.*?)\s*\((?P<unit>[^()]*)\)\s*$")
_CONCURRENCY = re.compile(r"--concurrency\s+'?(\d+)")
_REQUESTS = re.compile(r"--request-count\s+'?(\d+)")
_DURATION = re.compile(r"^Benchmark Duration:\s*([\d.,]+)\s*sec")


def is_aiperf(obj: dict[str, Any]) -> bool:
    """An aiperf export: names its version, or carries its schema with metric objects."""
    if "aiperf_version" in obj:
        return True
    return "schema_version" in obj and any(_metric(v) for v in obj.values())


def _metric(v: Any) -> bool:
    return isinstance(v, dict) and "unit" in v and "avg" in v


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _stats(m: dict[str, Any], scale: float = 1.0) -> LatencyStats:
    st = LatencyStats()
    for src, dst in (("avg", "mean"), ("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"),
                     ("max", "max"), ("std", "std")):  # fmt: skip
        v = _num(m.get(src))
        if v is not None:
            setattr(st, dst, v * scale)
    for key in ("min", "p1", "p5", "p10", "p25", "p75"):
        v = _num(m.get(key))
        if v is not None:
            st.extra[key] = v * scale
    return st


def parse_aiperf_json(obj: dict[str, Any]) -> BenchResult:
    """profile_export_aiperf.json into a BenchResult (aiperf's own figures, field by field)."""
    res = BenchResult(kind="parsed", source_format="aiperf")
    for name, m in obj.items():
        if not _metric(m):
            continue
        avg = _num(m["avg"])
        if avg is not None:
            res.fields[name] = f"{avg:g} {m['unit']}"
        if name in LATENCIES:
            scale = 1000.0 if m["unit"] in ("s", "sec") else 1.0
            setattr(res, LATENCIES[name], _stats(m, scale))
        elif name in TOTALS and avg is not None:
            field, conv = TOTALS[name]
            setattr(res, field, conv(avg))
    errors = obj.get("error_summary")
    failed = _num((obj.get("error_request_count") or {}).get("avg"))
    if failed is None and isinstance(errors, list):
        failed = float(sum(int(_num(e.get("count")) or 1) for e in errors if isinstance(e, dict)))
    res.failed_requests = int(failed) if failed is not None else None
    for e in errors if isinstance(errors, list) else []:
        if isinstance(e, dict) and len(res.errors) < 5:
            res.errors.append(str(e.get("error_details") or e.get("message") or e)[:300])
    _config(res, obj.get("input_config"))
    if obj.get("was_cancelled") is True:
        res.status = "cancelled"
    return res


def _config(res: BenchResult, cfg: Any) -> None:
    if not isinstance(cfg, dict):
        return
    endpoint = cfg.get("endpoint") or {}
    if isinstance(endpoint, dict) and isinstance(endpoint.get("type"), str):
        res.config.backend = f"aiperf {endpoint['type']}" + (
            " streaming" if endpoint.get("streaming") else ""
        )
    for phase in cfg.get("phases") or []:
        if isinstance(phase, dict) and phase.get("kind") == "profiling":
            if isinstance(phase.get("concurrency"), int):
                res.config.concurrency = phase["concurrency"]
            if isinstance(phase.get("requests"), int):
                res.config.requests = phase["requests"]
            if phase.get("rate") is not None:
                res.config.request_rate = str(phase["rate"])
    for ds in cfg.get("datasets") or []:
        prompts = ds.get("prompts") if isinstance(ds, dict) else None
        if isinstance(prompts, dict):
            isl, osl = (
                _num((prompts.get("isl") or {}).get("mean")),
                _num((prompts.get("osl") or {}).get("mean")),
            )
            res.config.input_len = int(isl) if isl is not None else None
            res.config.output_len = int(osl) if osl is not None else None
            if isinstance(ds.get("random_seed"), int):
                res.config.seed = ds["random_seed"]
            break


def _cell_num(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None  # "N/A" or blank


def console_rows(text: str) -> dict[str, dict[str, float | None]]:
    """{row name with unit: {avg, min, ...}} of every aiperf console table in the text."""
    rows: dict[str, dict[str, float | None]] = {}
    last: str | None = None
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            last = None
            continue
        cells = [c.strip() for c in re.split(r"[│┃]", m.group("cells"))]
        if len(cells) != len(COLUMNS) + 1 or cells[0] == "Metric":
            last = None
            continue
        if last is not None and not any(cells[1:]):  # the wrapped tail of a long name
            rows[f"{last} {cells[0]}"] = rows.pop(last)
            last = f"{last} {cells[0]}"
            continue
        last = cells[0]
        rows[last] = {col: _cell_num(c) for col, c in zip(COLUMNS, cells[1:], strict=True)}
    return rows


def parse_aiperf_console(text: str) -> BenchResult | None:
    """aiperf's printed tables (and its `CLI Command:` / `Benchmark Duration:` lines), or None."""
    if "NVIDIA AIPerf" not in text:
        return None
    rows = console_rows(text)
    if not rows:
        return None
    obj: dict[str, Any] = {}
    for label, values in rows.items():
        um = _UNIT.match(label)
        name, unit = (um.group("name"), um.group("unit")) if um else (label, "")
        key = CONSOLE_NAMES.get(name.lower().replace(" (tokens/sec/user)", ""))
        if key is None:
            key = re.sub(r"\W+", "_", name.lower()).strip("_")
        obj[key] = {"unit": unit, **{k: v for k, v in values.items() if v is not None}}
        obj[key].setdefault("avg", None)
    res = parse_aiperf_json(obj)
    cli = " ".join(ln.strip() for ln in _cli_lines(text))
    if m := _CONCURRENCY.search(cli):
        res.config.concurrency = int(m.group(1))
    if m := _REQUESTS.search(cli):
        res.config.requests = int(m.group(1))
    for line in text.splitlines():
        if m := _DURATION.match(line.strip()):
            res.duration_s = float(m.group(1).replace(",", ""))
    rate = obj.get("request_error_rate", {}).get("avg")
    done = obj.get("completed_requests", {}).get("avg")
    res.failed_requests = round(rate / 100 * done) if rate is not None and done is not None else None
    return res


def _cli_lines(text: str) -> list[str]:
    """The `CLI Command: aiperf profile ...` line and its wrapped continuation lines."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("CLI Command:"):
            out = [line]
            for nxt in lines[i + 1 :]:
                if not nxt.strip() or re.match(r"^[A-Z][\w ]+:", nxt):
                    break
                out.append(nxt)
            return out
    return []
