"""External benchmark output parsers: every field of both formats, old typos, stripped/trailing spaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.core.bench.external import parse_all, parse_output, parse_saved_json

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench"


def load(name: str):
    res = parse_output((FIX / name).read_text())
    assert res is not None
    return res


def test_sglang_new_every_field() -> None:
    r = load("sglang_bench_serving.txt")
    assert r.source_format == "sglang" and r.kind == "parsed"
    assert (r.config.backend, r.config.request_rate, r.config.concurrency) == ("sglang", "inf", 1)
    assert r.successful_requests == 20
    assert r.duration_s == 57.31
    assert (r.total_input_tokens, r.total_output_tokens, r.total_output_tokens_retokenized) == (
        20480,
        5120,
        5118,
    )
    assert r.request_throughput == 0.35
    assert r.input_tok_s == 357.36
    assert r.output_tok_s == 89.34
    assert r.peak_output_tok_s == 99.0
    assert r.peak_concurrent_requests == 2
    assert r.total_tok_s == 446.70
    assert r.mean_concurrency == 1.0
    assert r.accept_length == 2.84
    assert r.e2e_ms.model_dump(exclude_defaults=True) == {
        "mean": 2864.51,
        "p50": 2861.07,
        "p90": 2890.22,
        "p95": 2899.80,
        "p99": 2911.47,
    }
    assert r.ttft_ms.model_dump(exclude_defaults=True) == {"mean": 41.27, "p50": 40.85, "p99": 52.10}
    assert r.tpot_ms.model_dump(exclude_defaults=True) == {"mean": 11.07, "p50": 11.06, "p99": 11.21}
    assert r.itl_ms.model_dump(exclude_defaults=True) == {
        "mean": 11.08,
        "p50": 0.03,
        "p95": 31.77,
        "p99": 33.02,
        "max": 48.61,
    }
    assert r.fields["Total input vision tokens"] == "0"
    assert r.unparsed_lines == [] and r.warnings == []


def test_sglang_old_typo_and_stripped_spaces() -> None:
    r = load("sglang_bench_serving_old_stripped.txt")
    assert r.source_format == "sglang"
    assert r.fields["Max reqeuest concurrency"] == "not set"
    assert r.config.concurrency is None  # "not set"
    assert r.config.backend == "sglang-oai"
    assert r.output_tok_s == 94.64 and r.accept_length is None
    assert r.e2e_ms.p50 == 2700.50 and r.e2e_ms.p99 is None
    assert r.itl_ms.p99 == 29.88 and r.itl_ms.max is None


def test_sglang_typo_with_number() -> None:
    text = (FIX / "sglang_bench_serving_old_stripped.txt").read_text().replace("not set", "4")
    assert parse_output(text).config.concurrency == 4


def test_vllm_spec_section_and_percentiles() -> None:
    r = load("vllm_bench_serve_spec.txt")
    assert r.source_format == "vllm"
    assert (r.successful_requests, r.failed_requests, r.config.concurrency) == (100, 0, 8)
    assert r.duration_s == 41.27
    assert (r.total_input_tokens, r.total_output_tokens) == (102400, 25600)
    assert r.request_throughput == 2.42 and r.request_goodput == 2.10
    assert r.output_tok_s == 620.31 and r.peak_output_tok_s == 712.0
    assert r.peak_concurrent_requests == 8.0 and r.total_tok_s == 3101.55
    assert r.ttft_ms.model_dump(exclude_defaults=True) == {
        "mean": 121.55,
        "p50": 118.02,
        "p90": 180.40,
        "p99": 240.33,
    }
    assert r.tpot_ms.model_dump(exclude_defaults=True) == {
        "mean": 12.44,
        "p50": 12.31,
        "p90": 13.90,
        "p99": 15.02,
    }
    assert r.itl_ms.model_dump(exclude_defaults=True) == {
        "mean": 30.11,
        "p50": 28.75,
        "p90": 41.06,
        "p99": 77.92,
    }
    assert r.e2e_ms.model_dump(exclude_defaults=True) == {
        "mean": 3293.60,
        "p50": 3270.15,
        "p90": 3502.88,
        "p99": 3790.40,
    }
    assert r.spec is not None
    assert r.spec.acceptance_rate_pct == 71.42 and r.spec.acceptance_length == 3.14
    assert (r.spec.drafts, r.spec.draft_tokens, r.spec.accepted_tokens) == (8153, 24459, 17469)
    assert r.spec.per_position_acceptance_pct == [86.21, 71.02, 57.03]
    assert r.accept_length == 3.14
    assert r.unparsed_lines == []


def test_vllm_old_unknown_line_kept() -> None:
    r = load("vllm_bench_serve_old_stripped.txt")
    assert r.source_format == "vllm"
    assert r.failed_requests == 2 and r.config.request_rate == "4.00"
    assert r.unparsed_lines == ["Some new line the parser has never seen"]
    assert r.spec is None and r.e2e_ms.is_empty()
    assert r.ttft_ms.p99 == 190.02 and r.itl_ms.p50 == 17.66


def test_truncated_block_warns() -> None:
    r = load("sglang_bench_serving_truncated.txt")
    assert r.output_tok_s == 60.21 and r.successful_requests == 3
    assert any("truncated" in w for w in r.warnings)
    assert r.unparsed_lines == ["Total gen"]


def test_crlf_and_extra_percentiles_and_bad_numbers() -> None:
    text = "\r\n".join(
        [
            "============ Serving Benchmark Result ============",
            "Successful requests:                     5         ",
            "P99.9 TTFT (ms):                         12.5",
            "Min TTFT (ms):                           1.5",
            "Mean FOO (ms):                           3.0",
            "Output token throughput (tok/s):         abc",
            "Per-position acceptance (%):             80.0, 60.0",
            "==================================================",
        ]
    )
    r = parse_output(text)
    assert r.successful_requests == 5
    assert r.ttft_ms.extra == {"p99.9": 12.5, "min": 1.5}
    assert "Mean FOO (ms):                           3.0" in r.unparsed_lines
    assert r.output_tok_s is None and any("abc" in w for w in r.warnings)
    assert r.spec is not None and r.spec.per_position_acceptance_pct == [80.0, 60.0]


def test_no_block_and_multiple_blocks() -> None:
    assert parse_output("just noise\nnothing here") is None
    one = (FIX / "sglang_bench_serving.txt").read_text()
    two = (FIX / "vllm_bench_serve_spec.txt").read_text()
    results = parse_all(one + two)
    assert [r.source_format for r in results] == ["sglang", "vllm"]


@pytest.mark.parametrize("garbage", ["", "=" * 50, "==== Serving Benchmark Result ====\n:::\n: x\n\x00\xff"])
def test_garbage_never_raises(garbage: str) -> None:
    parse_all(garbage)


def test_saved_json_records() -> None:
    sg = {
        "backend": "sglang",
        "duration": 10.0,
        "completed": 4,
        "total_input_tokens": 400,
        "total_output_tokens": 800,
        "request_throughput": 0.4,
        "output_throughput": 80.0,
        "mean_ttft_ms": 40.0,
        "median_ttft_ms": 39.0,
        "p99_ttft_ms": 55.0,
        "mean_itl_ms": 12.0,
        "p95_itl_ms": 30.0,
        "accept_length": 2.5,
        "max_concurrency": 1,
        "mean_e2e_latency_ms": 2500.0,
    }
    r = parse_saved_json(sg)
    assert r.source_format == "sglang" and r.output_tok_s == 80.0 and r.accept_length == 2.5
    assert r.ttft_ms.p99 == 55.0 and r.itl_ms.p95 == 30.0 and r.e2e_ms.mean == 2500.0
    vl = {
        "duration": 5.0,
        "completed": 10,
        "failed": 1,
        "output_throughput": 300.0,
        "p99_e2el_ms": 900.0,
        "median_tpot_ms": 9.0,
    }
    r = parse_saved_json(vl)
    assert (
        r.source_format == "vllm"
        and r.failed_requests == 1
        and r.e2e_ms.p99 == 900.0
        and r.tpot_ms.p50 == 9.0
    )
    json.dumps(r.model_dump(mode="json"))
