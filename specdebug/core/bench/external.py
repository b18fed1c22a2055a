"""Parsers for the result blocks of `python -m sglang.bench_serving` and `vllm bench serve`.

Both tools print a block framed by ``==== Serving Benchmark Result ====`` and a line of ``=``,
with ``Key: value`` lines padded to 10 columns (so copies carry trailing spaces, and pasted
copies lose them), ``----Header----`` section lines, and latency lines ``Mean|Median|Pnn|Max
<METRIC> (ms): value``. Field names drifted across versions (sglang's old "Max reqeuest
concurrency" typo, vLLM's optional percentiles and Speculative Decoding section), so the parser
is table driven, keeps every key/value as text, and puts any line it does not understand into
``unparsed_lines`` instead of failing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from specdebug.core.bench.models import BenchResult, LatencyStats, SourceFormat, SpecDecoding
from specdebug.core.limits import MAX_PARSE_INPUT, open_regular_file
from specdebug.engines import ENGINES

BLOCK_START = re.compile(r"^=+\s*Serving Benchmark Result\s*=+$")
BLOCK_END = re.compile(r"^=+$")
SECTION = re.compile(r"^-+\s*(?P<title>[^-].*?)\s*-+$")
KEY_VALUE = re.compile(r"^\s*(?P<key>[^:]+?)\s*:\s*(?P<value>.*?)\s*$")
LATENCY_KEY = re.compile(
    r"^(?P<stat>Mean|Median|Std|Max|Min|P(?P<pct>\d+(?:\.\d+)?))\s+(?P<metric>.+?)\s+\(ms\)$"
)
POSITION_KEY = re.compile(r"^Position\s+(?P<pos>\d+)$")

LATENCY_METRICS = {
    "ttft": "ttft_ms",
    "tpot": "tpot_ms",
    "itl": "itl_ms",
    "e2e latency": "e2e_ms",
    "e2el": "e2e_ms",
}


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _intval(text: str) -> int:
    return int(float(text.replace(",", "")))


# key (lowercased) -> (result field, converter); keys printed by either tool, all known spellings.
TOP_FIELDS: dict[str, tuple[str, Callable[[str], object]]] = {
    "successful requests": ("successful_requests", _intval),
    "failed requests": ("failed_requests", _intval),
    "benchmark duration (s)": ("duration_s", _num),
    "total input tokens": ("total_input_tokens", _intval),
    "total generated tokens": ("total_output_tokens", _intval),
    "total generated tokens (retokenized)": ("total_output_tokens_retokenized", _intval),
    "request throughput (req/s)": ("request_throughput", _num),
    "request goodput (req/s)": ("request_goodput", _num),
    "input token throughput (tok/s)": ("input_tok_s", _num),
    "output token throughput (tok/s)": ("output_tok_s", _num),
    "peak output token throughput (tok/s)": ("peak_output_tok_s", _num),
    "peak concurrent requests": ("peak_concurrent_requests", _num),
    "total token throughput (tok/s)": ("total_tok_s", _num),
    "concurrency": ("mean_concurrency", _num),
    "accept length": ("accept_length", _num),
}
# keys that only go to the config (text kept as printed)
CONFIG_KEYS = {
    "backend": "backend",
    "traffic request rate": "request_rate",
    "request rate configured (rps)": "request_rate",
    "max request concurrency": "concurrency",
    "max reqeuest concurrency": "concurrency",  # sglang's old typo
    "maximum request concurrency": "concurrency",
}
# recognised but informational only (kept in `fields`)
INFO_KEYS = {"total input text tokens", "total input vision tokens"}
SPEC_FIELDS: dict[str, tuple[str, Callable[[str], object]]] = {
    "acceptance rate (%)": ("acceptance_rate_pct", _num),
    "acceptance length": ("acceptance_length", _num),
    "drafts": ("drafts", _intval),
    "draft tokens": ("draft_tokens", _intval),
    "accepted tokens": ("accepted_tokens", _intval),
}
# which client printed a block or saved a JSON: each engine's bench dialect, the most specific first
_DIALECTS = sorted(ENGINES.values(), key=lambda e: e.bench.order)


def _clean_lines(text: str) -> list[str]:
    """Lines without CR; a tqdm line rewritten with CRs keeps only its last state."""
    out = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if "\r" in line:
            line = line.rsplit("\r", 1)[-1]
        out.append(line)
    return out


def find_blocks(lines: list[str]) -> list[tuple[list[str], bool]]:
    """Each result block's inner lines, and whether its closing ``====`` line was seen."""
    blocks: list[tuple[list[str], bool]] = []
    current: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        if BLOCK_START.match(stripped):
            if current is not None:
                blocks.append((current, False))
            current = []
        elif current is not None:
            if BLOCK_END.match(stripped):
                blocks.append((current, True))
                current = None
            else:
                current.append(line)
    if current is not None:
        blocks.append((current, False))
    return blocks


