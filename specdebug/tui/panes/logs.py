"""Logs pane: follow the server log on the box, highlight what matters, chart the numbers.

Lines arrive from `specdebug.core.logs.follow_matches` (the same parser as `specdebug scan` and
`grep`). Every match feeds the metric store at once, so stats never drop a sample; the display
path is separate and bounded: matches wait in a small inbox, a 80 ms timer moves them into a ring
of at most MAX_VIEW lines, and a flood only raises the "dropped from view" counter. The line view
renders only the visible rows (Line API), so its cost does not grow with the buffer.
Remote text is always plain `Text` (never markup); highlights are spans on it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Sparkline, Static

from specdebug.core.logs.context import ContextLine, read_context
from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import Follower, follow_matches
from specdebug.core.logs.parser import LogParser, PatternError
from specdebug.core.logs.scan import Analyzer
from specdebug.core.logs.stats import metric_rank
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible, visible_spans
from specdebug.core.secrets import Scrubber
from specdebug.core.servers import ServerRecord, load_record
from specdebug.core.startup.events import ServerState
from specdebug.remote.api import RemoteError
from specdebug.tui.pane import Pane

MAX_VIEW = 5000  # lines kept for display (stats keep every sample regardless)
FLUSH_S = 0.08
STATS_EVERY_S = 0.5

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


@dataclass
class Entry:
    """One row of the view: a match, a follow notice or a user mark."""

    kind: str  # "match" | "notice" | "mark"
    text: str
    match: LogMatch | None = None
    style: Style | None = None
    spans: list[tuple[int, int, Style]] = field(default_factory=list)


def entry_for_match(m: LogMatch) -> Entry:
    # control characters from the box are shown as escapes (\x1b); the highlights move with them
    text, spans = visible_spans(m.line, [(s, e, VALUE_STYLE) for s, e, _ in m.spans])
    style = Style.parse(EVENT_STYLE[m.event]) if m.event in EVENT_STYLE else None
    if m.warmup and style is None:
        style = Style(dim=True)
    return Entry("match", text, m, style, spans)


def entry_for_event(ev: LogEvent) -> Entry:
    words = {
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
    detail = f" ({ev.detail})" if ev.detail and ev.kind != "missing" else ""  # its detail says the same
    at = (
        f" at byte {ev.offset}"
        if ev.offset is not None and ev.kind in ("opened", "resumed", "reconnecting")
        else ""
    )
    return Entry(
        "notice", visible(f"── {words.get(ev.kind, ev.kind)}{at}{detail} ──", tab=" "), style=NOTICE_STYLE
    )


class LogView(ScrollView, can_focus=True):
    """Virtual list of entries with a cursor; tells the pane when the user scrolls away from the end."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", id="logs.cursor_up", show=False),
        Binding("down", "cursor(1)", "Down", id="logs.cursor_down", show=False),
        Binding("pageup", "cursor(-20)", "Page up", id="logs.page_up", show=False),
        Binding("pagedown", "cursor(20)", "Page down", id="logs.page_down", show=False),
        Binding("home", "cursor_home", "Top", id="logs.home", show=False),
        Binding("end", "cursor_end", "Tail", id="logs.end", show=False),
    ]
    DEFAULT_CSS = "LogView { height: 1fr; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.entries: list[Entry] = []
        self.rows: list[int] = []  # indexes into entries that are shown (filter in hide mode)
        self.cursor = -1
        self.filter_rx: re.Pattern[str] | None = None
        self.hide = True
        self.max_width = 0
        self.on_user_scroll: Callable[[bool], None] | None = None  # callback(at_end: bool)
        self._programmatic = False

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
        if self._programmatic or self.on_user_scroll is None:
            return
        # never scroll from inside a scroll (this may run within an animation step): defer
        if new < old and old <= self.max_scroll_y:  # a shrinking view clamps scroll_y: not the user
            self.call_later(self.on_user_scroll, False)
        elif new >= self.max_scroll_y and new > old:
            self.call_later(self.on_user_scroll, True)

    def action_cursor(self, delta: int) -> None:
        if not self.rows:
            return
        self.cursor = min(max(0, self.cursor + delta), len(self.rows) - 1)
        if self.on_user_scroll is not None:
            self.on_user_scroll(self.cursor == len(self.rows) - 1)
        self._programmatic = True
        self.scroll_to_region(self._cursor_region(), animate=False, immediate=True)
        self._programmatic = False
        self.refresh()

    def action_cursor_home(self) -> None:
        self.action_cursor(-len(self.rows))

    def action_cursor_end(self) -> None:
        if not self.rows and self.on_user_scroll is not None:
            self.on_user_scroll(True)  # paused with an empty view: End must still resume
            return
        self.action_cursor(len(self.rows))

    def _cursor_region(self):
        from textual.geometry import Region

        return Region(0, self.cursor, 1, 1)

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y + event.y)
        if 0 <= row < len(self.rows):
            self.cursor = row
            if self.on_user_scroll is not None:
                self.on_user_scroll(row == len(self.rows) - 1)
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


