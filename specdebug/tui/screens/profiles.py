"""Profile picker: switch the profile the panes act on without leaving the TUI."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class ProfilePicker(ModalScreen[Path | None]):
    BINDINGS = [Binding("escape", "cancel", "Close", id="profiles.close")]
    DEFAULT_CSS = """
    ProfilePicker { align: center middle; }
    ProfilePicker > Vertical { width: 90; height: auto; max-height: 80%; border: thick $primary;
                               background: $surface; padding: 1 2; }
    ProfilePicker OptionList { height: auto; max-height: 20; }
    """

    def __init__(self, choices: list[tuple[Path, str]], current: str | None) -> None:
        super().__init__()
        self.choices = choices  # (path, one-line description)
        self.current = current

    def compose(self) -> ComposeResult:
        options = []
        for path, desc in self.choices:
            label = Text(path.stem, style="bold cyan" if path.stem == self.current else "bold")
            if desc:
                label.append(f"  {desc}", style="dim")
            options.append(Option(label, id=str(path)))
        with Vertical():
            yield Static(Text("Profile for every pane (enter picks, esc closes)", style="bold"))
            yield OptionList(*options)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:  # every option is made with its path as id
            self.dismiss(Path(event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)
