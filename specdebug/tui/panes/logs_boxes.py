"""The Logs pane's two text boxes: the live filter (/) and the path to follow (o).

Why apart: the boxes are where keys turn into text, so they carry the rules that keep every key:
a box takes focus at once (the letters queued behind `/` are for it), Enter and Esc close it at
once (the keys behind them are pane keys again), and what a box holds is read only after it has
taken the letters still on their way to it.  Mixed into LogsPane (specdebug/tui/panes/logs.py).
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input

from specdebug.tui.pane import Pane
from specdebug.tui.widgets.logview import LogView

__all__ = ["LogsBoxes"]


class LogsBoxes(Pane):
    """Filter and path boxes of the Logs pane (its base: LogsPane follows, renders, and says
    what `start_follow` does)."""

    TYPING_ACTIONS = frozenset({"close_input", "submit_input"})
    filter_text: str
    path: str | None

    def render_status(self) -> None:
        """LogsPane draws its status line."""

    def start_follow(self, path: str, *, this_run: bool = False) -> None:
        """LogsPane follows a path."""

    def action_filter(self) -> None:
        box = self.query_one("#logs-input", Input)
        box.add_class("visible")  # it keeps what was typed (letters may still be on their way to it)
        self.screen.set_focus(box)  # now: the letters queued behind `/` are for the box

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "logs-input":
            self._apply_filter(event.value)

    def apply_filter(self, text: str, hide: bool | None = None) -> bool:
        """Filter by `text` (not typed: the box shows it too); False for an incomplete regex."""
        if not self._apply_filter(text, hide):
            return False
        self.query_one("#logs-input", Input).value = text
        return True

    def _apply_filter(self, text: str, hide: bool | None = None) -> bool:
        """Live regex filter; an incomplete regex keeps the previous one (returns False)."""
        if not self.query_one(LogView).apply_filter(text, hide):
            return False
        self.filter_text = text
        self.render_status()
        return True

    def action_toggle_hide(self) -> None:
        self.query_one(LogView).toggle_hide()
        self.render_status()

    def action_close_input(self) -> None:
        was_typing = self.typing()
        for box in self.query(Input):
            box.remove_class("visible")
        if was_typing:  # focus only moves from our own box (never into a pane not shown)
            self.screen.set_focus(self.query_one(LogView))

    def action_submit_input(self) -> None:
        """Enter in a box: close it now (the keys behind Enter are pane keys again); what it holds
        is read once the box has taken the letters still queued for it."""
        box = self.app.focused
        if not isinstance(box, Input):
            return
        self.action_close_input()
        if box.id == "logs-path":
            box.call_later(self._path_entered, box)

    def _path_entered(self, box: Input) -> None:
        if box.value.strip():
            self.start_follow(box.value.strip())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While typing, the footer offers only Esc (and the box's Enter, named in its title)."""
        if action in self.TYPING_ACTIONS:
            return self.typing()
        return super().check_action(action, parameters)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.refresh_bindings()

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self.refresh_bindings()

    def action_open_path(self) -> None:
        box = self.query_one("#logs-path", Input)
        box.add_class("visible")
        box.value = self.path or ""
        self.screen.set_focus(box)
