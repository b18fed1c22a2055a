"""Hosts pane: a refresh that brings nothing new writes no cells; a change writes only its cells."""

from __future__ import annotations

from textual import events
from textual.widgets import DataTable

from specdebug.remote.api import ConnState, ConnStatus
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.hosts import HostsPane
from tests.tui.fakes import StillRemote, sample_host_info
from tests.tui.pilotwait import until_slept

HOSTS = [f"box{i:02d}" for i in range(16)]


async def test_unchanged_refresh_updates_no_cells_and_a_change_only_its_own() -> None:
    app = SpecdebugApp(AppContext(remotes={h: StillRemote(h) for h in HOSTS}, selected=HOSTS[0]))
    async with app.run_test(size=(140, 50)) as pilot:
        pane = app.query_one(HostsPane)
        up = ConnStatus(ConnState.CONNECTED, rtt_ms=0.5)
        for h in HOSTS:
            pane.show_info(sample_host_info(h), up)
        await pilot.pause()
        first = pane.cell_updates
        assert first > 0
        gpu_table = app.query_one("#gpu-table", DataTable)
        rows_before = list(gpu_table.rows)
        for h in HOSTS:  # the same facts again (what most refresh rounds bring)
            pane.show_info(sample_host_info(h), up)
        await pilot.pause()
        assert pane.cell_updates == first
        assert list(gpu_table.rows) == rows_before  # the GPU table was not redrawn either
        changed = sample_host_info(HOSTS[3])
        changed.load = [9.5, 1.0, 1.0]
        pane.show_info(changed, up)
        await pilot.pause()
        assert pane.cell_updates == first + 1
        table = app.query_one("#hosts-table", DataTable)
        assert str(table.get_cell(HOSTS[3], "load")).startswith("9.50")


async def test_down_then_enter_typed_at_once_selects_the_row_moved_to() -> None:
    """Enter is the hosts table's own key: pressed right behind an arrow (both queued before either
    is handled), it acts on the row the arrow moved to."""
    app = SpecdebugApp(AppContext(remotes={h: StillRemote(h) for h in HOSTS}, selected=HOSTS[0]))
    told: list[str] = []
    async with app.run_test(size=(140, 50)) as pilot:
        app.notify = lambda message, **_: told.append(message)  # type: ignore[method-assign]
        table = app.query_one("#hosts-table", DataTable)
        table.focus()
        table.move_cursor(row=0, animate=False)
        await pilot.pause()
        app.post_message(events.Key("down", None))
        app.post_message(events.Key("enter", "\r"))
        # under load the app may need a while: wait for the news, not a time
        await until_slept(
            lambda: any(m.startswith("acting on") for m in told) and app.ctx.selected != HOSTS[0], 30
        )
        assert [m for m in told if m.startswith("acting on")] == [f"acting on {HOSTS[1]}"]
        assert app.ctx.selected == HOSTS[1]
