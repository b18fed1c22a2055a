"""Help screen (? / F1): what the focused pane and the app can do, with the keys in effect."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "app.pop_screen", "Close", id="help.close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90; height: 80%; border: thick $primary; background: $surface; padding: 1 2; }
    """

    def __init__(self, rows: list[tuple[str, str, str, str]], title: str) -> None:
        super().__init__()
        self.rows = rows  # (scope, key, description, binding id)
        self.title_text = title

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("where")
        table.add_column("key")
        table.add_column("action")
        table.add_column("id (for keymap.toml)", style="dim")
        for scope, key, desc, bid in self.rows:
            table.add_row(Text(scope), Text(key, style="bold"), Text(desc), Text(bid))
        with VerticalScroll():
            yield Static(Text(self.title_text, style="bold"))
            yield Static(table)
            yield Static(
                Text(
                    '\nRemap keys in ~/.config/specdebug/keymap.toml:  [keymap]  "bench.run" = "ctrl+b"\n'
                    "Every action is also in the command palette (ctrl+p).  Esc closes.",
                    style="dim",
                )
            )
