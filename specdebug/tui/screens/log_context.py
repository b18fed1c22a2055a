"""The context screen of the logs pane: the lines around one log line, read from the box on demand.

Why a screen of its own: the pane keeps only matched lines; to see what happened around one of them
the user opens this modal, which shows +-20 raw lines (already read and scrubbed by the pane) with the
chosen one highlighted. Box text is shown as plain Text with control characters escaped, never markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdebug.core.logs.context import ContextLine
from specdebug.core.sanitize import visible

__all__ = ["ContextScreen"]


class ContextScreen(ModalScreen[None]):
    """+-20 lines around a match, read from the box."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close", id="logs.context_close")]
    DEFAULT_CSS = """
    ContextScreen { align: center middle; }
    ContextScreen > Vertical { width: 90%; height: 80%; border: round $accent; background: $surface; }
    ContextScreen #ctx-title { height: 1; color: $text-muted; }
    """

    def __init__(self, title: str, lines: list[ContextLine]) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text), id="ctx-title")
            with VerticalScroll():
                for cl in self.lines:
                    style = "reverse bold" if cl.target else ""
                    yield Static(
                        Text(visible(cl.text, tab=" "), style=style, no_wrap=True), classes="ctx-line"
                    )

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
