"""The log line view: a virtual list of log entries with a cursor, a live filter, and scroll messages.

Why a widget of its own: it is the one part of the logs pane that must stay cheap however many lines
arrive (it renders only the visible rows through the Line API, so its cost does not grow with the
buffer), and it should not know who follows the file. When the user moves away from the end or back
to it, the view posts `LogView.UserScrolled`; the pane decides what pausing means.
Remote text is always plain `Text` (never markup); highlights are spans on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.viewbuffer import MAX_VIEW
from specdebug.core.sanitize import visible, visible_spans

__all__ = ["Entry", "LogView", "entry_for_event", "entry_for_mark", "entry_for_match"]

EVENT_STYLE = {
    "error": "bold red",
    "ready": "bold green",
    "warmup_done": "green",
    "startup": "cyan",
    "nccl_env": "magenta",
}
VALUE_STYLE = Style(bold=True, color="bright_cyan")
FILTER_STYLE = Style(bgcolor="yellow", color="black")
NOTICE_STYLE = Style(color="yellow", italic=True)
MARK_STYLE = Style(color="black", bgcolor="bright_magenta", bold=True)
CURSOR_STYLE = Style(bgcolor="grey23")

EVENT_WORDS = {
    "opened": "following",
    "missing": "no such file yet: waiting for it to appear",
    "truncated": "FILE TRUNCATED",
    "rotated": "FILE ROTATED",
    "reconnecting": "connection lost, will resume",
    "resumed": "reconnected, resuming",
    "fallback": "no python3 on the box: plain tail, no prefilter",
    "ended": "follow ended",
    "error": "follow failed",
}


@dataclass
class Entry:
    """One row of the view: a match, a follow notice or a user mark."""

    kind: str  # "match" | "notice" | "mark"
    text: str
    match: LogMatch | None = None
    style: Style | None = None
    spans: list[tuple[int, int, Style]] = field(default_factory=list)
    node: str | None = None  # on a deployment: the node whose log it is (its column leads the text)


def entry_for_match(m: LogMatch) -> Entry:
    # control characters from the box are shown as escapes (\x1b); the highlights move with them
    text, spans = visible_spans(m.line, [(s, e, VALUE_STYLE) for s, e, _ in m.spans])
    style = Style.parse(EVENT_STYLE[m.event]) if m.event in EVENT_STYLE else None
    if m.warmup and style is None:
        style = Style(dim=True)
    return Entry("match", text, m, style, spans)


def entry_for_event(ev: LogEvent) -> Entry:
    detail = f" ({ev.detail})" if ev.detail and ev.kind != "missing" else ""  # its detail says the same
    at = (
        f" at byte {ev.offset}"
        if ev.offset is not None and ev.kind in ("opened", "resumed", "reconnecting")
        else ""
    )
    return Entry(
        "notice",
        visible(f"── {EVENT_WORDS.get(ev.kind, ev.kind)}{at}{detail} ──", tab=" "),
        style=NOTICE_STYLE,
    )


def entry_for_mark(n: int, stamp: str, label: str = "") -> Entry:
    """The line a user mark inserts (label is user text: shown, never interpreted)."""
    text = f"──── mark {n} {stamp}{(' ' + label) if label else ''} ────"
    return Entry("mark", visible(text, tab=" "), style=MARK_STYLE)


class LogView(ScrollView, can_focus=True):
    """Virtual list of entries with a cursor; posts UserScrolled when the user scrolls away from the end
    (at_end False) or back to it (at_end True)."""

    class UserScrolled(Message):
        """The user moved the view: away from the end (pause) or onto the last row (follow again)."""

        def __init__(self, log_view: LogView, at_end: bool) -> None:
            super().__init__()
            self.log_view = log_view
            self.at_end = at_end

        @property
        def control(self) -> LogView:
            return self.log_view

    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", id="logs.cursor_up", show=False),
        Binding("down", "cursor(1)", "Down", id="logs.cursor_down", show=False),
        Binding("pageup", "cursor(-20)", "Page up", id="logs.page_up", show=False),
        Binding("pagedown", "cursor(20)", "Page down", id="logs.page_down", show=False),
        Binding("home", "cursor_home", "Top", id="logs.home", show=False),
        Binding("end", "cursor_end", "Tail", id="logs.end", show=False),
    ]
    DEFAULT_CSS = "LogView { height: 1fr; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: list[Entry] = []
        self.rows: list[int] = []  # indexes into entries that are shown (filter in hide mode)
        self.cursor = -1
        self.filter_rx: re.Pattern[str] | None = None
        self.hide = True
        self.max_width = 0
        self._programmatic = False

    def _user_scrolled(self, at_end: bool) -> None:
        self.post_message(self.UserScrolled(self, at_end))

    # -- content -------------------------------------------------------------------------------------
    def _shown(self, e: Entry) -> bool:
        return (
            e.kind != "match"
            or not self.hide
            or self.filter_rx is None
            or bool(self.filter_rx.search(e.text))
        )

    def add(self, new: list[Entry], follow: bool) -> None:
        base = len(self.entries)
        self.entries.extend(new)
        for i, e in enumerate(new):
            if self._shown(e):
                self.rows.append(base + i)
            self.max_width = max(self.max_width, len(e.text))
        excess = len(self.entries) - MAX_VIEW
        if excess > 0:
            del self.entries[:excess]
            cut = 0
            while cut < len(self.rows) and self.rows[cut] < excess:
                cut += 1
            del self.rows[:cut]
            self.rows = [r - excess for r in self.rows]
            self.cursor = max(-1, self.cursor - cut)
        self._resize()
        if follow:
            self.cursor = len(self.rows) - 1
            self.scroll_to_end()
            self.call_after_refresh(self.scroll_to_end)  # again once the new virtual size is laid out
        self.refresh()

    def set_filter(self, rx: re.Pattern[str] | None, hide: bool) -> None:
        current = self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None
        self.filter_rx, self.hide = rx, hide
        self.rows = [i for i, e in enumerate(self.entries) if self._shown(e)]
        self.cursor = len(self.rows) - 1
        if current is not None:
            for pos, i in enumerate(self.rows):
                if i >= current:
                    self.cursor = pos
                    break
        self._resize()
        self.refresh()

    def apply_filter(self, text: str, hide: bool | None = None) -> bool:
        """Filter by a regex typed by the user (empty: none); False, and no change, while it is incomplete."""
        try:
            rx = re.compile(text) if text else None
        except re.error:
            return False
        self.set_filter(rx, self.hide if hide is None else hide)
        return True

    def toggle_hide(self) -> None:
        """Switch between hiding the lines the filter does not match and only highlighting the matches."""
        self.set_filter(self.filter_rx, not self.hide)

    def clear(self) -> None:
        self.entries.clear()
        self.rows.clear()
        self.cursor = -1
        self.max_width = 0
        self._resize()
        self.refresh()

    def current(self) -> Entry | None:
        if 0 <= self.cursor < len(self.rows):
            return self.entries[self.rows[self.cursor]]
        return None

    def follow_end(self) -> None:
        """Put the cursor on the last row and scroll there (nothing new to add)."""
        self.cursor = len(self.rows) - 1
        self.scroll_to_end()
        self.refresh()

    def _resize(self) -> None:
        self.virtual_size = Size(self.max_width + 1, len(self.rows))

    # -- scrolling -----------------------------------------------------------------------------------
    def scroll_to_end(self) -> None:
        self._programmatic = True
        self.scroll_to(
            y=max(0, len(self.rows) - self.scrollable_content_region.height), animate=False, immediate=True
        )
        self._programmatic = False

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self._programmatic:
            return
        # a message, so the pane never scrolls from inside a scroll (this may run within an animation step)
        if new < old and old <= self.max_scroll_y:  # a shrinking view clamps scroll_y: not the user
            self._user_scrolled(False)
        elif new >= self.max_scroll_y and new > old:
            self._user_scrolled(True)

    def action_cursor(self, delta: int) -> None:
        if not self.rows:
            return
        self.cursor = min(max(0, self.cursor + delta), len(self.rows) - 1)
        self._user_scrolled(self.cursor == len(self.rows) - 1)
        self._programmatic = True
        self.scroll_to_region(Region(0, self.cursor, 1, 1), animate=False, immediate=True)
        self._programmatic = False
        self.refresh()

    def action_cursor_home(self) -> None:
        self.action_cursor(-len(self.rows))

    def action_cursor_end(self) -> None:
        if not self.rows:
            self._user_scrolled(True)  # paused with an empty view: End must still resume
            return
        self.action_cursor(len(self.rows))

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y + event.y)
        if 0 <= row < len(self.rows):
            self.cursor = row
            self._user_scrolled(row == len(self.rows) - 1)
            self.refresh()

    # -- rendering -----------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        if row >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        entry = self.entries[self.rows[row]]
        text = self._text(entry)
        segments = list(text.render(self.app.console))
        strip = Strip([s for s in segments if s.text != "\n"]).crop_extend(
            scroll_x, scroll_x + width, self.rich_style
        )
        if row == self.cursor and self.has_focus:
            strip = strip.apply_style(CURSOR_STYLE)
        return strip

    def _text(self, entry: Entry) -> Text:
        text = Text(entry.text, style=entry.style or "", no_wrap=True, end="")
        for s, e, st in entry.spans:
            text.stylize(st, s, e)
        if self.filter_rx is not None and entry.kind == "match":
            for m in self.filter_rx.finditer(entry.text):
                if m.end() > m.start():
                    text.stylize(FILTER_STYLE, m.start(), m.end())
        return text
