"""Profile picker: switch the profile the panes act on without leaving the TUI.

Opened from the Bisect pane it also marks the bisection's ends: g on a profile makes it the good
end, b the bad one (tagged in the list); enter and esc work as anywhere else.  Marking only sets
the pane's choice of ends (nothing on the box changes), so read-only seats may mark too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

END_STYLE = {"good": "bold green", "bad": "bold red"}


class EndMarker(Protocol):
    """What the picker marks ends on (the Bisect pane)."""

    def end_of(self, path: Path) -> str | None: ...  # "good" | "bad" | None

    def set_end(self, side: str, path: Path | None, *, source: str | None = None) -> None: ...


class ProfilePicker(ModalScreen[Path | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Close", id="profiles.close"),
        Binding("g", "mark('good')", "Good end", id="profiles.good"),
        Binding("b", "mark('bad')", "Bad end", id="profiles.bad"),
    ]
    DEFAULT_CSS = """
    ProfilePicker { align: center middle; }
    ProfilePicker > Vertical { width: 90; height: auto; max-height: 80%; border: thick $primary;
                               background: $surface; padding: 1 2; }
    ProfilePicker OptionList { height: auto; max-height: 20; }
    """

    def __init__(
        self, choices: list[tuple[Path, str]], current: str | None, *, ends: EndMarker | None = None
    ) -> None:
        super().__init__()
        self.choices = choices  # (path, one-line description)
        self.current = current
        self.ends = ends

    def _label(self, path: Path, desc: str) -> Text:
        label = Text(path.stem, style="bold cyan" if path.stem == self.current else "bold")
        side = self.ends.end_of(path) if self.ends is not None else None
        if side:
            label.append(f"  [{side}]", style=END_STYLE[side])
        if desc:
            label.append(f"  {desc}", style="dim")
        return label

    def compose(self) -> ComposeResult:
        options = [Option(self._label(path, desc), id=str(path)) for path, desc in self.choices]
        title = "Profile for every pane (enter picks, esc closes)"
        if self.ends is not None:
            title += "\ng marks the bisection's good end, b its bad end"
        with Vertical():
            yield Static(Text(title, style="bold"))
            yield OptionList(*options)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """g/b only where ends are picked (opened from the Bisect pane)."""
        if action == "mark":
            return self.ends is not None
        return True

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:  # every option is made with its path as id
            self.dismiss(Path(event.option.id))

    def action_mark(self, side: str) -> None:
        options = self.query_one(OptionList)
        option = options.highlighted_option
        if self.ends is None or option is None or option.id is None:
            return
        self.ends.set_end(side, Path(option.id))
        for path, desc in self.choices:  # a profile marked good may have been the bad end: relabel all
            options.replace_option_prompt(str(path), self._label(path, desc))

    def action_cancel(self) -> None:
        self.dismiss(None)
