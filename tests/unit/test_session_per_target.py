"""Demo and real-box results shared one session (issue 26): a session is per target unless the user
joins them, and a comparison across hosts says so (history, report, the compare panel's diff)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.cli import main
from specdebug.core.journal import Journal, resolve_session, sessions_root
from specdebug.core.records import BenchResultRecord
from specdebug.core.report import config_diff, render_markdown
from tests.unit.test_bench_report import result


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("SPECDEBUG_SESSION", raising=False)  # the suite's own default
    return tmp_path


def bench_into(session: Path, host: str, tok_s: float, name: str = "base") -> None:
    res = result(name, tok_s, "2", {}).model_copy(update={"host": host})
    Journal(session).append(BenchResultRecord(result=res))


def test_the_latest_session_is_the_latest_of_the_target(data_home: Path, monkeypatch) -> None:
    demo = sessions_root() / "20260101-100000"
    bench_into(demo, "simbox", 94.1)  # the demo ran last
    real = resolve_session(None, for_writing=True, target="t3box")
    assert real != demo and not real.exists()  # a new session, not the demo's
    bench_into(real, "t3box", 82.0)
    assert resolve_session(None, for_writing=True, target="t3box") == real
    demo_later = sessions_root() / "20991231-235959"  # a newer demo does not take the real box's place
    bench_into(demo_later, "simbox", 94.0)
    assert resolve_session(None, for_writing=True, target="t3box") == real
    assert resolve_session(None, for_writing=True, target="simbox") == demo_later
    assert resolve_session(None, for_writing=False) == demo_later  # a reader: the latest of any
    # the user joins hosts on purpose by naming the session
    assert resolve_session(str(demo), for_writing=True, target="t3box") == demo
    monkeypatch.setenv("SPECDEBUG_SESSION", str(demo))
    assert resolve_session(None, for_writing=True, target="t3box") == demo


def test_a_comparison_across_hosts_says_so(data_home: Path, capsys) -> None:
    joined = data_home / "joined"
    bench_into(joined, "simbox", 88.8)
    bench_into(joined, "t3box", 82.0, name="base")
    j = Journal(joined)
    a, b = [e for e in j.events() if e["kind"] == "bench_result"]
    from specdebug.core.bench.models import BenchResult

    ra = BenchResult.model_validate({k: v for k, v in a.items() if k not in ("ts", "kind")})
    rb = BenchResult.model_validate({k: v for k, v in b.items() if k not in ("ts", "kind")})
    assert config_diff(ra, rb)[0] == "host: 'simbox' -> 't3box' (a comparison across hosts)"
    assert config_diff(ra, ra) == []
    md = render_markdown(j.records())
    assert "- baseline: run #1 (base, on simbox)" in md
    assert "(other host: t3box)" in md
    assert "`host: 'simbox' -> 't3box' (a comparison across hosts)`" in md  # the config diff names it
    assert main(["history", "--session", str(joined)]) == 0
    text = capsys.readouterr().out
    assert "(on t3box, base on simbox)" in text
    assert main(["history", "--session", str(joined), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hosts"] == ["simbox", "t3box"]
    assert main(["history", "--session", str(joined), "--compare", "1", "2"]) == 0
    assert "host: 'simbox' -> 't3box'" in capsys.readouterr().out
