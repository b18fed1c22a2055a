"""Which benchmark client wrote a saved result, and its BenchResults: the one entry point of `bench --parse`.

Why a dispatcher that refuses: any JSON object used to be read as an empty "done" sglang result (and
went into the journal), so a guidellm report or a typo'd file looked like a benchmark with no
figures.  Each format is now recognised by what its tool writes, and anything else is refused,
naming what was expected.

Known: the printed result blocks of `sglang.bench_serving` / `vllm bench serve` (external), their
saved JSON / JSONL (`--output-file`, `--save-result`), aiperf's `profile_export_aiperf.json` and
console table (aiperf), guidellm's JSON report (guidellm).  A single-stream result also gets its
decode rate, 1000 / TPOT mean, so it compares with the built-in client's (headline).
"""

from __future__ import annotations

import json
from typing import Any

from specdebug.core.bench.aiperf import is_aiperf, parse_aiperf_console, parse_aiperf_json
from specdebug.core.bench.external import parse_all, parse_saved_json
from specdebug.core.bench.guidellm import is_guidellm, parse_guidellm_json
from specdebug.core.bench.models import BenchResult
from specdebug.engines import ENGINES
from specdebug.errors import SpecdebugError

EXPECTED = (
    f"a result of {' or '.join(e.bench.tool for e in ENGINES.values())} (the printed block, or its "
    f"{' / '.join(e.bench.saved_flag for e in ENGINES.values())} JSON), aiperf (profile_export_aiperf.json "
    "or its console table) or guidellm (its JSON report)"
)
# keys every bench_serving / vllm bench serve record has (bench_serving.py, vllm/benchmarks/serve.py)
SAVED_KEYS = frozenset(
    {
        "completed",
        "duration",
        "output_throughput",
        "total_output_tokens",
        "request_throughput",
        "total_input_tokens",
    }
)


class UnknownResult(ValueError, SpecdebugError):
    """The input is not a benchmark result this module knows (the message names what was expected)."""


def is_saved_bench(obj: dict[str, Any]) -> bool:
    return len(SAVED_KEYS & obj.keys()) >= 2


def parse_results(text: str) -> list[BenchResult]:
    """Every result in the text, in order; [] for text without any; UnknownResult for JSON of another kind."""
    stripped = text.lstrip()
    objs = _json_values(stripped) if stripped[:1] in ("{", "[") else None
    if objs is not None:
        out: list[BenchResult] = []
        for obj in objs:
            out += from_json(obj)
        return [with_decode_rate(r) for r in out]
    results = parse_all(text)
    if not results:
        console = parse_aiperf_console(text)
        results = [console] if console is not None else []
    return [with_decode_rate(r) for r in results]


def _json_values(text: str) -> list[Any] | None:
    """The JSON document (an array gives its items), else the values of a JSONL file, else None."""
    try:
        doc = json.loads(text)
    except ValueError:
        pass
    else:
        return list(doc) if isinstance(doc, list) else [doc]
    values = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except ValueError:
            return None
    return values


def from_json(obj: Any) -> list[BenchResult]:
    """One JSON value into results, by the format it is; UnknownResult otherwise."""
    if not isinstance(obj, dict):
        raise UnknownResult(f"a JSON {type(obj).__name__} is not a benchmark result: expected {EXPECTED}")
    if is_aiperf(obj):
        return [parse_aiperf_json(obj)]
    if is_guidellm(obj):
        found = parse_guidellm_json(obj)
        if not found:
            raise UnknownResult("a guidellm report without benchmarks")
        return found
    if is_saved_bench(obj):
        return [parse_saved_json(obj)]
    keys = ", ".join(sorted(map(str, obj))[:6]) or "none"
    raise UnknownResult(f"JSON object with keys {keys} is not a benchmark result: expected {EXPECTED}")


def with_decode_rate(res: BenchResult) -> BenchResult:
    """Single stream (concurrency 1): decode rate = 1000 / TPOT mean, TTFT left out like the built-in
    client's, so the two compare (output throughput includes TTFT: 92.0 vs 94 tok/s)."""
    tpot = res.tpot_ms.mean
    if res.decode_tok_s is None and res.config.concurrency == 1 and tpot:
        res.decode_tok_s = 1000.0 / tpot
    return res
