"""The sim's vLLM engine: `vllm serve` flag handling, its stats / SpecDecoding lines per version, and
/metrics counters that agree with the lines (read back through core.metrics and the vLLM log pack).

Shapes: shared/formats/current-sources.md rows "vLLM spec log line" (vllm@ee4ceaae
vllm/v1/spec_decode/metrics.py), "vLLM spec older", "vLLM stats line" (vllm/v1/metrics/loggers.py),
"vLLM Prometheus" (SpecDecodingProm, `_total` names); --speculative-config parsing as vLLM's
arg_utils.parse_type(json.loads).
"""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from specdebug.core.bench.models import BenchResult, ServerMetrics
from specdebug.core.bench.prom import fill_server
from specdebug.core.logs.parser import LogParser
from specdebug.core.metrics import PromRates, ServerProm, compute_rates, parse_metrics
from specdebug.sim.server.common.costmodel import SpecConfig
from specdebug.sim.server.sglang.launcher import engine_of
from specdebug.sim.server.vllm.args import non_default_args, parse_vllm_args
from specdebug.sim.server.vllm.engine import SpecCounters, VllmEngine, render_vllm_metrics
from specdebug.sim.server.vllm.procs import worker_name

EAGLE3 = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B", "num_speculative_tokens": 3}'