def parse_block(
    block: Iterable[str], *, complete: bool = True, fmt: SourceFormat | None = None
) -> BenchResult:
    """One result block (lines between the frames) into a BenchResult; never raises on content."""
    res = BenchResult(kind="parsed", source_format="unknown")
    spec = SpecDecoding()
    saw_spec = False
    in_positions = False
    keys_seen: set[str] = set()
    for raw in block:
        line = raw.rstrip()
        if not line.strip():
            continue
        sec = SECTION.match(line.strip())
        if sec:
            saw_spec = saw_spec or "speculative" in sec.group("title").lower()
            in_positions = False
            continue
        kv = KEY_VALUE.match(line)
        if not kv:
            res.unparsed_lines.append(line)
            continue
        key, value = kv.group("key"), kv.group("value")
        lkey = key.lower()
        keys_seen.add(lkey)
        if not _apply(res, spec, key, lkey, value):
            if lkey.startswith("per-position acceptance"):
                in_positions = True
                saw_spec = True
                if value:  # one-line variant: "Per-position acceptance (%): 86.2, 71.0"
                    try:
                        spec.per_position_acceptance_pct = [_num(v) for v in re.split(r"[,\s]+", value) if v]
                    except ValueError:
                        res.unparsed_lines.append(line)
                continue
            pos = POSITION_KEY.match(key.strip())
            if pos and (in_positions or saw_spec):
                try:
                    _set_position(spec, int(pos.group("pos")), _num(value))
                except ValueError:
                    res.unparsed_lines.append(line)
                continue
            res.unparsed_lines.append(line)
            continue
        if lkey in SPEC_FIELDS:
            saw_spec = True
        res.fields[key.strip()] = value
    if saw_spec:
        res.spec = spec
        if res.accept_length is None and spec.acceptance_length is not None:
            res.accept_length = spec.acceptance_length
    res.source_format = fmt or _guess_format(keys_seen)
    if not complete:
        res.warnings.append("result block is truncated (no closing ==== line): the run may have been killed")
    return res


def _apply(res: BenchResult, spec: SpecDecoding, key: str, lkey: str, value: str) -> bool:
    """Store one known key; False when the key is not known. Bad numbers become warnings."""
    try:
        if lkey in TOP_FIELDS:
            name, conv = TOP_FIELDS[lkey]
            setattr(res, name, conv(value))
            return True
        if lkey in CONFIG_KEYS:
            name = CONFIG_KEYS[lkey]
            if name == "concurrency":
                res.config.concurrency = _intval(value) if _is_number(value) else None
            else:
                setattr(res.config, name, value)
            return True
        if lkey in INFO_KEYS:
            return True
        if lkey in SPEC_FIELDS:
            name, conv = SPEC_FIELDS[lkey]
            setattr(spec, name, conv(value))
            return True
        lat = LATENCY_KEY.match(key.strip())
        if lat:
            target = LATENCY_METRICS.get(lat.group("metric").strip().lower())
            if target is None:
                return False
            _set_stat(getattr(res, target), lat.group("stat"), lat.group("pct"), _num(value))
            return True
    except ValueError:
        res.warnings.append(f"could not read a number in {key.strip()!r}: {value!r}")
        return True
    return False


def _set_stat(stats: LatencyStats, stat: str, pct: str | None, value: float) -> None:
    if stat == "Mean":
        stats.mean = value
    elif stat == "Median":
        stats.p50 = value
    elif stat == "Std":
        stats.std = value
    elif stat == "Max":
        stats.max = value
    elif stat == "Min":
        stats.extra["min"] = value
    elif pct is not None:
        name = "p" + (pct[:-2] if pct.endswith(".0") else pct)
        if name in ("p50", "p90", "p95", "p99"):
            setattr(stats, name, value)
        else:
            stats.extra[name] = value


def _set_position(spec: SpecDecoding, pos: int, value: float) -> None:
    rates = spec.per_position_acceptance_pct
    while len(rates) <= pos:
        rates.append(float("nan"))
    rates[pos] = value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _guess_format(keys: set[str]) -> SourceFormat:
    for engine in _DIALECTS:
        if engine.bench.claims_block(keys):
            return engine.name
    return "unknown"


def _saved_format(obj: Mapping[str, Any]) -> SourceFormat:
    for engine in _DIALECTS:
        if engine.claims_saved(obj):
            return engine.name
    return "unknown"


def read_output_file(path: str | Path, cap: int = MAX_PARSE_INPUT) -> tuple[str, str | None]:
    """(text, note) of a saved benchmark output: a regular file only (a FIFO or /dev/zero is refused
    with NotRegularFile), and at most its last `cap` bytes (results come last), said in `note`."""
    with open_regular_file(path) as f:
        size = os.fstat(f.fileno()).st_size
        note = None
        if size > cap:
            f.seek(size - cap)
            note = f"{path} is {size} bytes: only its last {cap} bytes were parsed"
        data = f.read(cap)
    if note is not None:
        data = data[data.find(b"\n") + 1 :]  # start at a line boundary
    return data.decode("utf-8", errors="replace"), note


