"""`report` over a large journal folds it one record at a time (issue 40).

`report` read every record of the journal into a list of models before writing a line (launch
records with their drift snapshots included), so its memory was several times the file's.  Now it
folds the records as they are read and keeps only what the report shows (results, marks,
bisections, one summary line per other event).  A ~60 MB journal of launch records with drift
snapshots and three benchmark results: the report must show the three results, and its peak memory
stay well under the file's size.  The 1 GB figure: tests/perf/bench_journal_1gb.py.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.reliability.bigjournal import write_big_journal
from tests.security.cli_run import run_cli

SIZE = 60 << 20


def test_report_over_a_large_journal_holds_less_than_the_file(tmp_path: Path) -> None:
    session = tmp_path / "sess"
    size = write_big_journal(session, SIZE)
    baseline = run_cli("report", "--session", str(tmp_path / "empty"), timeout=120).peak_rss_mb
    t0 = time.monotonic()
    res = run_cli("report", "--session", str(session), timeout=300)
    took = time.monotonic() - t0
    grown = res.peak_rss_mb - baseline
    print(
        f"report over {size / 2**20:.0f} MiB: {took:.1f} s, peak RSS {res.peak_rss_mb:.0f} MiB (+{grown:.0f})"
    )
    assert res.rc == 0, res.err
    rows = [ln for ln in res.out.splitlines() if ln.startswith("| ") and "| big |" in ln]
    assert len(rows) == 3, res.out[:3000]
    assert "- events: " in res.out and "**launch**" in res.out
    assert grown < size / 2**20 / 2, f"report grew {grown:.0f} MiB over a {size / 2**20:.0f} MiB journal"


def test_the_notes_of_a_journal_of_many_events_keep_its_start_and_end(tmp_path: Path) -> None:
    from specdebug.core.journal import Journal
    from specdebug.core.records import MarkRecord
    from specdebug.core.report import NOTES_HEAD, NOTES_TAIL, session_markdown

    journal = Journal(tmp_path / "many")
    extra = 7
    for i in range(NOTES_HEAD + NOTES_TAIL + extra):
        journal.append(MarkRecord(label=f"m{i}"))
    text = session_markdown(journal.iter_records(), "many")
    rows = [ln for ln in text.splitlines() if ln.startswith("- ") and "**mark**" in ln]
    assert len(rows) == NOTES_HEAD + NOTES_TAIL
    assert rows[0].endswith("m0") and rows[-1].endswith(f"m{NOTES_HEAD + NOTES_TAIL + extra - 1}")
    assert f"- ... {extra} more events between these" in text
    assert f"- events: {NOTES_HEAD + NOTES_TAIL + extra}," in text