def test_vllm_serve_flags_and_speculative_config():
    cfg = parse_vllm_args(["--engine", "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct",
                           "--tensor-parallel-size", "8", "--speculative-config", EAGLE3])  # fmt: skip
    assert cfg.args.model == "meta-llama/Llama-3.1-70B-Instruct" and cfg.args.tensor_parallel_size == 8
    assert cfg.args.port == 8000 and cfg.method == "eagle3"
    assert cfg.spec == SpecConfig(algorithm="EAGLE3", num_steps=3, topk=1, num_draft_tokens=4)
    assert non_default_args(cfg.args)["speculative_config"]["num_speculative_tokens"] == 3
    assert parse_vllm_args(["m", "-tp", "2"]).spec.enabled is False
    ngram = parse_vllm_args(["m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}'])
    assert ngram.spec.algorithm == "NGRAM" and ngram.spec.num_steps == 4
    mtp = parse_vllm_args(["m", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'])
    assert mtp.spec.algorithm == "EAGLE" and mtp.method == "mtp"
    assert engine_of(["--engine", "vllm", "serve", "m"]) == "vllm" and engine_of(["--tp", "2"]) == "sglang"


def test_bad_speculative_config_fails_as_vllm(capsys):
    with pytest.raises(SystemExit) as info:
        parse_vllm_args(["m", "--speculative-config", "{not json"])
    assert info.value.code == 2
    assert "argument --speculative-config: Value {not json cannot be converted to <function loads" in (
        capsys.readouterr().err
    )
    with pytest.raises(ValidationError, match="Unexpected keyword argument"):
        parse_vllm_args(["m", "--speculative-config", '{"method": "eagle3", "model": "d", "num_spec": 3}'])
    with pytest.raises(ValidationError, match="Unsupported speculative method"):
        parse_vllm_args(["m", "--speculative-config", '{"method": "nope", "num_speculative_tokens": 3}'])
    with pytest.raises(ValidationError, match="speculative model is required"):
        parse_vllm_args(["m", "--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 3}'])
    from specdebug.sim.server.vllm.server import main

    bad = ["m", "--speculative-config", '{"method": "eagle3", "model": "d", "bogus": 1}']
    # uncaught: from 0.32 on the interpreter's traceback has no `(APIServer pid=N)` (a log-record field
    # now; the real 0.32.0 log in tests/fixtures/logs); older decorate_logs wrapped stderr itself
    assert main(bad) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "(APIServer pid=" not in err
    assert main([*bad, "--server-version", "0.11.2"]) == 1
    assert capsys.readouterr().err.startswith("(APIServer pid=")


def test_worker_titles():
    assert worker_name(0, 1, False) == "Worker"
    assert worker_name(3, 8, False) == "Worker_TP3" and worker_name(1, 2, True) == "Worker_TP1_EP1"


def test_spec_counters_follow_vllm_definitions():
    """One draft per request per step; accepted = accept length - 1 (the bonus token is not a draft)."""
    c = SpecCounters()
    c.add([1, 2, 4, 3], k=3)
    assert (c.drafts, c.draft_tokens, c.accepted) == (4, 12, 0 + 1 + 3 + 2)
    assert c.per_pos == [3, 2, 1]


def _engine(version: str) -> VllmEngine:
    e = VllmEngine(
        SpecConfig(algorithm="EAGLE3", num_steps=3, topk=1, num_draft_tokens=4),
        log=lambda m: None,
        seed=0,
        max_total_tokens=10000,
        max_running=8,
        cuda_graph=True,
        server_version=version,
    )
    rng = random.Random(1)
    accepts = [rng.randint(1, 4) for _ in range(200)]
    e._on_step(accepts)
    e.gen_interval = sum(accepts)
    e.stats.generation_tokens_total = sum(accepts)
    return e


@pytest.mark.parametrize(
    ("version", "prefix"),
    [
        ("0.11.2", "SpecDecoding metrics: Mean acceptance length: "),
        ("0.10.1", "SpecDecoding metrics: Draft acceptance rate: "),
        ("0.8.5", "SpecDecoding metrics: Draft acceptance rate: "),
    ],
)
def test_stats_lines_per_version_parse_back_to_the_counters(version: str, prefix: str):
    e = _engine(version)
    t = e.total
    lines = e.stats_lines(now=e._stats_at + 2.0)
    assert lines[0].startswith("Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: ")
    assert lines[1].startswith(prefix)
    parser = LogParser("vllm")
    stats = parser.parse("(APIServer pid=1) INFO 05-04 01:06:43 [loggers.py:207] " + lines[0])
    assert stats.event == "engine_stats" and stats.fields["running"] == 0
    spec = parser.parse("(APIServer pid=1) INFO 05-04 01:06:43 [metrics.py:96] " + lines[1])
    assert spec.event == "spec_decode"
    assert spec.metrics["draft_acceptance_rate"] == pytest.approx(t.accepted / t.draft_tokens * 100, abs=0.05)
    if version != "0.8.5":
        assert spec.metrics["mean_acceptance_length"] == pytest.approx(1 + t.accepted / t.drafts, abs=0.005)
        assert spec.metrics["per_position_acceptance"] == pytest.approx(
            [n / t.drafts for n in t.per_pos], abs=5e-4
        )
    assert e.stats_lines(now=e._stats_at + 2.0)[0].endswith("Prefix cache hit rate: 0.0%")  # one more, zeros
    assert e.stats_lines(now=e._stats_at + 2.0) == []  # idle: vLLM logs at DEBUG


def test_metrics_page_agrees_with_the_counters():
    e = _engine("0.11.2")
    r = compute_rates(None, parse_metrics(render_vllm_metrics(e, "m", 1.7e9)))
    t = e.total
    assert r.engine == "vllm" and (r.drafts, r.draft_tokens, r.accepted_tokens) == (
        t.drafts,
        t.draft_tokens,
        t.accepted,
    )
    assert r.accept_length == pytest.approx(1 + t.accepted / t.drafts)
    assert r.per_position == pytest.approx([n / t.drafts for n in t.per_pos])
    assert (r.running, r.queued, r.kv_usage) == (0.0, 0.0, 0.0)


def test_quiet_log_gets_accept_length_from_metrics():
    """A benchmark whose log slice had no spec line still records the server's accept length (history and
    report read `server.accept_len`), with its source; a log value is never replaced."""
    rates = PromRates(engine="vllm", window_s=3.0, accept_length=2.4, gen_throughput=90.0)
    res = BenchResult(
        server=ServerMetrics(samples=0), server_prom=ServerProm(status="ok", scrapes=3, rates=rates)
    )
    fill_server(res)
    assert res.server.accept_len == 2.4 and res.server.sources == {
        "accept_len": "/metrics",
        "gen_throughput": "/metrics",
    }
    res = BenchResult(server=ServerMetrics(accept_len=2.2), server_prom=ServerProm(status="ok", rates=rates))
    fill_server(res)
    assert res.server.accept_len == 2.2 and "accept_len" not in res.server.sources
    off = BenchResult(server_prom=ServerProm(status="off", message="metrics off"))
    fill_server(off)
    assert off.server is None
