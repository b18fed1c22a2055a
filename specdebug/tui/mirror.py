"""The browser seat's app: the pairing session's own screen, mirrored, nothing else.

A read-only browser seat used to be a new specdebug app per tab, read-only but with its own
connection: it could open any path on the box as the driver (Logs `o`, then the context screen).
This app instead shows what the session's pane shows (`tmux capture-pane` of the session, a few
times a second, from this machine) and takes no input: no key reaches the session, no path is
read, no box is connected.  So every tab sees the same screen the seats see.

    python -m specdebug.tui.mirror SOCKET TARGET TITLE
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

from rich.text import Text
from textual.app import App, ComposeResult
from textual.driver import Driver
from textual.widgets import Static

from specdebug.capability import enter_readonly_process
from specdebug.tui.driver import terminal_driver
from specdebug.tui.widgets.steady import Steady

REFRESH_S = 0.25
MAX_SCREEN = 1 << 20  # a pane's screen with its colours is far smaller; more is not a screen


def capture(socket: str, target: str) -> str:
    """The pane's screen with its colours (ANSI), as tmux draws it; '' when tmux cannot say."""
    try:
        res = subprocess.run(
            ["tmux", "-S", socket, "capture-pane", "-p", "-e", "-t", target],
            capture_output=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout[:MAX_SCREEN].decode("utf-8", "replace") if res.returncode == 0 else ""


class MirrorApp(App[None]):
    """One Static showing the session's screen; every key is ignored (there are no bindings)."""

    CSS = "Screen { overflow: auto; } #mirror { width: auto; height: auto; }"
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, socket: str, target: str, title: str) -> None:
        super().__init__()
        self.socket, self.target = socket, target
        self.title = title
        self.last = ""

    def get_driver_class(self) -> type[Driver]:
        return terminal_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title, style="bold reverse"), id="title")
        yield Steady(Text("waiting for the session's screen..."), id="mirror")

    def on_mount(self) -> None:
        self.run_worker(self._follow(), exclusive=True)

    async def _follow(self) -> None:
        """tmux has no event for "the screen changed": ask it every REFRESH_S, redraw only on a change."""
        while True:
            await self.refresh_screen()
            await asyncio.sleep(REFRESH_S)

    async def refresh_screen(self) -> None:
        text = await asyncio.to_thread(capture, self.socket, self.target)
        if not text:
            text = "the pairing session has ended" if self.last else "waiting for the session's screen..."
        if text != self.last:
            self.last = text
            self.query_one("#mirror", Static).update(Text.from_ansi(text))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m specdebug.tui.mirror SOCKET TARGET TITLE", file=sys.stderr)
        return 2
    enter_readonly_process()
    MirrorApp(*args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
