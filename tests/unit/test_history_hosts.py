"""Plain `history` shows every host's latest session, labelled by host; `--host H` reads H's session
(a local one too) or only H's rows of a named session (issue 41: after a verb touched another host,
plain `history` showed that host's empty session, and `--host` refused every local session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.cli import main
from specdebug.core.control.records import ServerRecord
from specdebug.core.journal import Journal, latest_by_host, sessions_root
from specdebug.core.records import BenchResultRecord, LaunchRecord
from tests.unit.test_bench_report import result
from tests.unit.test_session_per_target import bench_into, data_home  # noqa: F401 (a fixture)


def launch_into(session: Path, host: str) -> None:
    """What `launch HOST` leaves in a fresh session of its own: a launch record, no result."""
    rec = ServerRecord(profile="p", host=host, pid=2, pgid=2, port=1, log_file="/l")
    Journal(session).append(LaunchRecord(server=rec))


@pytest.fixture
def two_hosts(data_home: Path) -> tuple[Path, Path]:  # noqa: F811
    gpubox = sessions_root() / "20260101-100000"
    bench_into(gpubox, "gpubox", 89.1, name="baseline")
    bench_into(gpubox, "gpubox", 93.9, name="eagle3")
    other = sessions_root() / "20260101-110000"  # later: a launch on another host, no result
    launch_into(other, "otherbox")
    return gpubox, other


def test_plain_history_shows_every_hosts_latest_session(two_hosts, capsys) -> None:
    gpubox, other = two_hosts
    assert [label for label, _ in latest_by_host()] == ["gpubox", "otherbox"]
    assert main(["history"]) == 0
    text = capsys.readouterr().out
    assert "== gpubox ==" in text and "== otherbox ==" in text
    assert f"session {gpubox}: 2 result(s)" in text and "89.1" in text and "93.9" in text
    assert f"session {other}: 0 result(s)" in text
    assert main(["history", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(s["host"], len(s["results"])) for s in doc["sessions"]] == [("gpubox", 2), ("otherbox", 0)]
    # comparing needs one session: said, with how to name it
    assert main(["history", "--compare", "1", "2"]) == 2
    assert "--host HOST or --session DIR" in capsys.readouterr().err


def test_host_reads_that_hosts_local_session_and_filters_a_named_one(two_hosts, data_home, capsys) -> None:  # noqa: F811
    gpubox, _ = two_hosts
    assert main(["history", "--host", "gpubox", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["session"] == str(gpubox) and [r["profile"] for r in doc["results"]] == ["baseline", "eagle3"]
    assert main(["history", "--host", "gpubox", "--compare", "1", "2"]) == 0
    assert "from #1 baseline -> to #2 eagle3" in capsys.readouterr().out
    assert main(["history", "--host", "nobox"]) == 2
    assert "no session of nobox yet" in capsys.readouterr().err
    joined = data_home / "joined"
    bench_into(joined, "gpubox", 88.0, name="a")
    bench_into(joined, "t3box", 82.0, name="b")
    assert main(["history", "--session", str(joined), "--host", "t3box", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["host"]) for r in doc["results"]] == [(2, "t3box")]  # the session's own ids
    # report and mark take --host for a local session too
    assert main(["report", "--host", "gpubox"]) == 0
    assert "eagle3" in capsys.readouterr().out
    assert main(["mark", "NCCL_PROTO=LL", "--host", "gpubox"]) == 0
    assert f"marked {gpubox}" in capsys.readouterr().out


def test_one_session_alone_reads_as_before(data_home, capsys) -> None:  # noqa: F811
    only = sessions_root() / "20260101-100000"
    Journal(only).append(
        BenchResultRecord(result=result("baseline", 89.1, "2", {}).model_copy(update={"host": "b"}))
    )
    assert main(["history", "--json"]) == 0
    assert [r["profile"] for r in json.loads(capsys.readouterr().out)["results"]] == ["baseline"]
