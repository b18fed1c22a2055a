"""`bench --parse` of every real client's output (issue 21 section 3), field by field, and refusal of the rest.

Fixtures: tests/fixtures/bench/real-clients/ (README there: the real tools run unmodified against the sim).
Known figures of those runs: TPOT about 10.6-10.7 ms, decode about 93.5-94 tok/s, accept length 1.88.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.cli import main
from specdebug.core.bench.parsing import UnknownResult, parse_results

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "real-clients"


def parse(name: str):
    (res,) = parse_results((FIX / name).read_text())
    return res


def test_aiperf_export_field_by_field():
    r = parse("aiperf-vllm-profile_export_aiperf.json")
    assert r.source_format == "aiperf" and r.status == "done"
    assert (r.successful_requests, r.failed_requests) == (8, 0)
    assert r.duration_s == pytest.approx(22.8586, abs=1e-3)
    assert (r.total_input_tokens, r.total_output_tokens) == (4096, 2048)
    assert r.output_tok_s == pytest.approx(89.544, abs=1e-3) and r.input_tok_s == pytest.approx(
        179.088, abs=1e-3
    )
    assert r.request_throughput == pytest.approx(0.34978, abs=1e-5)
    assert r.total_tok_s == pytest.approx(268.632, abs=1e-3)
    assert r.ttft_ms.mean == pytest.approx(99.538, abs=1e-3) and r.ttft_ms.p99 == pytest.approx(
        130.317, abs=1e-3
    )
    assert r.tpot_ms.mean == pytest.approx(10.7053, abs=1e-4)  # aiperf's "Inter Token Latency"
    assert r.itl_ms.mean == pytest.approx(20.091, abs=1e-3)  # its inter-chunk latency
    assert r.e2e_ms.p50 == pytest.approx(2820.72, abs=1e-2) and r.e2e_ms.extra["min"] == pytest.approx(
        2803.08, abs=1e-2
    )
    assert (r.config.concurrency, r.config.requests, r.config.input_len, r.config.output_len) == (
        1,
        8,
        512,
        256,
    )
    assert r.decode_tok_s == pytest.approx(1000 / 10.7053, abs=1e-3)  # single stream: 1000 / TPOT mean
    assert r.fields["output_token_throughput_per_user"].startswith("93.42")


def test_aiperf_console_table():
    r = parse("aiperf-vllm.txt")
    assert r.source_format == "aiperf"
    assert r.ttft_ms.mean == 99.54 and r.ttft_ms.p50 == 97.6 and r.tpot_ms.mean == 10.71
    assert r.e2e_ms.mean == 2829.39 and r.output_tok_s == 89.54 and r.request_throughput == 0.35
    assert (r.successful_requests, r.failed_requests) == (8, 0)
    assert r.duration_s == 22.86 and (r.config.concurrency, r.config.requests) == (1, 8)
    assert r.fields["output_token_throughput_per_user"] == "93.42 tokens/sec/user"  # a wrapped name
    assert r.decode_tok_s == pytest.approx(1000 / 10.71)


def test_guidellm_report_field_by_field():
    r = parse("guidellm-vllm.json")
    assert r.source_format == "guidellm" and r.config.backend == "guidellm 0.8.1 synchronous"
    assert (r.successful_requests, r.failed_requests, r.total_output_tokens) == (8, 0, 2048)
    assert (r.config.concurrency, r.config.requests) == (1, 8)
    assert r.duration_s == pytest.approx(22.0355, abs=1e-4)
    assert r.output_tok_s == pytest.approx(92.941, abs=1e-3) and r.request_throughput == pytest.approx(
        0.36305, abs=1e-5
    )
    assert r.ttft_ms.mean == pytest.approx(29.519, abs=1e-3)
    assert r.tpot_ms.mean == pytest.approx(10.6455, abs=1e-4)  # guidellm's ITL: TTFT left out
    assert r.e2e_ms.mean == pytest.approx(2745.859, abs=1e-3)  # seconds in the report
    assert r.fields["time_per_output_token_ms"].startswith("10.719")  # guidellm's TPOT, TTFT included
    assert r.decode_tok_s == pytest.approx(1000 / 10.6455, abs=1e-2)
    assert any("generation delay" in w for w in r.warnings)


@pytest.mark.parametrize(
    ("name", "tpot"),
    [("sglang-bench-serving-sgl-native.txt", 10.62), ("sglang-bench-serving-sgl-native.jsonl", 10.621955504902026),
     ("vllm-bench-serve-vllm.txt", 10.66), ("vllm-bench-serve-vllm.json", 10.660287156372306)],
)  # fmt: skip
def test_single_stream_results_get_the_decode_rate(name: str, tpot: float):
    """Max request concurrency 1: decode rate = 1000 / TPOT mean (output throughput includes TTFT)."""
    r = parse(name)
    assert r.config.concurrency == 1 and r.tpot_ms.mean == pytest.approx(tpot)
    assert r.decode_tok_s == pytest.approx(1000 / tpot) and r.headline() == r.decode_tok_s
    assert r.output_tok_s < r.decode_tok_s


@pytest.mark.parametrize(
    "doc",
    [{"foo": 1}, {"completed": 3}, [1, 2], {"metadata": {}, "benchmarks": []}, "[]"],
    ids=["foo", "one-key", "list", "empty-guidellm-like", "empty-list"],
)
def test_unknown_json_is_refused(doc, tmp_path: Path, capsys):
    text = doc if isinstance(doc, str) else json.dumps(doc)
    if text != "[]":
        with pytest.raises(UnknownResult):
            parse_results(text)
    path = tmp_path / "x.json"
    path.write_text(text)
    session = tmp_path / "sess"
    rc = main(["bench", "--parse", str(path), "--session", str(session)])
    assert rc in (1, 2) and (rc == 2 or text == "[]")
    err = capsys.readouterr().err
    assert "expected a result of sglang.bench_serving" in err or "no benchmark result found" in err
    journal = session / "events.jsonl"
    assert not journal.exists() or "bench_result" not in journal.read_text()


def test_bench_parse_json_of_every_client(tmp_path: Path, capsys):
    for name in ("aiperf-vllm-profile_export_aiperf.json", "aiperf-vllm.txt", "guidellm-vllm.json"):
        assert main(["bench", "--parse", str(FIX / name), "--json"]) == 0, name
        data = json.loads(capsys.readouterr().out)
        assert data["source_format"] in ("aiperf", "guidellm") and data["decode_tok_s"] > 90
