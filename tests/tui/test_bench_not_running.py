"""The Bench pane on a profile whose server is not running: one line saying what to do, not the
HTTP client's error (issue 26: `RemoteProtocolError` after `b`)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.bench import BenchPane
from tests.ports import free_port
from tests.tui.pilotwait import toasts, until
from tests.tui.test_bench_pane import LocalConnection
from tests.unit.test_bench_runner import make_profile


async def test_run_on_a_stopped_server_says_press_2_then_l(tmp_path: Path) -> None:
    profile = make_profile(free_port(), tmp_path / "server.log")  # "base", nothing on its port
    remote = LocalConnection()
    remote.state_dir = str(tmp_path / "servers")  # no record: never launched here
    ctx = AppContext(remotes={"local": remote}, selected="local", profile=profile)
    app = SpecdebugApp(ctx, panes=[BenchPane])
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BenchPane)
        app.query_one("#bench-table", DataTable).focus()
        await pilot.press("b")
        await until(pilot, lambda: pane.progress is None, 30)
        messages = toasts(app)
        assert any("base is not running: press 2, then l" in m for m in messages), messages
        assert not any("RemoteProtocolError" in m or "ConnectError" in m for m in messages), messages
