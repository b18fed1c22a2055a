"""The Logs pane on a log bigger than it can read at once: it says how far behind it is, keeps its
view bounded, and counts every match (through the real on-box agent, run locally)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from specdebug.core.logs.viewbuffer import MAX_VIEW
from specdebug.tui.panes.logs import LogsPane, LogView
from specdebug.tui.widgets.logs_status import BEHIND_SHOWN
from tests.tui.test_logs_pane import LogsApp, decode
from tests.unit.test_log_follow_local import LocalRemote

pytestmark = pytest.mark.slow

LINES = 15_000  # about 3 MB: more than the pane parses in its first second, and over BEHIND_SHOWN
# (256 KB) behind for seconds; 40,000 lines (8 MB, 7 CPU-s) missed 12,737 matches at 200 s beside
# 8 busy loops: CPU the test needs, not a fault


async def test_a_big_log_says_behind_then_catches_up_with_every_match(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with open(log, "w") as f:
        for i in range(LINES):
            f.write(decode(i % 60, 2.0 + (i % 7) * 0.25, 100.0 + i % 50) + "\n")
    app = LogsApp(lines=[], remote=LocalRemote())
    async with app.run_test(size=(160, 30)) as pilot:
        pane = app.query_one(LogsPane)
        pane.start_follow(str(log))
        # a guard, not a speed claim: 7 s alone, 65 s inside the suite, over 120 s (the old guard) with
        # two busy loops beside the suite, where the pane still had every match coming
        said_behind, deadline = "", time.monotonic() + 200  # within pytest-timeout's 240 s
        while pane.matches < LINES and time.monotonic() < deadline:
            await pilot.pause(0.05)
            text = pane.status_text().plain
            if "behind (counts so far)" in text and not said_behind:
                said_behind = text
        assert pane.matches == LINES, f"{LINES - pane.matches} matches missing from the count"
        assert said_behind, "never said it was behind"
        assert pane.behind() == 0 or pane.behind() < BEHIND_SHOWN
        pane.flush()
        view = pane.query_one(LogView)
        assert len(view.entries) <= MAX_VIEW  # the view is a window; the count has every line
        assert pane.analyzer.store.summary()["accept_len"]["n"] == LINES
        assert "behind (counts" not in pane.status_text().plain
