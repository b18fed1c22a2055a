"""Widgets whose own key bindings run when the widget takes the key: in the order typed.

Why: Textual resolves a non-priority binding only once its key has bubbled from the focused widget
back up to the app, against the focus of that later moment, and the keys typed behind it are handled
meanwhile.  A key burst `/ ctrl+u word Enter` in the Logs pane lost its ctrl+u: Enter (a priority key)
had closed the filter box before ctrl+u came back up, so the box's "delete to the left" was looked up
on the log view and nothing happened, and the word was added to the old filter
(tests/tui/test_keys_beside_busy_loops.py).  Had the box still had focus, ctrl+u would have deleted
the letters typed after it.  Likewise `Down Down 3` on the hosts table moved the log view, not the
table (the arrows came back up after `3` had shown the Logs pane).  Here the focused widget runs its own bindings in turn, as it takes each
key from its queue; other keys bubble as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.widgets import Input

if TYPE_CHECKING:
    from textual.widget import Widget as _Widget
else:  # a plain mixin: Textual builds a widget class's CSS and component classes from its bases
    _Widget = object


class OwnKeysInTurn(_Widget):
    """Mixin (before the widget class): the widget's own non-priority bindings, in turn.

    CHAIN_IN_TURN: its ancestors' too (the pane's in-turn keys, the app's), from this widget up as
    Textual would look them up from the focus, so a key bound above a table (Bisect's `g`, Hosts'
    Enter) keeps its place among the table's arrows.  Not for a text box: its letters are its own
    key handling, which must come before any binding above it (`q` is a letter there, not Quit)."""

    CHAIN_IN_TURN = False

    async def _on_key(self, event: events.Key) -> None:
        nodes = list(self.ancestors_with_self) if self.CHAIN_IN_TURN else [self]
        for node in nodes:
            # Textual keeps a node's own bindings private (no public lookup by key); a release that renames
            # them leaves the key to Textual's own order (tests/tui/test_keys_in_turn.py then fails)
            own = getattr(node, "_bindings", None)
            for binding in own.key_to_bindings.get(event.key, ()) if own is not None else ():
                if binding.priority:
                    continue
                if await self.app.run_action(binding.action, node):
                    event.stop()
                    event.prevent_default()  # not the widget's own key handling too
                    return
            if node.is_modal:
                return  # what is below a modal screen does not see its keys


class TextBox(OwnKeysInTurn, Input):
    """The TUI's one-line text box (an Input whose editing keys are never lost or reordered)."""
