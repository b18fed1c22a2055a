"""The speculation arithmetic where the engine logs no verify time (vLLM): the cycle is the stream's
median gap between bursts, recomputed with the config's tokens per cycle (merged steps drop out),
named as such in the verb's JSON and in the TUI panel; `--stream-interval` > 1 makes bursts no
cycles ("cannot tell"); accept length falls back to the stream's tokens per burst."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from specdebug.core.bench.bursts import cycle_stats
from specdebug.core.bench.models import BenchConfig, BenchResult
from specdebug.core.report import HistoryEntry
from specdebug.core.spec.analyze import analyze
from specdebug.tui.widgets.spec_panel import spec_renderable

VLLM2 = ["vllm", "serve", "m", "--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 2}']


def _entry(i: int, argv: list[str], tok_s: float, samples: list[tuple[float, int]] | None) -> HistoryEntry:
    res = BenchResult(
        profile=f"p{i}",
        fingerprint=f"fp{i}",
        argv=argv,
        config=BenchConfig(concurrency=1),
        decode_tok_s=tok_s,
        stream_cycles=cycle_stats(samples, requests=2, tokens_exact=True) if samples else None,
    )
    return HistoryEntry(id=i, ts=float(i), result=res)


# 3 tokens per cycle at most; 5 merged bursts (two steps in one chunk: 5-6 tokens, 40 ms)
BURSTS = [(20.0, 1), (20.0, 2), (20.0, 3), (20.0, 2)] * 10 + [(40.0, 5), (40.0, 6)] * 3


def test_the_cycle_comes_from_the_stream_without_merged_steps() -> None:
    base = _entry(1, ["vllm", "serve", "m"], 89.0, None)
    spec = _entry(2, VLLM2, 95.0, BURSTS)
    assert spec.result.stream_cycles is not None and spec.result.stream_cycles.p90_ms == 40.0
    _, configs = analyze([base, spec], base)
    cm = configs[1]
    assert cm.cycle_source == "stream" and cm.cycle_ms == pytest.approx(20.0)
    assert cm.point.stream is not None and cm.point.stream["left_out"] == 6
    assert cm.point.stream["p90_ms"] == pytest.approx(20.0)
    assert cm.point.accept_len == pytest.approx(2.0)  # tokens per burst: no log, no /metrics
    assert "stream bursts (mean tokens per burst)" in cm.point.sources["accept_len"]
    assert cm.predicted_tok_s == pytest.approx(100.0)
    assert cm.to_json()["cycle_source"] == "stream" and "samples" not in cm.to_json()["stream"]
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(spec_renderable([base, spec], base, spec))
    assert "cycle 20.00 ms from the stream" in console.export_text()


def test_a_stream_interval_makes_bursts_no_cycles() -> None:
    base = _entry(1, ["vllm", "serve", "m"], 89.0, None)
    held = _entry(2, [*VLLM2, "--stream-interval", "8"], 95.0, BURSTS)
    _, configs = analyze([base, held], base)
    cm = configs[1]
    assert cm.cycle_ms is None and cm.point.stream_cycle_ms is None
    assert any("--stream-interval 8" in n for n in cm.notes)
