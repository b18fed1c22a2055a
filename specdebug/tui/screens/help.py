"""Help screen (? / F1): what the focused pane and the app can do, with the keys in effect."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import key_to_character
from textual.screen import ModalScreen
from textual.widgets import Static

NAMED_KEYS = {
    "question_mark": "?",
    "slash": "/",
    "enter": "Enter",
    "escape": "Esc",
    "space": "Space",
    "tab": "Tab",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "home": "Home",
    "end": "End",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
}


def key_label(key: str) -> str:
    """One binding key as a user types it: `question_mark` -> `?`, `f1` -> `F1`, `ctrl+l` -> `Ctrl+L`."""
    *mods, base = key.strip().split("+")
    if base in NAMED_KEYS:
        name = NAMED_KEYS[base]
    elif len(base) > 1 and base[0] == "f" and base[1:].isdigit():
        name = base.upper()
    elif len(base) == 1:
        name = base.upper() if mods else base
    else:
        name = key_to_character(base) or base.replace("_", " ")
    return "+".join([*(m.capitalize() for m in mods), name])


def keys_label(keys: str) -> str:
    """A binding's key list (`question_mark,f1`) as `?/F1`."""
    return "/".join(key_label(k) for k in keys.split(",") if k.strip())


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