class MetricRow(Vertical):
    """name + stats line + sparkline of the recent values."""

    DEFAULT_CSS = """
    MetricRow { height: 4; }
    MetricRow .metric-head { height: 1; }
    MetricRow .metric-stats { height: 2; color: $text-muted; }
    MetricRow Sparkline { height: 1; }
    """

    def __init__(self, name: str) -> None:
        super().__init__(classes="metric-row")
        self.metric = name

    def compose(self) -> ComposeResult:
        yield Static(Text(self.metric, style="bold"), classes="metric-head")
        yield Static("", classes="metric-stats")
        yield Sparkline([], summary_function=max)

    def show(self, stats: dict, recent: list[float]) -> None:
        self.query_one(".metric-stats", Static).update(Text(stats_line(stats)))
        self.query_one(Sparkline).data = list(recent)


def _f(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def stats_line(st: dict) -> str:
    return (
        f"n {st['n']}  last {_f(st['last'])}  mean {_f(st['mean'])}\n"
        f"p50 {_f(st['p50'])}  p90 {_f(st['p90'])}  min {_f(st['min'])}  max {_f(st['max'])}"
    )


class ContextScreen(ModalScreen[None]):
    """+-20 lines around a match, read from the box."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close", id="logs.context_close")]
    DEFAULT_CSS = """
    ContextScreen { align: center middle; }
    ContextScreen > Vertical { width: 90%; height: 80%; border: round $accent; background: $surface; }
    ContextScreen #ctx-title { height: 1; color: $text-muted; }
    """

    def __init__(self, title: str, lines: list[ContextLine]) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text), id="ctx-title")
            with VerticalScroll():
                for cl in self.lines:
                    style = "reverse bold" if cl.target else ""
                    yield Static(
                        Text(visible(cl.text, tab=" "), style=style, no_wrap=True), classes="ctx-line"
                    )

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)


class LogsPane(Pane):
    PANE_ID = "logs"
    TITLE = "Logs"
    MUTATING_ACTIONS = frozenset()  # reading logs and writing local marks never changes the box
    BINDINGS = [
        Binding("f", "follow_profile", "Follow log", id="logs.follow"),
        Binding("o", "open_path", "Open path", id="logs.open"),
        Binding("slash", "filter", "Filter", id="logs.filter"),
        Binding("h", "toggle_hide", "Hide/highlight", id="logs.filter_mode"),
        Binding("p", "toggle_pause", "Pause", id="logs.pause"),
        Binding("end", "tail", "Tail", id="logs.tail"),
        Binding("m", "mark", "Mark", id="logs.mark"),
        Binding("enter,c", "context", "Context", id="logs.context"),
        Binding("w", "toggle_warmup", "Warmup", id="logs.warmup"),
        Binding("x", "stop", "Stop", id="logs.stop"),
        Binding("M", "toggle_metrics", "Metrics panel", id="logs.metrics", show=False),
        Binding("escape", "close_input", "Close", id="logs.close_input"),
    ]
    INPUT_PROMPTS = {
        "logs-input": "filter: regex on each line · Enter keeps it · Esc closes",
        "logs-path": "open: path of a log on the box (absolute or ~/…) · Enter follows it · Esc closes",
    }
    DEFAULT_CSS = """
    LogsPane { layout: vertical; }
    LogsPane #logs-status { height: 1; background: $boost; }
    LogsPane #logs-input, LogsPane #logs-path { display: none; height: 3; }
    LogsPane #logs-input.visible, LogsPane #logs-path.visible { display: block; }
    LogsPane #logs-body { height: 1fr; }
    LogsPane LogView { width: 1fr; }
    LogsPane #logs-metrics { width: 44; border-left: solid $primary-darken-2; padding: 0 1; }
    LogsPane.-narrow #logs-metrics { width: 30; }
    LogsPane.-no-metrics #logs-metrics { display: none; }
    LogsPane #metrics-title { height: 1; color: $text-muted; }
    LogsPane #metrics-prom { display: none; height: auto; margin-bottom: 1; }
    LogsPane #metrics-prom.visible { display: block; }
    """

    def __init__(self, ctx, **kwargs) -> None:
        super().__init__(ctx, **kwargs)
        self.analyzer = Analyzer(self._new_parser())
        self.path: str | None = None  # what we follow (as typed / from the profile)
        self.host: str | None = None
        self.follower: Follower | None = None
        self.state = "idle"  # idle | following | waiting | reconnecting | ended | error
        self.following = True  # view sticks to the end
        self.include_warmup = False
        self.inbox: deque[Entry] = deque(maxlen=MAX_VIEW)
        self.pending: deque[Entry] = deque(maxlen=MAX_VIEW)
        self.received = 0  # entries produced since start
        self.dropped = 0  # never displayed because a buffer overflowed
        self.marks = 0
        self.matches = 0
        self.notice: str | None = None
        self.filter_text = ""
        self._stats_at = 0.0
        self._stats_dirty = False
        self._rows: dict[str, MetricRow] = {}

    # -- layout --------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="logs-status")
        for box_id, placeholder in (
            ("logs-input", "regex, e.g. accept|ERROR"),
            ("logs-path", "/var/log/server.log or ~/logs/sglang.log"),
        ):
            box = Input(placeholder=placeholder, id=box_id)
            box.border_title = self.INPUT_PROMPTS[box_id]  # the prompt stays when the box has text
            yield box
        with Horizontal(id="logs-body"):
            yield LogView(id="logs-view")
            with VerticalScroll(id="logs-metrics"):
                yield Static("", id="metrics-prom")  # the server's /metrics, beside the log's numbers
                yield Static(Text("metrics"), id="metrics-title")

    def on_mount(self) -> None:
        view = self.query_one(LogView)
        view.on_user_scroll = self._user_scrolled
        self.set_interval(FLUSH_S, self.flush)
        self.render_status()

    # -- feeding (the worker and tests call these) -----------------------------------------------------
    def feed_match(self, m: LogMatch) -> None:
        """Account for a match (stats at once) and queue it for display."""
        self.analyzer.add(m)
        self.matches += 1
        self._stats_dirty = True
        self._queue(entry_for_match(m))

    def feed_event(self, ev: LogEvent) -> None:
        states = {
            "opened": "following",
            "resumed": "following",
            "missing": "waiting",
            "reconnecting": "reconnecting",
            "ended": "ended",
            "error": "error",
        }
        self.state = states.get(ev.kind, self.state)
        if ev.kind in ("truncated", "rotated", "fallback", "error"):
            self.notice = f"{ev.kind}: {ev.detail}" if ev.detail else ev.kind
            self.app.notify(
                f"{self.path}: {self.notice}", severity="error" if ev.kind == "error" else "warning"
            )
        if ev.kind in ("truncated", "rotated"):
            # a new file (or the same one rewritten): warmup begins again only if it starts a server
            pass
        self._queue(entry_for_event(ev))

    def _queue(self, entry: Entry) -> None:
        self.received += 1
        if len(self.inbox) == self.inbox.maxlen:
            self.dropped += 1
        self.inbox.append(entry)

    def flush(self) -> None:
        """Move queued entries into the view (or pending while paused); refresh stats now and then."""
        if self.inbox:
            batch = list(self.inbox)
            self.inbox.clear()
            if self.following:
                if self.pending:
                    batch = list(self.pending) + batch
                    self.pending.clear()
                if len(batch) > MAX_VIEW:
                    self.dropped += len(batch) - MAX_VIEW
                    batch = batch[-MAX_VIEW:]
                self.query_one(LogView).add(batch, follow=True)
            else:
                overflow = max(0, len(self.pending) + len(batch) - MAX_VIEW)
                self.dropped += overflow
                self.pending.extend(batch)
            self.render_status()
        now = time.monotonic()
        if self._stats_dirty and now - self._stats_at >= STATS_EVERY_S:
            self.render_stats()

    # -- rendering -------------------------------------------------------------------------------------
    def status_text(self) -> Text:
        t = Text(no_wrap=True)
        where = (
            f"{self.host}:{self.path}"
            if self.host and self.path
            else (self.path or "no log (f: follow profile log, o: open path)")
        )
        t.append(where, style="bold")
        state_style = {
            "following": "green",
            "waiting": "yellow",
            "reconnecting": "bold yellow",
            "error": "bold red",
            "ended": "dim",
        }.get(self.state, "dim")
        t.append(f"  {self.state}", style=state_style)
        if not self.following:
            t.append(f"  PAUSED {len(self.pending)} pending (End: follow)", style="bold yellow")
        t.append(f"  {self.matches} matches")
        if self.dropped:
            t.append(f"  {self.dropped} dropped from view", style="yellow")
        if self.marks:
            t.append(f"  {self.marks} marks")
        pack = self.analyzer.parser.pack_name
        t.append(f"  pack {pack or 'auto'}", style="dim")
        if self.filter_text:
            mode = "hide" if self.query_one(LogView).hide else "highlight"
            t.append(f"  filter /{self.filter_text}/ ({mode})", style="cyan")
        t.append("  warmup " + ("in stats" if self.include_warmup else "excluded"), style="dim")
        if self.notice:
            t.append(f"  {self.notice}", style="bold red")
        return t

    def render_status(self) -> None:
        self.query_one("#logs-status", Static).update(self.status_text())

    def render_stats(self) -> None:
        self._stats_at = time.monotonic()
        self._stats_dirty = False
        store = self.analyzer.store
        summary = store.summary(include_warmup=self.include_warmup)
        box = self.query_one("#logs-metrics", VerticalScroll)
        for name in sorted(store.names(), key=metric_rank):
            series = store.series(name, include_warmup=self.include_warmup)
            if series is None or series.n == 0:
                continue
            row = self._rows.get(name)
            if row is None:
                row = self._rows[name] = MetricRow(name)
                later = [r for n, r in self._rows.items() if n != name and metric_rank(n) > metric_rank(name)]
                if later:
                    box.mount(row, before=min(later, key=lambda r: metric_rank(r.metric)))
                else:
                    box.mount(row)
            base, _, idx = name.rstrip("]").partition("[")
            st = summary.get(name)
            if st is None and idx.isdigit() and base in summary:
                st = {k: (v[int(idx)] if isinstance(v, list) else v) for k, v in summary[base].items()}
            if st is not None:
                if row.is_mounted:
                    row.show(st, list(series.recent))
                else:
                    row.call_after_refresh(row.show, st, list(series.recent))

    # -- user scrolling / pause ------------------------------------------------------------------------
    def _user_scrolled(self, at_end: bool) -> None:
        if at_end and not self.following:
            self.action_tail()
        elif not at_end and self.following:
            self.following = False
            self.render_status()

    def action_toggle_pause(self) -> None:
        if self.following:
            self.following = False
            self.render_status()
        else:
            self.action_tail()

    def action_tail(self) -> None:
        self.following = True
        view = self.query_one(LogView)
        if self.pending:
            view.add(list(self.pending), follow=True)
            self.pending.clear()
        else:
            view.cursor = len(view.rows) - 1
            view.scroll_to_end()
            view.refresh()
        self.render_status()

    # -- filter ----------------------------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#logs-input", Input)
        box.add_class("visible")
        box.value = self.filter_text
        box.focus()

    @on(Input.Changed, "#logs-input")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.apply_filter(event.value)

    @on(Input.Submitted, "#logs-input")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.action_close_input()

    def apply_filter(self, text: str, hide: bool | None = None) -> bool:
        """Live regex filter; an incomplete regex keeps the previous one (returns False)."""
        view = self.query_one(LogView)
        try:
            rx = re.compile(text) if text else None
        except re.error:
            return False
        self.filter_text = text
        view.set_filter(rx, view.hide if hide is None else hide)
        self.render_status()
        return True

    def action_toggle_hide(self) -> None:
        view = self.query_one(LogView)
        view.set_filter(view.filter_rx, not view.hide)
        self.render_status()

    def action_close_input(self) -> None:
        for box in self.query(Input):
            box.remove_class("visible")
        self.query_one(LogView).focus()

    def typing(self) -> bool:
        """True while a text box of this pane has focus: its letters are text, not pane keys."""
        focused = self.app.focused
        return isinstance(focused, Input) and focused in self.query(Input)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While typing, the footer offers only Esc (and the box's Enter, named in its title)."""
        if action == "close_input":
            return self.typing()
        if self.typing():
            return False
        return super().check_action(action, parameters)

    def on_descendant_focus(self, event) -> None:
        self.refresh_bindings()

    def on_descendant_blur(self, event) -> None:
        self.refresh_bindings()

    # -- marks -----------------------------------------------------------------------------------------
    def action_mark(self, label: str = "") -> None:
        self.marks += 1
        offset = self.follower.offset if self.follower is not None else None
        stamp = time.strftime("%H:%M:%S")
        text = f"──── mark {self.marks} {stamp}{(' ' + label) if label else ''} ────"
        self._queue(Entry("mark", visible(text, tab=" "), style=MARK_STYLE))
        if self.ctx.journal is not None:
            try:
                self.ctx.journal.append(
                    "mark",
                    {
                        "pane": "logs",
                        "n": self.marks,
                        "label": label,
                        "host": self.host,
                        "path": self.path,
                        "offset": offset,
                        "matches": self.matches,
                    },
                )
            except Exception as exc:  # a full disk must not break the pane
                self.app.notify(f"journal: {exc}", severity="error")
        self.flush()

    def on_show(self) -> None:
        """Lines that arrived while the tab was hidden could not scroll a zero-size view: catch up."""
        if self.following:
            self.call_after_refresh(self.action_tail)

    def action_toggle_metrics(self) -> None:
        """Give the log lines the whole width (numbers keep counting while hidden)."""
        self.toggle_class("-no-metrics")

    # -- warmup toggle ---------------------------------------------------------------------------------
    def action_toggle_warmup(self) -> None:
        self.include_warmup = not self.include_warmup
        self.render_stats()
        self.render_status()

    # -- following -------------------------------------------------------------------------------------
    def _new_parser(self) -> LogParser:
        profile = self.ctx.profile
        kind = getattr(getattr(profile, "server", None), "kind", None)
        patterns = dict(getattr(profile, "patterns", None) or {})
        try:
            return LogParser(
                kind if kind in ("sglang", "vllm") else "auto",
                patterns=patterns,
                from_start=True,
                scrub=Scrubber.for_profile(profile),  # the profile's secret values never reach the view
            )
        except PatternError as exc:
            self.app.notify(f"profile patterns: {exc}", severity="error") if self.is_attached else None
            return LogParser("auto", from_start=True)

    def action_follow_profile(self) -> None:
        profile = self.ctx.profile
        log_file = getattr(getattr(profile, "server", None), "log_file", None)
        if not log_file:
            self.app.notify("no profile with a log_file: press o to type a path", severity="warning")
            return
        self.start_follow(log_file, this_run=True)

    def server_state_changed(self, state: ServerState, record: ServerRecord | None) -> None:
        """The startup pane launched a server and it got a verdict: follow its log unless busy."""
        if state in (ServerState.READY, ServerState.FAILED):
            self.profile_changed(self.ctx.profile)

    def profile_changed(self, profile: Profile | None) -> None:
        """Follow the (new) profile's log unless busy."""
        if self.state in ("starting", "following", "waiting", "reconnecting"):
            return
        log_file = getattr(getattr(self.ctx.profile, "server", None), "log_file", None)
        if log_file and self.ctx.remote() is not None:
            self.start_follow(log_file, this_run=True)

    def action_open_path(self) -> None:
        box = self.query_one("#logs-path", Input)
        box.add_class("visible")
        box.value = self.path or ""
        box.focus()

    @on(Input.Submitted, "#logs-path")
    def _path_submitted(self, event: Input.Submitted) -> None:
        self.action_close_input()
        if event.value.strip():
            self.start_follow(event.value.strip())

    def start_follow(self, path: str, *, this_run: bool = False) -> None:
        """Follow `path`; with this_run, from where the profile's current server run began
        (launch appends to the log, so earlier runs' numbers must not mix into the stats)."""
        remote = self.ctx.remote()
        if remote is None:
            self.app.notify("no host connected", severity="error")
            return
        self.path = path
        self.host = remote.name
        self.analyzer = Analyzer(self._new_parser())
        for row in self._rows.values():
            row.remove()
        self._rows.clear()
        self.inbox.clear()
        self.pending.clear()
        self.matches = self.dropped = self.received = 0
        self.notice = None
        self.following = True
        self.query_one(LogView).clear()
        self.state = "starting"
        self.render_status()
        self._follow(remote, path, this_run)
        server = getattr(self.ctx.profile, "server", None)
        if this_run and server is not None and getattr(server, "port", None):
            self._watch_prom(remote, server.port, getattr(server, "kind", None))

    def action_stop(self) -> None:
        self.workers.cancel_group(self, "logs-follow")
        self.workers.cancel_group(self, "logs-prom")
        if self.state != "idle":
            self.state = "stopped"
        self.render_status()

    @work(exclusive=True, group="logs-follow", exit_on_error=False)
    async def _follow(self, remote, path: str, this_run: bool = False) -> None:
        parser = self.analyzer.parser
        offset = 0
        name = getattr(self.ctx.profile, "name", None)
        if this_run and name:
            try:
                record = await load_record(remote, name)
            except RemoteError:
                record = None
            if record is not None and record.stopped_at is None:
                offset = record.log_offset
        follower = Follower(remote, path, prefilter=parser.candidate_patterns(), offset=offset)
        self.follower = follower
        slice_start = time.monotonic()
        n = 0
        try:
            async for item in follow_matches(remote, path, parser, follower=follower):
                if isinstance(item, LogEvent):
                    self.feed_event(item)
                else:
                    self.feed_match(item)
                n += 1
                if n % 64 == 0 and time.monotonic() - slice_start > 0.01:
                    # a flood must not starve the UI: give the loop a breath every 10 ms of parsing
                    await asyncio.sleep(0.005)
                    slice_start = time.monotonic()
        except (RemoteError, OSError) as exc:
            self.state = "error"
            self.notice = str(exc)
            self.app.notify(f"{path}: {exc}", severity="error")
        self.render_status()

    # -- the server's /metrics: a second source, shown above the log's numbers --------------------------
    @work(exclusive=True, group="logs-prom", exit_on_error=False)
    async def _watch_prom(self, remote, port: int, kind: str | None) -> None:
        from specdebug.core.metrics import describe_rates, watch_metrics

        box = self.query_one("#metrics-prom", Static)
        try:
            async for ev in watch_metrics(remote, port, kind=kind, interval=1.0):
                text = Text("server /metrics", style="bold")
                if ev.rates is not None:
                    text.append(f" ({'rates over 1 s' if ev.rates.window_s else 'since start'})", style="dim")
                    for label, value, source in describe_rates(ev.rates):
                        text.append(f"\n{label} {value}", style="bold")
                        text.append(f"\n  {source}", style="dim")
                else:
                    text.append(f"\n{ev.message or ev.kind}", style="yellow")
                box.update(text)
                box.add_class("visible")
                self.query_one("#metrics-title", Static).update(Text("log lines"))
        except (RemoteError, OSError) as exc:
            box.update(Text(f"server /metrics: {exc}", style="yellow"))

    # -- context ---------------------------------------------------------------------------------------
    def action_context(self) -> None:
        entry = self.query_one(LogView).current()
        if entry is None or entry.match is None or entry.match.offset is None:
            self.app.notify("select a log line first (up/down)", severity="warning")
            return
        remote = self.ctx.remote()
        if remote is None or self.path is None:
            self.app.notify("no host connected", severity="error")
            return
        m = entry.match
        if self.follower is not None and m.inode is not None and self.follower.inode not in (None, m.inode):
            self.app.notify(
                "that line is from a file that was rotated away; showing the current file", severity="warning"
            )
        self._fetch_context(remote, m.offset)

    @work(exclusive=True, group="logs-context", exit_on_error=False)
    async def _fetch_context(self, remote, offset: int) -> None:
        path = (self.follower.resolved_path if self.follower else None) or self.path or ""
        try:
            lines = await read_context(remote, path, offset)
        except RemoteError as exc:
            self.app.notify(str(exc), severity="error")
            return
        scrub = Scrubber.for_profile(self.ctx.profile)
        lines = [cl.model_copy(update={"text": scrub(cl.text)}) for cl in lines]
        self.app.push_screen(ContextScreen(f"{self.host}:{path} around byte {offset}", lines))


__all__ = ["ContextScreen", "Entry", "LogView", "LogsPane"]
