"""A Static that redraws only when what it shows has changed.

Why: `Static.update` always asks Textual for a layout of the whole screen, and panes redraw on a clock
(the Startup pane's elapsed time every 0.5 s, the server's /metrics every second) with the same
content most of the time.  In the idle demo that was about 13 % of a core, all of it spent laying out
and painting an unchanged screen (and the same again in every test that runs the app).  `Steady`
compares the new content with what it shows and skips the update when they are equal.

Only content whose equality can be told is compared: str, rich `Text` (characters, spans and the
settings that change how it draws) and rich `Table` (its settings, columns and cells, recursively).
Anything else, or the same object passed again (it may have been changed in place), always redraws.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static

_TEXT_SETTINGS = ("style", "justify", "overflow", "no_wrap", "end", "tab_size")


class _Unknown:
    """A key that equals nothing, not even itself: content of a kind we cannot compare."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


def content_key(content: Any) -> Any:
    """A value equal to another content's key exactly when the two would draw the same."""
    if isinstance(content, str):
        return ("str", content)
    if isinstance(content, Text):
        settings = tuple(getattr(content, name) for name in _TEXT_SETTINGS)
        return ("text", content.plain, tuple(content.spans), settings)
    if isinstance(content, Table):
        table = {k: v for k, v in vars(content).items() if k not in ("columns", "rows")}
        columns = [
            (
                {k: v for k, v in vars(c).items() if k != "_cells"},
                [content_key(cell) for cell in c.cells],
            )
            for c in content.columns
        ]
        return ("table", table, columns, [vars(r) for r in content.rows])
    return _Unknown()


def same_content(shown: Any, new: Any) -> bool:
    """True when `new` would draw exactly what `shown` draws (False whenever that cannot be told)."""
    if shown is new and not isinstance(new, str):
        return False  # one object: it may have been changed in place since it was shown
    return bool(content_key(shown) == content_key(new))


class Steady(Static):
    """A Static whose `update` with unchanged content costs nothing (no layout, no repaint), and
    whose changed content lays the screen out again only when its size follows its content."""

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        if same_content(self.content, content):
            return
        super().update(content, layout=layout and self.size_follows_content())

    def size_follows_content(self) -> bool:
        """Whether new content may resize this widget (an `auto` width or height).  Textual lays out
        the whole screen for one widget's layout refresh: the header's status line (height 1) with
        64 hosts did it at each host's RTT figure, ~13 times a second."""
        width, height = self.styles.width, self.styles.height
        return bool((width is not None and width.is_auto) or (height is not None and height.is_auto))
