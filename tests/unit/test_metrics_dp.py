"""/metrics with DP attention, NaN gauges and SGLang 0.5.23's spec gauges (issue 21 sections 1-2).

The DP page is built from SGLang's own label rule (srt/observability/metrics_collector.py, the
scheduler collector: labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank, and dp_rank when
the scheduler has one; with --enable-dp-attention every DP rank's stats-logging scheduler gets its own
collector, tp_rank = its global TP rank, moe_ep_rank its EP rank): TP 8, DP 8, values invented.
"""

from __future__ import annotations

import json

import httpx
import pytest

from specdebug.core.metrics import compute_rates
from specdebug.core.promparse import parse_metrics
from specdebug.core.specflags import spec_mismatches
from specdebug.sim.server.common.engine import Engine
from specdebug.sim.server.sglang.http import ServerState, build_app
from specdebug.sim.server.sglang.options import parse_args

HEAD = 'model_name="m",engine_type="unified"'


def page(ranks: list[dict[str, str]], values: dict[str, list[float]], kind: dict[str, str]) -> str:
    lines = []
    for name, per_rank in values.items():
        base = name.removesuffix("_total")
        lines += [f"# HELP {base} x", f"# TYPE {base} {kind[name]}"]
        for labels, v in zip(ranks, per_rank, strict=True):
            extra = ",".join(f'{k}="{val}"' for k, val in labels.items())
            lines.append(f"{name}{{{HEAD},{extra}}} {v}")
    return "\n".join(lines) + "\n"


DP8 = [{"tp_rank": str(r), "pp_rank": "0", "moe_ep_rank": str(r), "dp_rank": str(r)} for r in range(8)]
KIND = {
    "sglang:num_running_reqs": "gauge",
    "sglang:gen_throughput": "gauge",
    "sglang:spec_accept_length": "gauge",
    "sglang:token_usage": "gauge",
    "sglang:generation_tokens_total": "counter",
    "sglang:spec_num_draft_tokens": "gauge",
}


def test_dp_attention_ranks_are_summed_and_ratios_averaged():
    values = {
        "sglang:num_running_reqs": [2.0] * 8,
        "sglang:gen_throughput": [90.0, 92.0, 94.0, 96.0, 90.0, 92.0, 94.0, 96.0],
        "sglang:spec_accept_length": [1.8, 1.9, 2.0, 1.9, 1.8, 1.9, 2.0, 1.9],
        "sglang:token_usage": [0.1] * 8,
        "sglang:generation_tokens_total": [1000.0] * 8,
        "sglang:spec_num_draft_tokens": [3.0] * 8,
    }
    snap = parse_metrics(page(DP8, values, KIND), t=0.0)
    assert snap.dp_ranks == 8
    assert snap.values["sglang:num_running_reqs"] == 16.0  # not rank 0's 2
    assert snap.values["sglang:gen_throughput"] == pytest.approx(744.0)
    assert snap.values["sglang:spec_accept_length"] == pytest.approx(1.9)
    assert snap.values["sglang:token_usage"] == pytest.approx(0.1)
    assert snap.values["sglang:spec_num_draft_tokens"] == 3.0  # a setting: the same on every rank
    later = parse_metrics(page(DP8, {**values, "sglang:generation_tokens_total": [1100.0] * 8}, KIND), t=2.0)
    r = compute_rates(snap, later)
    assert r.running == 16 and r.gen_throughput == pytest.approx(400.0) and r.dp_ranks == 8
    assert "summed over 8 DP ranks" in r.sources["running"]
    assert "mean of 8 DP ranks" in r.sources["accept_length"]
    assert r.draft_accept_rate == pytest.approx(0.45)  # (1.9 - 1) / (3 - 1)


def test_tp_replicas_count_once():
    """--enable-metrics-for-all-schedulers, TP 8, no DP: eight series alike but for tp_rank/moe_ep_rank."""
    tp8 = [{"tp_rank": str(r), "pp_rank": "0", "moe_ep_rank": str(r)} for r in range(8)]
    snap = parse_metrics(page(tp8, {"sglang:num_running_reqs": [3.0] * 8}, KIND))
    assert snap.values["sglang:num_running_reqs"] == 3.0 and snap.dp_ranks == 1
    # DP 4 x attention TP 2: replicas inside each DP group, groups summed
    dp4 = [
        {"tp_rank": str(r), "pp_rank": "0", "moe_ep_rank": str(r), "dp_rank": str(r // 2)} for r in range(8)
    ]
    snap = parse_metrics(
        page(dp4, {"sglang:num_running_reqs": [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]}, KIND)
    )
    assert snap.values["sglang:num_running_reqs"] == 10.0 and snap.dp_ranks == 4


def test_vllm_dp_engines_stay_summed():
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 4.0\n'
    )
    assert parse_metrics(text).values["vllm:num_requests_running"] == 7.0


def test_nan_and_inf_become_null_with_a_note():
    text = (
        "# TYPE sglang:spec_accept_length gauge\n"
        f'sglang:spec_accept_length{{{HEAD},tp_rank="0"}} NaN\n'
        "# TYPE sglang:gen_throughput gauge\n"
        f'sglang:gen_throughput{{{HEAD},tp_rank="0"}} +Inf\n'
        "# TYPE sglang:num_running_reqs gauge\n"
        f'sglang:num_running_reqs{{{HEAD},tp_rank="0"}} 1.0\n'
    )
    snap = parse_metrics(text)
    assert snap.engine == "sglang" and "sglang:spec_accept_length" not in snap.values
    r = compute_rates(None, snap)
    data = json.loads(r.model_dump_json())
    assert data["accept_length"] is None and data["gen_throughput"] is None and data["running"] == 1
    assert any("spec_accept_length was NaN" in n for n in r.notes)
    assert any("gen_throughput was +inf" in n for n in r.notes)
    json.dumps(r.model_dump(mode="json"), allow_nan=False)  # valid JSON, no NaN token


async def test_sim_0523_exports_the_spec_gauges_and_they_check_the_profile():
    cfg = parse_args(
        ["--enable-metrics", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2"]
    )
    engine = Engine(cfg.spec, log=lambda m: None, seed=0, max_total_tokens=1000, max_running=4,
                    decode_log_interval=10, cuda_graph=True)  # fmt: skip
    app = build_app(ServerState(cfg, engine, ready=True, max_total_num_tokens=1000, max_req_input_len=900))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim") as c:
        text = (await c.get("/metrics")).text
    assert "sglang:spec_num_steps{" in text and "sglang:spec_verify_calls_total{" in text
    r = compute_rates(None, parse_metrics(text))
    assert (r.num_steps, r.num_draft_tokens) == (2, 3)
    assert spec_mismatches(r, 2, 3) == []
    assert spec_mismatches(r, 3, None) == [
        "the server runs 2 speculative steps but the profile's --speculative-num-steps is 3"
    ]
    old = parse_args(["--enable-metrics", "--server-version", "0.5.4.post1", "--speculative-algorithm", "EAGLE3",
                      "--speculative-num-steps", "2"])  # fmt: skip
    app = build_app(ServerState(old, engine, ready=True, max_total_num_tokens=1000, max_req_input_len=900))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim") as c:
        assert "spec_num_steps" not in (await c.get("/metrics")).text


def test_profile_flags_for_the_check():
    from specdebug.core.specflags import profile_spec_flags

    argv = ["python3", "-m", "sglang.launch_server", "--speculative-num-steps", "2", "--tp", "8"]
    assert profile_spec_flags(argv) == (2, None)
    assert profile_spec_flags([*argv, "--speculative-num-draft-tokens", "3"]) == (2, 3)
