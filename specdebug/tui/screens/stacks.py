"""The workers' stacks (py-spy, grouped across ranks) as a modal: the TUI twin of `specdebug stacks`.

Opened from the Startup pane (a phase that takes longer than usual) and the Env pane (one worker).
Box text (function and file names) is shown as plain Text with control characters escaped.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdebug.core.sanitize import visible

__all__ = ["StacksScreen"]


class StacksScreen(ModalScreen[None]):
    """Grouped stacks of a server's workers."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close", id="stacks.close")]
    DEFAULT_CSS = """
    StacksScreen { align: center middle; }
    StacksScreen > Vertical { width: 90%; height: 85%; border: round $accent; background: $surface; }
    StacksScreen #stacks-title { height: 1; color: $text-muted; }
    """

    def __init__(self, title: str, lines: list[str]) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text), id="stacks-title")
            with VerticalScroll():
                body = "\n".join(visible(line, tab=" ") for line in self.lines)
                yield Static(Text(body, no_wrap=True), id="stacks-body")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
