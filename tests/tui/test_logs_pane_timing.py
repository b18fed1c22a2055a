"""The Logs pane shows the verify time a user-instrumentation line prints (issue 38): the same 17.2 ms
that bench, the verify gate and `spec` read from it (tests/unit/test_one_reader.py).  Before, only
core.bench.serverlog's own regex read the line; the pane's packs did not, and the pane showed nothing."""

from __future__ import annotations

import pytest

from specdebug.tui.panes.logs import LogsPane
from specdebug.tui.widgets.metrics_panel import MetricsPanel
from tests.tui.test_logs_pane import LINES, LogsApp

VERIFY = (
    "[2026-01-15 12:00:50 TP0] [EAGLE3 profile] step=10 draft: 4.00 ms, Target verify: 17.20 ms, accept: 3"
)


async def test_the_logs_pane_reads_the_verify_line() -> None:
    app = LogsApp(lines=[*LINES[:-2], VERIFY, VERIFY.replace("step=10", "step=20")])
    async with app.run_test(size=(150, 40)):
        pane = app.query_one(LogsPane)
        summ = pane.analyzer.store.summary()
        assert summ["verify_ms"]["n"] == 2 and summ["verify_ms"]["mean"] == pytest.approx(17.2)
        assert summ["draft_ms"]["mean"] == pytest.approx(4.0)
        assert "verify_ms" in pane.query_one(MetricsPanel).rows
