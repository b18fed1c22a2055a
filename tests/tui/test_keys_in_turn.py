"""A widget's own keys act in the order typed, whatever the keys behind them do to the focus.

Textual looks a non-priority binding up only once its key has bubbled back to the app, on the focus
of that later moment.  Typed as one burst (nobody waits for the screen between keys), `/ ctrl+u word
Enter` lost its ctrl+u (Enter had closed the filter box by then: the word joined the old filter), and
`Down Down 3` on the hosts table moved nothing (the Logs pane was shown by then).
"""

from __future__ import annotations

from textual import events
from textual.widgets import DataTable, Input

from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.logs import LogsPane
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import until_slept

CHARS = {"slash": "/", "enter": "\r", "ctrl+u": "\x15"}


def typed(app: SpecdebugApp, *keys: str) -> None:
    """Keys as a terminal sends them: all queued before the first is handled."""
    for name in keys:
        app.post_message(events.Key(name, CHARS.get(name, name if len(name) == 1 else None)))


async def test_editing_keys_in_a_burst_reach_the_filter_box_in_turn() -> None:
    app = SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, selected="box"))
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        pane = app.query_one(LogsPane)
        typed(app, "3", "slash", "a", "b", "c", "enter")
        assert await until_slept(lambda: pane.filter_text == "abc" and not pane.typing(), 30)
        typed(app, "4", "3", "slash", "ctrl+u", "x", "y", "z", "enter")
        assert await until_slept(lambda: not pane.typing() and pane.filter_text in ("xyz", "abcxyz"), 30)
        assert pane.filter_text == "xyz"
        # the cursor keys too: ctrl+u deletes what is left of the cursor when it is typed
        typed(app, "slash", "left", "ctrl+u", "q", "enter")
        assert await until_slept(lambda: not pane.typing() and "q" in pane.filter_text, 30)
        assert pane.filter_text == "qz"
        assert app.query_one("#logs-input", Input).value == "qz"


async def test_table_arrows_typed_before_a_pane_switch_move_the_table() -> None:
    hosts = [f"box{i}" for i in range(8)]
    app = SpecdebugApp(AppContext(remotes={h: StillRemote(h) for h in hosts}, selected=hosts[0]))
    async with app.run_test(size=(150, 40)) as pilot:
        table = app.query_one("#hosts-table", DataTable)
        table.focus()
        await pilot.pause()
        typed(app, "down", "down", "3")
        assert await until_slept(lambda: isinstance(app.focused, type(app.query_one("#logs-view"))), 30)
        await until_slept(lambda: table.cursor_row == 2, 10)  # the arrows may still be on their way
        assert table.cursor_row == 2
