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


VLLM3 = ["vllm", "serve", "m", "--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 3}']


@pytest.mark.parametrize("busy", [None, 0.03, 0.6])
def test_a_fit_over_results_from_a_contended_cpu_says_so(busy: float | None) -> None:
    """Every client-timed figure of a contended run reads slow (the suite beside busy loops read a
    +36 % cycle as +8.5 %): the fit's verdict carries that, naming the results; quiet runs add nothing."""
    base = _entry(1, ["vllm", "serve", "m"], 89.0, None)
    two = _entry(2, VLLM2, 95.0, BURSTS)
    three = _entry(3, VLLM3, 60.0, [(33.0, 3)] * 40)
    base.result.client_cpu_wait, base.result.box_cpu_wait = busy, 0.01 if busy is not None else None
    _, configs = analyze([base, two, three], base)
    cm = configs[2]
    assert cm.fit_of == "cycle"
    said = [n for n in cm.notes if "contended CPU" in n]
    if busy is not None and busy >= 0.10:
        assert said == [
            "the fit's verdict rests on results measured on a contended CPU (#1 p1): a figure read off can"
            " hide an excess or make one; measure them again on a quiet machine"
        ]
        own = [n for n in configs[0].notes if "contended CPU" in n]
        assert own and "box 1%, client 60% of the run" in own[0], configs[0].notes
    else:
        assert said == [] and not any("contended" in n for c in configs for n in c.notes)
