"""Prometheus /metrics as a source: parsing with prometheus_client, counters -> rates over a window.

Pages are written from the names in shared/formats/current-sources.md ("SGLang Prometheus":
observability/scheduler_metrics_mixin.py labels and sglang's essential-metrics test list; "vLLM
Prometheus": vllm@ee4ceaae vllm/v1/spec_decode/metrics.py SpecDecodingProm, counters exposed with
`_total`) and vllm/v1/metrics/loggers.py (PrometheusStatLogger: num_requests_running/waiting,
kv_cache_usage_perc, generation_tokens); values invented.
"""

from __future__ import annotations

import pytest

from specdebug.core.metrics import (
    PromSnapshot,
    compute_rates,
    off_message,
    parse_metrics,
    summarize_window,
    window_rates,
)

LBL = 'model_name="m",engine="0"'


def vllm_page(drafts: int, draft_tokens: int, accepted: int, per_pos: list[int], gen: int, running=1) -> str:
    lines = []
    for name, value in (
        ("vllm:spec_decode_num_drafts", drafts),
        ("vllm:spec_decode_num_draft_tokens", draft_tokens),
        ("vllm:spec_decode_num_accepted_tokens", accepted),
        ("vllm:generation_tokens", gen),
        ("vllm:prompt_tokens", 100),
    ):
        lines += [
            f"# HELP {name} x",
            f"# TYPE {name} counter",
            f"{name}_total{{{LBL}}} {float(value)}",
            f"{name}_created{{{LBL}}} 1.7e+09",
        ]
    name = "vllm:spec_decode_num_accepted_tokens_per_pos"
    lines += [f"# HELP {name} x", f"# TYPE {name} counter"]
    lines += [f'{name}_total{{{LBL},position="{i}"}} {float(v)}' for i, v in enumerate(per_pos)]
    for name, value in (
        ("vllm:num_requests_running", running),
        ("vllm:num_requests_waiting", 2),
        ("vllm:kv_cache_usage_perc", 0.25),
    ):
        lines += [f"# HELP {name} x", f"# TYPE {name} gauge", f"{name}{{{LBL}}} {float(value)}"]
    return "\n".join(lines) + "\n"


def sglang_page(accept_len: float, accept_rate: float, gen_total: int, tp_ranks: int = 1) -> str:
    lines = []
    for tp in range(tp_ranks):
        lbl = f'model_name="m",engine_type="unified",tp_rank="{tp}",pp_rank="0"'
        for name, value in (
            ("sglang:spec_accept_length", accept_len),
            ("sglang:spec_accept_rate", accept_rate),
            ("sglang:num_running_reqs", 3),
            ("sglang:num_queue_reqs", 1),
            ("sglang:token_usage", 0.42),
            ("sglang:gen_throughput", 77.5),
        ):
            lines += [f"# TYPE {name} gauge", f"{name}{{{lbl}}} {float(value)}"]
        lines += [
            "# TYPE sglang:generation_tokens counter",
            f"sglang:generation_tokens_total{{{lbl}}} {gen_total}",
        ]
    return "\n".join(lines) + "\n"


def test_vllm_counters_become_window_rates():
    a = parse_metrics(vllm_page(10, 30, 15, [8, 5, 2], 1000), t=100.0)
    b = parse_metrics(vllm_page(110, 330, 195, [88, 65, 42], 1400), t=102.0)
    assert a.engine == b.engine == "vllm" and b.per_pos == {0: 88.0, 1: 65.0, 2: 42.0}
    r = compute_rates(a, b)
    assert r.window_s == pytest.approx(2.0)
    assert r.drafts == 100 and r.draft_tokens == 300 and r.accepted_tokens == 180
    assert r.accept_rate == pytest.approx(180 / 300)
    assert r.accept_length == pytest.approx(1 + 180 / 100)  # includes the bonus token, as vLLM's log line
    assert r.per_position == pytest.approx([0.8, 0.6, 0.4])
    assert r.gen_throughput == pytest.approx(200.0)
    assert (r.running, r.queued, r.kv_usage) == (1.0, 2.0, 0.25)
    assert "rate over 2.0 s" in r.sources["accept_length"]
    assert r.sources["kv_usage"] == "vllm:kv_cache_usage_perc (gauge)"


