"""`history` over a large journal reads it one line at a time (issue 40).

The old reader took the whole file (read_bytes, then split: twice its size) and validated every
record into a model, whatever the verb asked for: a 1 GB journal took 183 s and 10.6 GB.  Here a
~60 MB journal of launch records with drift snapshots and three benchmark results: `history`
must list the three results with its peak memory well under the file's size (a structural bound:
the file is never held whole).  The 1 GB figure: tests/perf/bench_journal_1gb.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.reliability.bigjournal import write_big_journal
from tests.security.cli_run import run_cli

SIZE = 60 << 20


def test_history_over_a_large_journal_holds_less_than_the_file(tmp_path: Path) -> None:
    session = tmp_path / "sess"
    size = write_big_journal(session, SIZE)
    baseline = run_cli("history", "--session", str(tmp_path / "empty"), "--json", timeout=120).peak_rss_mb
    t0 = time.monotonic()
    res = run_cli("history", "--session", str(session), "--json", timeout=300)
    took = time.monotonic() - t0
    grown = res.peak_rss_mb - baseline
    print(
        f"history over {size / 2**20:.0f} MiB: {took:.1f} s, peak RSS {res.peak_rss_mb:.0f} MiB (+{grown:.0f})"
    )
    assert res.rc == 0, res.err
    assert [r["output_tok_s"] for r in json.loads(res.out)["results"]] == [80.0, 81.0, 82.0]
    assert grown < size / 2**20 / 2, f"history grew {grown:.0f} MiB over a {size / 2**20:.0f} MiB journal"


def test_a_line_longer_than_a_record_can_be_is_passed_over_not_held(tmp_path: Path) -> None:
    import resource

    from specdebug.core.journal import RECORD_LINE_MAX, Journal

    session = tmp_path / "sess"
    write_big_journal(session, 0, results=1)
    with open(session / "events.jsonl", "ab") as fh:
        fh.write(b'{"kind": "mark", "label": "' + b"x" * (3 * RECORD_LINE_MAX) + b'"}\n')
    write_big_journal(tmp_path / "tail", 0, results=1)
    with open(session / "events.jsonl", "ab") as fh:
        fh.write((tmp_path / "tail" / "events.jsonl").read_bytes().splitlines(keepends=True)[0])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    journal = Journal(session)
    got = journal.records({"bench_result", "mark"})
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert [r.kind for r in got] == ["bench_result", "bench_result"]
    assert any(f"over {RECORD_LINE_MAX} bytes, not read (skipped)" in s for s in journal.skipped), (
        journal.skipped
    )
    assert grown_mib < 2 * RECORD_LINE_MAX / 2**20, f"peak RSS grew {grown_mib:.0f} MiB"
