"""bench: every server-side figure says what it is and over which window (issue 37).

Seen on real vLLM 0.32: `server: ... gen 14.6 tok/s (1 log samples)` beside a client decode rate of
1040 tok/s, nothing saying that the first is the whole server's generation tok/s averaged over vLLM's
10 s stats interval (which only partly overlapped a short run).  The log line below is that real
shape (v1/metrics/loggers.py LoggingStatLogger on the CPU build: "CPU KV cache usage").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bench.models import BenchResult
from specdebug.core.bench.prom import fill_server
from specdebug.core.bench.serverlog import server_metrics
from specdebug.core.metrics import summarize_window
from specdebug.core.promparse import parse_metrics
from specdebug.verbs.bench import summary

PAGE = (Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-0.32-tp2-ngram.txt").read_text()
HEAD = "(APIServer pid=4242) INFO 12-06 05:01:13 "
STATS = (
    f"{HEAD}[loggers.py:335] Engine 000: Avg prompt throughput: 12.8 tokens/s, Avg generation throughput: "
    "14.6 tokens/s, Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%\n"
)
SPEC = (
    f"{HEAD}[metrics.py:101] SpecDecoding metrics: Mean acceptance length: 3.88, Accepted throughput: 10.75 "
    "tokens/s, Drafted throughput: 11.10 tokens/s, Accepted: 108 tokens, Drafted: 111 tokens, Per-position "
    "acceptance rate: 0.973, 0.973, 0.973, Avg Draft acceptance rate: 97.3%\n"
)
INTERVAL = "vLLM's stats interval (VLLM_LOG_STATS_INTERVAL, 10 s by default)"


def _later(page: str, generated: float, drafts: float, accepted: float) -> str:
    """The same page after the server generated more tokens (counters moved)."""
    lab = '{engine="0",model_name="/tmp/tiny-llama"}'
    for name, old, new in (
        ("vllm:generation_tokens_total", 3879.0, generated),
        ("vllm:spec_decode_num_drafts_total", 1000.0, drafts),
        ("vllm:spec_decode_num_accepted_tokens_total", 2879.0, accepted),
    ):
        page = page.replace(f"{name}{lab} {old}", f"{name}{lab} {new}")
    return page


def test_log_figures_say_whole_server_and_their_interval():
    server, _ = server_metrics((STATS + SPEC).encode(), {}, "vllm")
    assert server.gen_throughput == 14.6 and server.accept_len == 3.88
    assert server.what["gen_throughput"] == (
        "the whole server's generated tokens/s (all streams together, not one stream's decode rate): "
        f"mean of 1 log line, each over {INTERVAL}, which may only partly overlap the run"
    )
    assert INTERVAL in server.what["accept_len"] and "verify_ms" not in server.what


def test_metrics_counters_over_the_bench_window_win_over_the_log_interval():
    """With /metrics, generation tok/s is the counter's over the bench's own window, named so."""
    server, _ = server_metrics((STATS + SPEC).encode(), {}, "vllm")
    snaps = [parse_metrics(PAGE, t=10.0), parse_metrics(_later(PAGE, 3879.0 + 1200, 1300.0, 3779.0), t=14.0)]
    res = BenchResult(decode_tok_s=1040.0, server=server, server_prom=summarize_window(snaps))
    fill_server(res)
    assert res.server is not None
    assert (
        res.server.gen_throughput == pytest.approx(300.0)
        and res.server.sources["gen_throughput"] == "/metrics"
    )
    assert res.server.what["gen_throughput"] == (
        "the whole server's generated tokens/s (all streams together, not one stream's decode rate): "
        "vllm:generation_tokens_total over the bench's /metrics window (4.0 s, 2 scrapes, first to last)"
    )
    assert res.server.accept_len == 3.88 and INTERVAL in res.server.what["accept_len"]  # the log's, kept


def test_summary_names_each_server_figure_and_keeps_it_apart_from_the_client():
    server, _ = server_metrics((STATS + SPEC).encode(), {}, "vllm")
    res = BenchResult(
        status="done", kind="builtin", decode_tok_s=1040.0, successful_requests=4, server=server
    )
    text = summary(res)
    assert "log samples" not in text and "gen 14.6" not in text
    assert "  server's own figures (the whole server, not this client's streams):" in text
    assert (
        "    generation 14.6 tok/s: the whole server's generated tokens/s (all streams together, not one "
        f"stream's decode rate): mean of 1 log line, each over {INTERVAL}, which may only partly overlap the run"
    ) in text
    assert "verify" not in text.split("server's own figures")[1]  # absent: left out, not "?"