def test_vllm_single_scrape_is_since_start_and_reset_counts_from_zero():
    b = parse_metrics(vllm_page(100, 300, 150, [60, 50, 40], 900), t=5.0)
    r = compute_rates(None, b)
    assert r.window_s is None and r.accept_length == pytest.approx(2.5) and r.gen_throughput is None
    assert "since server start" in r.sources["accept_rate"]
    restarted = parse_metrics(vllm_page(10, 30, 15, [6, 5, 4], 90), t=6.0)
    r2 = compute_rates(b, restarted)
    assert r2.drafts == 10 and r2.accept_length == pytest.approx(2.5)


def test_vllm_08_total_names_and_old_kv_gauge():
    """0.8.x V1 registered `vllm:spec_decode_num_draft_tokens_total` itself (no drafts counter) and
    exported gpu_cache_usage_perc (serving-formats 2.6)."""
    page = (
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
        'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 200.0\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
        'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 150.0\n'
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
    )
    r = compute_rates(None, parse_metrics(page))
    assert r.accept_rate == pytest.approx(0.75) and r.accept_length is None and r.kv_usage == 0.5


def test_sglang_gauges_and_generation_counter():
    a = parse_metrics(sglang_page(2.5, 0.62, 1000, tp_ranks=2), t=0.0)
    b = parse_metrics(sglang_page(2.7, 0.66, 1300, tp_ranks=2), t=3.0)
    assert a.engine == "sglang"
    r = compute_rates(a, b)
    # TP replicas are not double counted
    assert (r.accept_length, r.accept_rate, r.running, r.queued, r.kv_usage) == (2.7, 0.66, 3.0, 1.0, 0.42)
    assert r.gen_throughput == pytest.approx(100.0)
    assert r.sources["accept_length"] == "sglang:spec_accept_length (gauge)"
    # one scrape: the gauge, not a rate
    assert compute_rates(None, b).gen_throughput == 77.5


def test_sglang_without_speculation_reports_no_accept_length():
    r = compute_rates(None, parse_metrics(sglang_page(0.0, 0.0, 10)))
    assert r.accept_length is None and r.accept_rate is None and r.running == 3.0


def test_window_means_sglang_gauges_after_the_first_scrape():
    snaps = [
        parse_metrics(sglang_page(1.5, 0.2, 0), t=0.0),  # before the run: the warmup's value
        parse_metrics(sglang_page(2.0, 0.5, 100), t=1.0),
        parse_metrics(sglang_page(3.0, 0.7, 300), t=2.0),
    ]
    prom = summarize_window(snaps)
    assert prom.status == "ok" and prom.scrapes == 3
    assert prom.rates.accept_length == pytest.approx(2.5) and prom.rates.accept_rate == pytest.approx(0.6)
    assert prom.rates.gen_throughput == pytest.approx(150.0)
    assert "mean of 2 scrapes" in prom.rates.sources["accept_length"]
    assert window_rates(None, snaps[0]) is None


def test_window_off_and_too_short():
    off = summarize_window([], "off", off_message("sglang"))
    assert off.status == "off" and "--enable-metrics" in off.message and off.rates is None
    short = summarize_window([PromSnapshot(t=0.0)])
    assert short.status == "error" and "fewer than two" in short.message


def test_malformed_page_keeps_what_was_parsed():
    page = sglang_page(2.0, 0.5, 10) + "this is not a metric line\n"
    snap = parse_metrics(page)
    assert snap.error and "malformed" in snap.error
    assert snap.values["sglang:spec_accept_length"] == 2.0


def test_off_messages_say_how_to_turn_metrics_on():
    assert "add --enable-metrics" in off_message("sglang")
    assert "always" in off_message("vllm")
    assert "--enable-metrics" in off_message(None)
