"""Startup pane `k`: the workers' stacks (py-spy over the loopback sshd) in a modal, the stuck rank
of a sim launched with the stuck-rank switch singled out."""

from __future__ import annotations

import asyncio
import io
import time
import uuid
from pathlib import Path

import pytest
from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import Static

from specdebug.core.journal import Journal
from specdebug.tui.context import AppContext
from specdebug.tui.panes.startup import StartupPane
from specdebug.tui.screens.stacks import StacksScreen
from tests.simprofiles import sim_profile
from tests.sshd_harness import on_session_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not on_session_path("py-spy"), reason="py-spy not installed (pip install py-spy)"),
]


class LiveApp(App):
    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx

    def compose(self) -> ComposeResult:
        yield StartupPane(self.ctx)


async def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, "timed out"
        await asyncio.sleep(0.1)


def text_of(widget: Static) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def test_k_shows_the_stuck_rank(remote, tmp_path: Path) -> None:
    profile = sim_profile(
        tmp_path, f"stacks-{uuid.uuid4().hex[:6]}", "--tp", "4", env={"SPECDEBUG_SIM_STUCK_RANK": "1"}
    )
    profile.workers.match = "sglang::scheduler"
    ctx = AppContext(
        remotes={remote.name: remote}, selected=remote.name, profile=profile, journal=Journal(tmp_path / "s")
    )
    app = LiveApp(ctx)
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(StartupPane)
        pane.focus()
        await pilot.press("l")
        await wait_for(lambda: pane.state in ("ready", "failed"))
        assert pane.state == "ready", pane.verdict
        try:
            for _ in range(5):  # on a loaded box a rank may still be on its way into the event loop
                await pilot.press("k")
                # the screen is app.screen once pushed, its body once composed (later, under load)
                await wait_for(
                    lambda: isinstance(app.screen, StacksScreen) and bool(app.screen.query("#stacks-body"))
                )
                shown = text_of(app.screen.query_one("#stacks-body", Static))
                if shown.count("(pids") == 2:
                    break
                await pilot.press("escape")
                await wait_for(lambda: not isinstance(app.screen, StacksScreen))
                await asyncio.sleep(1)
            assert "ranks 0, 2, 3 (pids" in shown and "NCCL collective wait" in shown
            assert "ranks 1 (pids" in shown and "<- differs" in shown and "forward_decode" in shown
            await pilot.press("escape")
            await wait_for(lambda: not isinstance(app.screen, StacksScreen))
        finally:
            await pilot.press("x", "x")  # Stop (asks for a second press)
            await wait_for(lambda: pane.state in ("stopped", "failed"))
