"""A bad journal record is skipped with a line saying which, never a traceback (issue 22).

A record with "ts": NaN (Python's json reads it) crashed `history` and `report`; a malformed
bisect_judgement crashed `bisect --resume` when the judgements were replayed.  The journal reader
checks every record (core.journal.record_problem) and says each one it skips.
"""

from __future__ import annotations

import json
from pathlib import Path

from specdebug.core.bench.models import BenchConfig, BenchResult
from specdebug.core.bisect.models import JUDGEMENT_EVENT, Judged
from specdebug.core.journal import Journal, record_problem
from tests.security.boxkit import run


def _journal(tmp_path: Path) -> Path:
    session = tmp_path / "session"
    session.mkdir()
    good = BenchResult(
        profile="ok", successful_requests=4, decode_tok_s=90.0, config=BenchConfig(concurrency=1)
    )
    lines = [
        json.dumps({**good.model_dump(mode="json"), "ts": 1.0, "kind": "bench_result"}),
        json.dumps({**good.model_dump(mode="json"), "profile": "nan-ts", "kind": "bench_result"})[:-1]
        + ', "ts": NaN}',
        '{"kind": "mark", "ts": Infinity}',
        json.dumps(
            {"kind": JUDGEMENT_EVENT, "ts": 2.0, "bisect": "b1", "fingerprint": "f", "judged": "maybe"}
        ),
        json.dumps(
            {"kind": JUDGEMENT_EVENT, "ts": 3.0, "bisect": "b1", "fingerprint": ["f"], "judged": "good"}
        ),
        json.dumps({"kind": JUDGEMENT_EVENT, "ts": 4.0, "bisect": "b1", "fingerprint": "g", "judged": "bad"}),
        "{not json",
        json.dumps({**good.model_dump(mode="json"), "profile": "ok-2", "ts": 5.0, "kind": "bench_result"}),
    ]
    (session / "events.jsonl").write_text("\n".join(lines) + "\n")
    return session


def test_the_reader_skips_and_says_each_bad_record(tmp_path: Path) -> None:
    journal = Journal(_journal(tmp_path))
    events = journal.events()
    assert [e.get("profile") or e.get("fingerprint") for e in events] == ["ok", "g", "ok-2"]
    said = "\n".join(journal.skipped)
    assert "line 2: bench_result record: ts is NaN, not a time (skipped)" in said
    assert "line 3: mark record: ts is Infinity, not a time" in said
    assert 'line 4: bisect_judgement record: judged is "maybe", not one of good, bad, skip, unclear' in said
    assert 'line 5: bisect_judgement record: fingerprint is ["f"], not a str' in said
    assert "line 7: not a JSON record" in said
    # what --resume replays: every judgement left is one Judged can read
    assert [Judged(e["judged"]) for e in events if e["kind"] == JUDGEMENT_EVENT] == [Judged.BAD]
    assert record_problem({"kind": "note", "ts": True}) is not None


def test_history_and_report_skip_with_a_line(sshd, tmp_path: Path) -> None:
    session = _journal(tmp_path)
    for verb in ("history", "report"):
        res = run(sshd, verb, "--session", str(session))
        assert res.returncode == 0, res.stderr
        assert b"Traceback" not in res.stderr
        assert b"line 2: bench_result record: ts is NaN, not a time (skipped)" in res.stderr, res.stderr
        assert b"ok-2" in res.stdout and b"nan-ts" not in res.stdout
