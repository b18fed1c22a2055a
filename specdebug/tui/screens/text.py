"""A modal of plain lines from the box or the journal: the TUI twin of a verb's printed text.

The drift snapshot (`specdebug drift`) and the session report (`specdebug report`) open here; every
line is shown as plain Text with control characters escaped, never as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdebug.core.sanitize import visible

__all__ = ["TextScreen"]


class TextScreen(ModalScreen[None]):
    """A title, a scrolling body of lines and a footnote (how to get the same from the command line)."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close", id="text.close")]
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > Vertical { width: 90%; height: 85%; border: round $accent; background: $surface; }
    TextScreen #text-title { height: 1; color: $text-muted; }
    TextScreen #text-foot { height: 1; color: $text-muted; }
    """

    def __init__(self, title: str, lines: list[str], foot: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines
        self.foot = foot

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(visible(self.title_text)), id="text-title")
            with VerticalScroll():
                body = "\n".join(visible(line, tab=" ") for line in self.lines)
                yield Static(Text(body, no_wrap=True), id="text-body")
            yield Static(Text(visible(self.foot)), id="text-foot")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
