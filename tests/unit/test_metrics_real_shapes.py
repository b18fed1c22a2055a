"""/metrics of real vLLM: DP ranks from the `engine` label, acceptance since start on an idle window.

The pages in tests/fixtures/metrics/ were rendered by vLLM 0.32.0's own PrometheusStatLogger
(tests/fixtures/metrics/render_vllm.py): the real metric names and label sets, with several series per
metric and engine (`finished_reason` x5, waiting `reason` x2, `sleep_state` x3, `source`, `position`).
Read as series counts, a TP-2 server without DP was `dp_ranks: 5` (issue 37).  The sim's vLLM mode
must show the same label sets, so the integration tests run against real shapes.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from specdebug.core.acceptance import acceptance, no_acceptance_reason
from specdebug.core.metrics import MetricsEvent, compute_rates
from specdebug.core.promparse import parse_metrics
from specdebug.sim.server.common.costmodel import SpecConfig
from specdebug.sim.server.vllm.engine import VllmEngine, render_vllm_metrics
from specdebug.verbs.metrics import _result, format_acceptance

PAGES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


def page(name: str) -> str:
    return (PAGES / name).read_text()


def label_sets(text: str) -> dict[str, set[frozenset[str]]]:
    """Metric sample name -> the label-name sets its series carry."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, set[frozenset[str]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, set()).add(frozenset(s.labels))
    return out


def test_tp2_without_dp_is_one_rank_although_metrics_have_several_series():
    text = page("vllm-0.32-tp2-ngram.txt")
    assert text.count("vllm:request_success_total{") == 5  # the real shape the old count read as 5 ranks
    snap = parse_metrics(text)
    assert snap.engine == "vllm" and snap.error is None and snap.dp_ranks == 1
    r = compute_rates(None, snap)
    assert r.dp_ranks == 1 and r.drafts == 1000 and r.accept_length == pytest.approx(3.879)
    assert r.per_position == pytest.approx([0.970, 0.970, 0.939])
    assert snap.values["vllm:request_success_total"] == 8  # reasons summed: every finished request once


def test_dp_ranks_are_the_engine_label_values():
    snap = parse_metrics(page("vllm-0.32-dp2-ngram.txt"))
    assert snap.dp_ranks == 2
    r = compute_rates(None, snap)
    assert r.drafts == 2000 and r.accept_length == pytest.approx(3.879)  # both engines summed
    assert r.per_position == pytest.approx([0.970, 0.970, 0.939])


def test_idle_window_shows_acceptance_since_start_with_its_source():
    """No drafts between two scrapes: acceptance comes from the counters since start, named so, in JSON
    (a new `acceptance` key beside the existing ones) and in text."""
    text = page("vllm-0.32-tp2-ngram.txt")
    before, after = parse_metrics(text, t=0.0), parse_metrics(text, t=2.0)
    window, since = compute_rates(before, after), compute_rates(None, after)
    assert window.accept_length is None and window.per_position == []  # nothing over the window
    acc = acceptance(window, since)
    assert acc is not None and acc.basis == "since_start"
    assert acc.source == "since server start (counters); no drafts over the 2.0 s window"
    assert acc.accept_length == pytest.approx(3.879) and acc.per_position == pytest.approx(
        [0.97, 0.97, 0.939]
    )
    assert "num_accepted_tokens_per_pos" in acc.metrics["per_position"]
    data = _result(MetricsEvent(kind="sample", t=2.0, rates=window, since_start=since), "box", 8000)
    assert {"status", "host", "port", "t", "engine", "rates", "findings"} <= set(data)  # kept
    assert data["acceptance"]["basis"] == "since_start" and data["acceptance"]["accept_length"] == 3.879
    lines = format_acceptance(acc, None, window.window_s)
    assert lines[0] == "  acceptance, since server start (counters); no drafts over the 2.0 s window:"
    assert any("0.970, 0.970, 0.939" in ln for ln in lines)


def test_busy_window_keeps_the_window_and_a_fresh_server_says_why_none():
    text = page("vllm-0.32-tp2-ngram.txt")
    later = text.replace(
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="/tmp/tiny-llama"} 1000.0',
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="/tmp/tiny-llama"} 1100.0',
    ).replace(
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="/tmp/tiny-llama"} 2879.0',
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="/tmp/tiny-llama"} 3079.0',
    )
    window = compute_rates(parse_metrics(text, t=0.0), parse_metrics(later, t=1.0))
    acc = acceptance(window, compute_rates(None, parse_metrics(later, t=1.0)))
    assert acc is not None and acc.basis == "window" and acc.accept_length == pytest.approx(3.0)
    assert acc.source == "over the 1.0 s window (counters)"
    fresh = parse_metrics(page("vllm-0.32-tp2-fresh.txt"), t=1.0)
    idle = compute_rates(fresh, fresh.model_copy(update={"t": 2.0}))
    assert acceptance(idle, compute_rates(None, fresh)) is None
    assert no_acceptance_reason(idle, compute_rates(None, fresh)) == (
        "no drafts since the server started: nothing to measure acceptance on yet"
    )


def _sim_page(version: str) -> str:
    e = VllmEngine(SpecConfig(algorithm="NGRAM", num_steps=3, topk=1, num_draft_tokens=4), log=lambda m: None,
                   seed=0, max_total_tokens=10000, max_running=8, cuda_graph=False, server_version=version)  # fmt: skip
    rng = random.Random(2)
    e._on_step([rng.randint(1, 4) for _ in range(50)])
    return render_vllm_metrics(e, "/tmp/tiny-llama", 1.7e9)


def test_sim_vllm_page_has_the_real_label_sets():
    """Every series the sim exports carries the label names real vLLM gives that metric."""
    real, sim = label_sets(page("vllm-0.32-tp2-ngram.txt")), label_sets(_sim_page("0.33.0"))
    for name, sets in sim.items():
        assert name in real, name
        assert sets <= real[name], (name, sets, real[name])
    for name in (
        "vllm:request_success_total",
        "vllm:num_requests_waiting_by_reason",
        "vllm:engine_sleep_state",
    ):
        assert sim[name] == real[name]
    assert _sim_page("0.33.0").count("vllm:request_success_total{") == 5
    snap = parse_metrics(_sim_page("0.33.0"))
    assert snap.dp_ranks == 1 and snap.engine == "vllm"
