"""A terminal shrunk and grown back repaints every cell, however the app's events fall.

tmux cuts the rows below the cursor when a pane shrinks and adds blank ones when it grows back, so
the footer and the bottom rows stay blank until the app paints them again.  Textual waits 1/120 s
before it lays the screen out for the newest size; when both resize events arrive inside that
wait (a busy app), the screen sees only the final size, which is the size it already had, and
paints nothing (CI stop 35: test_reopen_readonly waited 30 s for a footer that never came).  The
real-tmux twin, with both signals coalesced into one, is
tests/integration/test_tui_tmux.py::test_a_resize_and_back_while_the_app_is_busy_repaints_the_whole_screen.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from textual import events
from textual._compositor import LayoutUpdate
from textual.geometry import Size

from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from tests.tui.fakes import StillRemote


async def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0)


def _record_full_repaints(app: SpecdebugApp) -> list[Size]:
    """The sizes of the whole-screen paints from now on (what the terminal is sent)."""
    painted: list[Size] = []
    display = app._display

    def recording(screen, update) -> None:
        if isinstance(update, LayoutUpdate) and update.region.offset == (0, 0):
            painted.append(update.region.size)
        display(screen, update)

    app._display = recording  # type: ignore[method-assign]
    return painted


def _resize(app: SpecdebugApp, width: int, height: int) -> None:
    """As the driver's SIGWINCH handler does: a Resize event to the app."""
    size = Size(width, height)
    app.post_message(events.Resize(size, size))


def _app() -> SpecdebugApp:
    return SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, selected="box"))


async def _settle(pilot) -> None:
    for _ in range(5):
        await pilot.pause(0.05)


async def test_two_resizes_inside_one_layout_wait_repaint_everything():
    app = _app()
    async with app.run_test(size=(150, 45)) as pilot:
        await pilot.pause()
        if not hasattr(app, "_resize_timer"):  # Textual 8.2's layout wait (App._on_resize)
            pytest.skip("this Textual has no layout timer after a resize: the case cannot arise")
        painted = _record_full_repaints(app)
        _resize(app, 120, 40)
        await _wait(lambda: app._resize_timer is not None, "the app takes the first resize")
        # a busy app: the second resize is handled before Textual's layout timer fires
        timer = app._resize_timer
        timer.pause()
        _resize(app, 150, 45)
        await _wait(lambda: app.size == Size(150, 45), "the app takes the second resize")
        timer.resume()
        await _settle(pilot)
        assert Size(120, 40) not in painted, "the screen was laid out between the two: not this case"
        assert Size(150, 45) in painted, painted


async def test_a_grow_is_painted_at_the_new_size():
    app = _app()
    async with app.run_test(size=(150, 45)) as pilot:
        await pilot.pause()
        painted = _record_full_repaints(app)
        _resize(app, 160, 50)
        await _settle(pilot)
        assert painted and painted[-1] == Size(160, 50), painted
