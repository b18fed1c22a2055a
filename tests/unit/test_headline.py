"""One headline per config (issue 21 section 3): the same named figure, unit and settings in `bench --json`,
`bench --parse`, history, the report and the Bench pane; comparisons of unlike benchmarks say so.

The 2-step config of the issue: the built-in client measured decode 93.95 / output 91.4 tok/s; the
sglang.bench_serving fixture (real output, tests/fixtures/bench/real-clients) printed output 91.99 and
TPOT 10.62 ms.  Before, the first read 93.95, the second 91.99: two figures for one config.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.cli import main
from specdebug.core.bench.headline import DECODE, OUTPUT, headline_of, headline_text, settings_differ
from specdebug.core.bench.models import BenchConfig, BenchResult
from specdebug.core.journal import Journal
from specdebug.core.records import BenchResultRecord
from specdebug.core.report import history, render_markdown
from specdebug.tui.panes.bench_view import chart

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "real-clients"


def builtin(requests: int = 8) -> BenchResult:
    return BenchResult(
        profile="eagle3-2step",
        config=BenchConfig(requests=requests, concurrency=1, input_len=512, output_len=256),
        decode_tok_s=93.95,
        output_tok_s=91.4,
        successful_requests=requests,
    )


def test_single_stream_headline_is_the_decode_rate_everywhere(tmp_path: Path, capsys):
    b = builtin()
    h = headline_of(b)
    assert (h.metric, h.label, h.value, h.unit) == (DECODE, "decode rate", 93.95, "tok/s")
    assert b.headline() == 93.95 and h.settings.concurrency == 1 and h.settings.requests == 8

    # bench --parse of the real sglang.bench_serving output: the same figure, named the same way
    session = tmp_path / "sess"
    assert main(["bench", "--parse", str(FIX / "sglang-bench-serving-sgl-native.txt"), "--json",
                 "--session", str(session)]) == 0  # fmt: skip
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["headline"]["metric"] == DECODE and parsed["headline"]["unit"] == "tok/s"
    assert parsed["headline"]["value"] == pytest.approx(1000 / 10.62)  # not the 91.99 output throughput
    assert parsed["headline"]["settings"]["concurrency"] == 1
    assert abs(parsed["headline"]["value"] - h.value) / h.value < 0.007  # the two clients agree

    # history: the journal's copy shows the same headline, in JSON and in the text row
    Journal(session).append(BenchResultRecord(result=b), sync=True)
    assert main(["history", "--session", str(session), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert [r["headline"]["metric"] for r in rows] == [DECODE, DECODE]
    assert rows[1]["headline"]["value"] == 93.95
    assert main(["history", "--session", str(session)]) == 0
    text = capsys.readouterr().out
    assert (
        "94.0 tok/s decode rate" in text
        or "93.95 tok/s decode rate" in text
        or "93.9 tok/s decode rate" in text
    )

    # the Bench pane's chart and notice use the same value and name
    entries = history(Journal(session).records())
    assert [e.result.headline() for e in entries] == [parsed["headline"]["value"], 93.95]
    assert "94.0" in chart(entries).plain
    assert (
        headline_text(b)
        == "94.0 tok/s decode rate (builtin, concurrency 1, 8 requests, in 512 / out 256 tokens)"
    )


def test_concurrent_runs_headline_output_throughput():
    r = builtin()
    r.config.concurrency = 8
    h = headline_of(r)
    assert (h.metric, h.value, h.label) == (OUTPUT, 91.4, "output throughput")


def test_unlike_benchmarks_are_named_in_comparisons(tmp_path: Path, capsys):
    """The Bisect pane's 80.7 came from shorter benchmarks: a comparison says how they differ."""
    long, short = builtin(8), builtin(2)
    short.decode_tok_s = 80.7
    assert settings_differ(headline_of(long), headline_of(short)) == ["requests: 8 -> 2"]
    assert settings_differ(headline_of(long), headline_of(builtin(8))) == []
    j = Journal(tmp_path / "s")
    for r in (long, short):
        j.append(BenchResultRecord(result=r), sync=True)
    assert main(["history", "--session", str(tmp_path / "s"), "--compare", "1", "2", "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    assert cmp["not_alike"] == ["requests: 8 -> 2"] and cmp["headline"]["to"]["value"] == 80.7
    assert main(["history", "--session", str(tmp_path / "s"), "--compare", "1", "2"]) == 0
    assert "not measured alike: requests: 8 -> 2" in capsys.readouterr().out
    md = render_markdown(j.records(), title="t")
    assert "1000 / TPOT mean" in md
