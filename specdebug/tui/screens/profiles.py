"""Profile picker: switch the profile the panes act on without leaving the TUI.

Opened from the Bisect pane it also marks the bisection's ends: g on a profile makes it the good
end, b the bad one (tagged in the list); enter and esc work as anywhere else.  Marking only sets
the pane's choice of ends (nothing on the box changes), so read-only seats may mark too.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class ProfileChoice:
    """One file the picker offers: the profile's own name, or why the file is not a profile."""

    path: Path
    name: str  # the profile's name (the file stem when it does not load)
    description: str = ""
    error: str | None = None  # set: the file does not load (it is listed, marked, not usable)


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
        self, choices: list[ProfileChoice], current: Path | None, *, ends: EndMarker | None = None
    ) -> None:
        super().__init__()
        self.choices = choices
        self.current = current.resolve() if current is not None else None
        self.ends = ends

    def _label(self, c: ProfileChoice) -> Text:
        is_current = self.current is not None and c.path.resolve() == self.current
        label = Text(c.name, style="bold red" if c.error else ("bold cyan" if is_current else "bold"))
        if is_current:
            label.append(" (current)", style="cyan")
        if c.name != c.path.stem:
            label.append(f"  {c.path.name}", style="dim")
        side = self.ends.end_of(c.path) if self.ends is not None else None
        if side:
            label.append(f"  [{side}]", style=END_STYLE[side])
        if c.error:
            label.append(f"  INVALID: {c.error}"[:160], style="red")
        elif c.description:
            label.append(f"  {c.description}", style="dim")
        return label

    def compose(self) -> ComposeResult:
        options = [Option(self._label(c), id=str(c.path)) for c in self.choices]
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
        for c in self.choices:  # a profile marked good may have been the bad end: relabel all
            options.replace_option_prompt(str(c.path), self._label(c))

    def action_cancel(self) -> None:
        self.dismiss(None)
