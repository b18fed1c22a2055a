"""History, baseline, config diffs and the markdown report; `history`/`report`/`bench --parse` verbs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.cli import main
from specdebug.core.bench.models import BenchConfig, BenchResult, LatencyStats, ServerMetrics
from specdebug.core.control.records import ServerRecord
from specdebug.core.journal import Journal
from specdebug.core.records import BenchResultRecord, LaunchRecord, MarkRecord, OtherRecord
from specdebug.core.report import (
    baseline_event,
    baseline_of,
    config_diff,
    history,
    metric_diff,
    render_markdown,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
ARGV = [
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "m",
    "--port",
    "30000",
    "--speculative-num-steps",
]


def result(name: str, tok_s: float, steps: str, env: dict[str, str], **kw) -> BenchResult:
    return BenchResult(
        profile=name,
        fingerprint=f"fp-{name}",
        host="gpubox",
        started_at=1_700_000_000.0,
        argv=[*ARGV, steps],
        env=env,
        config=BenchConfig(concurrency=1, requests=4),
        decode_tok_s=tok_s,
        output_tok_s=tok_s * 0.98,
        request_throughput=0.3,
        ttft_ms=LatencyStats(p50=40.0, p90=45.0, p99=50.0, mean=41.0),
        itl_ms=LatencyStats(p50=11.0, p90=12.0, p99=30.0, mean=11.2),
        server=ServerMetrics(accept_len=2.5, verify_ms=19.0, gen_throughput=tok_s, samples=3),
        **kw,
    )


@pytest.fixture
def session(tmp_path: Path) -> Path:
    j = Journal(tmp_path / "sess")
    j.append(LaunchRecord(server=ServerRecord(profile="base", pid=100, pgid=100, port=30000, log_file="/l")))
    j.append(BenchResultRecord(result=result("base", 89.0, "1", {})), sync=True)
    j.append(OtherRecord(kind="note", text="now with NCCL env | 2 steps"))
    j.append(BenchResultRecord(result=result("two", 94.0, "2", {"NCCL_PROTO": "Simple"})), sync=True)
    three = result(
        "three", 60.0, "3", {"NCCL_PROTO": "Simple"}, warnings=["GPU 2 throttled after the run: hw_slowdown"]
    )
    j.append(BenchResultRecord(result=three), sync=True)
    j.append(MarkRecord(label="regression seen"))
    return j.session_dir


def test_history_and_baseline(session: Path) -> None:
    events = Journal(session).records()
    entries = history(events)
    assert [e.result.profile for e in entries] == ["base", "two", "three"]
    assert baseline_of(events, entries).id == 1
    Journal(session).append(baseline_event(entries[1].ts))
    events = Journal(session).records()
    assert baseline_of(events, history(events)).result.profile == "two"


def test_config_and_metric_diff() -> None:
    a = result("a", 94.0, "2", {"NCCL_PROTO": "Simple"})
    b = result("b", 60.0, "3", {}, server_version="0.5.9")
    lines = config_diff(a, b)
    assert "--speculative-num-steps: '2' -> '3'" in lines
    assert "env NCCL_PROTO: 'Simple' -> (absent)" in lines
    assert "server version: (absent) -> '0.5.9'" in lines
    assert not any("--port" in x for x in lines)
    rows = {name: (x, y, d) for name, x, y, d in metric_diff(a, b)}
    assert rows["tok/s"][2] == pytest.approx((60 - 94) / 94 * 100)


def test_markdown_report(session: Path) -> None:
    md = render_markdown(Journal(session).records(), title="t")
    assert md.startswith("# t\n")
    assert "| 1 |" in md and "| 3 |" in md and "`fp-two`" in md
    assert "+5.6%" in md and "-32.6%" in md
    assert "`--speculative-num-steps: '1' -> '2'`" in md and "`env NCCL_PROTO: (absent) -> 'Simple'`" in md
    assert "GPU 2 throttled" in md
    assert "now with NCCL env \\| 2 steps" in md and "regression seen" in md
    assert render_markdown([], title="empty").count("No benchmark results") == 1


def test_history_verb_json(session: Path, capsys) -> None:
    assert main(["history", "--session", str(session), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["profile"] for r in out["results"]] == ["base", "two", "three"]
    first = out["results"][0]
    assert first["fingerprint"] == "fp-base" and first["ttft_ms"]["p50"] == 40.0 and first["id"] == 1
    assert main(["history", "--session", str(session)]) == 0
    assert "three" in capsys.readouterr().out


def test_report_verb(session: Path, tmp_path: Path, capsys) -> None:
    assert main(["report", "--session", str(session)]) == 0
    assert "## Config changes between runs" in capsys.readouterr().out
    out = tmp_path / "r.md"
    assert main(["report", "--session", str(session), "-o", str(out)]) == 0
    assert out.read_text().startswith("# specdebug session sess")
    assert main(["report", "--session", str(tmp_path / "missing")]) == 2


def test_bench_parse_verb(capsys, tmp_path: Path) -> None:
    assert main(["bench", "--parse", str(FIX / "vllm_bench_serve_spec.txt"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["output_tok_s"] == 620.31 and data["successful_requests"] == 100
    assert data["accept_length"] == 3.14
    assert data["ttft_ms"] == {
        "mean": 121.55,
        "p50": 118.02,
        "p90": 180.4,
        "p95": None,
        "p99": 240.33,
        "max": None,
        "std": None,
        "extra": {},
    }
    assert data["tpot_ms"]["p99"] == 15.02 and data["e2e_ms"]["p90"] == 3502.88
    saved = tmp_path / "saved.jsonl"
    saved.write_text(json.dumps({"backend": "sglang", "output_throughput": 77.0, "completed": 2}) + "\n")
    assert main(["bench", "--parse", str(saved), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output_tok_s"] == 77.0
    noise = tmp_path / "noise.txt"
    noise.write_text("nothing\n")
    assert main(["bench", "--parse", str(noise)]) == 1
    assert main(["bench", "--parse", str(tmp_path / "absent.txt")]) == 2
    assert main(["bench", "--parse", str(FIX / "sglang_bench_serving.txt")]) == 0
    assert "89.3" in capsys.readouterr().out


def test_bench_usage_errors(capsys, tmp_path: Path) -> None:
    assert main(["bench"]) == 2
    assert main(["bench", "gpubox"]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n")
    assert main(["bench", "gpubox", "-c", str(bad)]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["bench", "gpubox", "-c", str(bad), "--requests", "0"])
    assert exc.value.code == 2


def test_headless_twins_of_compare_baseline_and_mark(session: Path, capsys) -> None:
    assert main(["history", "--session", str(session), "--compare", "1", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"] == 1 and out["b"] == 2 and out["config"]
    assert any(m["metric"] == "tok/s" and m["delta_pct"] is not None for m in out["metrics"])
    assert main(["history", "--session", str(session), "--baseline", "2"]) == 0
    assert main(["history", "--session", str(session), "--json"]) == 0
    capsys.readouterr()
    assert main(["history", "--session", str(session), "--compare", "1", "9"]) == 2
    assert main(["mark", "NCCL_PROTO=LL exported", "--session", str(session)]) == 0
    assert main(["report", "--session", str(session)]) == 0
    assert "NCCL_PROTO=LL exported" in capsys.readouterr().out
    events = Journal(session).events()
    assert [e for e in events if e["kind"] == "mark" and e.get("label") == "baseline"]