def parse_output(text: str, *, fmt: SourceFormat | None = None) -> BenchResult | None:
    """The last result block of a tool's output, or None when the text has no block at all."""
    results = parse_all(text, fmt=fmt)
    return results[-1] if results else None


def parse_all(text: str, *, fmt: SourceFormat | None = None) -> list[BenchResult]:
    """Every result block in the text, in order (a script may run several benchmarks)."""
    return [parse_block(lines, complete=done, fmt=fmt) for lines, done in find_blocks(_clean_lines(text))]


def parse_saved_json(obj: dict[str, Any]) -> BenchResult:
    """A record of ``--output-file`` (sglang) / ``--save-result`` (vLLM) JSON into the same model."""
    res = BenchResult(kind="parsed", source_format=_saved_format(obj))

    def num(key: str) -> float | None:
        v = obj.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def integer(key: str) -> int | None:
        v = num(key)
        return int(v) if v is not None else None

    res.duration_s = num("duration")
    res.successful_requests = integer("completed")
    res.failed_requests = integer("failed")
    res.total_input_tokens = integer("total_input_tokens") or integer("total_input")
    res.total_output_tokens = integer("total_output_tokens") or integer("total_output")
    res.total_output_tokens_retokenized = integer("total_output_tokens_retokenized")
    res.request_throughput = num("request_throughput")
    res.request_goodput = num("request_goodput")
    res.input_tok_s = num("input_throughput")
    res.output_tok_s = num("output_throughput")
    res.total_tok_s = num("total_throughput") or num("total_token_throughput")
    res.peak_output_tok_s = num("max_output_tokens_per_s")
    res.peak_concurrent_requests = num("max_concurrent_requests")
    res.mean_concurrency = num("concurrency")
    res.accept_length = num("accept_length")
    res.spec = saved_spec_decode(obj)
    if res.spec is not None:  # only vLLM writes spec_decode_* (sglang writes accept_length)
        res.source_format = next(e.name for e in _DIALECTS if e.bench.writes_spec_decode)
        if res.accept_length is None:
            res.accept_length = res.spec.acceptance_length
    if isinstance(obj.get("backend"), str):
        res.config.backend = obj["backend"]
    if isinstance(obj.get("max_concurrency"), int):
        res.config.concurrency = obj["max_concurrency"]
    for short, target in (
        ("ttft", "ttft_ms"),
        ("tpot", "tpot_ms"),
        ("itl", "itl_ms"),
        ("e2e_latency", "e2e_ms"),
        ("e2el", "e2e_ms"),
    ):
        stats: LatencyStats = getattr(res, target)
        for prefix, attr in (("mean", "mean"), ("median", "p50"), ("std", "std")):
            v = num(f"{prefix}_{short}_ms")
            if v is not None:
                setattr(stats, attr, v)
        for key in obj:
            m = re.fullmatch(rf"p(\d+(?:\.\d+)?)_{short}_ms", key)
            if m and num(key) is not None:
                _set_stat(stats, "P", m.group(1), num(key))  # type: ignore[arg-type]
    return res


def saved_spec_decode(obj: dict[str, Any]) -> SpecDecoding | None:
    """The ``spec_decode_*`` keys of ``vllm bench serve --save-result`` (vllm/benchmarks/serve.py
    ``_add_spec_decode_result``): rate in percent, per-position rates as fractions (stored here in %).
    None when the run had no speculative decoding section."""

    def num(key: str) -> float | None:
        v = obj.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    keys = [k for k in obj if isinstance(k, str) and k.startswith("spec_decode_")]
    if not keys:
        return None
    spec = SpecDecoding(
        acceptance_rate_pct=num("spec_decode_acceptance_rate"),
        acceptance_length=num("spec_decode_acceptance_length"),
    )
    for key, attr in (
        ("spec_decode_num_drafts", "drafts"),
        ("spec_decode_draft_tokens", "draft_tokens"),
        ("spec_decode_accepted_tokens", "accepted_tokens"),
    ):
        v = num(key)
        if v is not None:
            setattr(spec, attr, int(v))
    rates = obj.get("spec_decode_per_position_acceptance_rates")
    if (
        isinstance(rates, list)
        and rates
        and all(isinstance(r, int | float) and not isinstance(r, bool) for r in rates)
    ):
        scale = 100.0 if max(rates) <= 1.0 else 1.0  # fractions in vLLM's JSON, percent in its printout
        spec.per_position_acceptance_pct = [float(r) * scale for r in rates]
    return spec
