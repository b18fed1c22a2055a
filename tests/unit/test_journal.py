"""Journal: append/read round trip, kind filter, torn last line, default dir naming."""

from __future__ import annotations

import json
from pathlib import Path

from specdebug.core import journal as journal_mod
from specdebug.core.bench.models import BenchResult
from specdebug.core.control.records import ServerRecord
from specdebug.core.journal import Journal
from specdebug.core.records import BenchResultRecord, LaunchRecord, MarkRecord, OtherRecord


def test_append_and_read_back(tmp_path: Path) -> None:
    j = Journal(tmp_path / "s1")
    ev = j.append(OtherRecord(kind="note", text="hello"))
    j.append(BenchResultRecord(result=BenchResult(output_tok_s=89.1, label=str(tmp_path))), sync=True)
    assert ev.kind == "note" and isinstance(ev.ts, float)
    events = j.events()
    assert [e["kind"] for e in events] == ["note", "bench_result"]
    assert events[0]["text"] == "hello" and events[1]["label"] == str(tmp_path)
    assert [e["kind"] for e in j.events({"bench_result"})] == ["bench_result"]
    (read,) = j.records({"bench_result"})
    assert isinstance(read, BenchResultRecord) and read.result.output_tok_s == 89.1
    lines = (tmp_path / "s1" / "events.jsonl").read_text().splitlines()
    assert all(json.loads(x) for x in lines) and len(lines) == 2


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert Journal(tmp_path / "nope").events() == []


def test_torn_last_line_is_skipped_and_next_append_starts_fresh(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.append(MarkRecord(label="a"))
    with open(j.path, "ab") as f:
        f.write(b'{"kind": "bench_result", "output_tok')  # writer killed mid-line
    assert [e["label"] for e in j.events()] == ["a"]
    j.append(MarkRecord(label="b"))
    assert [e["label"] for e in j.events()] == ["a", "b"]


def test_reopen_sees_history(tmp_path: Path) -> None:
    server = ServerRecord(profile="base", pid=100, pgid=100, port=30000, log_file="/l")
    Journal(tmp_path).append(LaunchRecord(server=server))
    assert Journal(tmp_path).events()[0]["profile"] == "base"
    (read,) = Journal(tmp_path).records()
    assert isinstance(read, LaunchRecord) and read.server == server


def test_default_dir_under_user_data(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(journal_mod, "sessions_root", lambda: tmp_path / "sessions")
    d1 = Journal.default_dir()
    assert d1.parent == tmp_path / "sessions"
    Journal(d1).append(OtherRecord(kind="note"))
    d2 = Journal.default_dir()
    assert d2 != d1 or not d1.exists()
    assert Journal.latest_dir() is not None


def test_non_json_values_are_encoded(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.append(OtherRecord(kind="note", tags={"x"}, pair=(1, 2)))
    e = j.events()[0]
    assert e["tags"] == ["x"] and e["pair"] == [1, 2]
