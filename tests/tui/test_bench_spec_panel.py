"""Bench pane: `a` shows the highlighted run's speculation arithmetic (the TUI twin of `specdebug spec`),
and the compare panel says what changed on the box when the results carry drift snapshots."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.widgets import DataTable, Static

from specdebug.core.journal import Journal
from specdebug.core.records import BenchResultRecord
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.bench import BenchPane
from tests.tui.fakes import StillRemote
from tests.unit.test_spec_math import STORY


def text_of(widget: Static) -> str:
    console = Console(width=140, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def test_spec_panel_and_drift_in_compare(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "s")
    gpu = {"index": "3", "power.limit": "700.00"}
    for e in STORY:
        res = e.result
        if e.id >= 2:
            limit = "700.00" if e.id == 2 else "450.00"
            res = res.model_copy(update={"drift": {"packages": {}, "gpus": [{**gpu, "power.limit": limit}]}})
        journal.append(BenchResultRecord(result=res), sync=True)
    ctx = AppContext(remotes={"gpubox": StillRemote("gpubox")}, selected="gpubox", journal=journal)
    app = SpecdebugApp(ctx, panes=[BenchPane])
    async with app.run_test(size=(150, 40)) as pilot:
        table = app.query_one("#bench-table", DataTable)
        table.focus()
        await pilot.press("down", "down", "a")  # #3, the 3-step run
        panel = app.query_one("#bench-compare", Static)
        assert panel.has_class("-shown")
        shown = text_of(panel)
        assert "Speculation arithmetic #3 3step" in shown and "ABOVE THE FIT" in shown
        assert "likely cause: NCCL settings" in shown and "GPU 3 power limit 700 -> 450 W" in shown
        await pilot.press("escape", "up", "c", "down", "c")  # compare #2 with #3
        shown = text_of(panel)
        assert "box:" in shown and "GPU 3 power limit 700 -> 450 W" in shown
