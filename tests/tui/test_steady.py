"""Redraws that change nothing cost nothing (issue 26: an idle TUI spent 13 % of a core, and the suite's
in-process app tests the same, laying out an unchanged screen on every clock tick)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from specdebug.tui.panes.startup import StartupPane
from specdebug.tui.widgets.steady import same_content
from tests.tui.test_startup_pane import T0, StartupApp


def table(cell: str, *, justify: str = "right") -> Table:
    t = Table(title="phases")
    t.add_column("at", justify=justify)  # type: ignore[arg-type]
    t.add_row(Text(cell, style="bold"))
    return t


def test_same_content_tells_equal_from_different():
    assert same_content(Text("READY", style="green"), Text("READY", style="green"))
    assert not same_content(Text("READY", style="green"), Text("READY", style="red"))
    styled = Text("READY")
    styled.stylize("bold", 0, 2)
    assert not same_content(Text("READY"), styled)
    assert same_content(table("1.0s"), table("1.0s"))
    assert not same_content(table("1.0s"), table("1.1s"))
    assert not same_content(table("1.0s"), table("1.0s", justify="left"))
    assert same_content("x", "x") and not same_content("x", Text("x"))
    same = Text("changed in place?")
    assert not same_content(same, same)  # one object may have been changed since it was shown
    assert not same_content([1], [1])  # a kind it cannot compare: always redraw


async def test_a_startup_pane_redraws_only_what_its_clock_changed():
    app = StartupApp(upto=5, finish=False)  # starting: elapsed and the ETA move on
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.pause()
        pane = app.query_one(StartupPane)
        refreshed: list[str] = []
        for static in pane.query(Static):

            def counting(*args, _id=static.id, _orig=static.refresh, **kw):
                refreshed.append(str(_id))
                return _orig(*args, **kw)

            static.refresh = counting  # type: ignore[method-assign]
        for _ in range(5):  # what its clock does every 0.5 s while nothing happens
            pane.render_view()
        assert refreshed == []
        pane.clock = lambda: T0 + 8.6  # a second later: the elapsed time and the running phase move
        pane.render_view()
        assert set(refreshed) == {"startup-head", "startup-phases"}, refreshed  # not the verdict, the log
        await pilot.pause()
