"""Logs pane: follow the server log on the box, highlight what matters, chart the numbers.

Lines arrive from `specdebug.core.logs.follow_matches` (the same parser as `specdebug scan` and
`grep`). Every match feeds the metric store at once, so stats never drop a sample; the display
path is separate and bounded: matches wait in a ViewBuffer (specdebug.core.logs.viewbuffer), an
80 ms timer moves them into the line view (widgets/logview.py, at most MAX_VIEW lines, rendering
only the visible rows), and a flood only raises the "dropped from view" counter. The numbers
beside the log are widgets/metrics_panel.py; the lines around a match, screens/log_context.py.
This module is the glue: which file to follow, from where, and what the keys do.

A profile's log is followed on its target (`ctx.target()`): every node's log of this run, each on
its node's connection from where the run began (its record's offset), the way `specdebug grep -c
PROFILE --follow` does.  One node is the one-box screen; on a deployment every line carries its
node column (part of the line's text, so the filter `/` narrows to a node too: `^node1`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from specdebug.core.control.events import ServerState
from specdebug.core.control.records import ServerRecord, file_size
from specdebug.core.deployment import Node
from specdebug.core.logs.context import read_context
from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import Follower
from specdebug.core.logs.matches import Match, follow_match_batches, follow_target_logs
from specdebug.core.logs.parser import LogParser, PatternError, PlainRun
from specdebug.core.logs.scan import Analyzer
from specdebug.core.logs.viewbuffer import MAX_VIEW, ViewBuffer
from specdebug.core.profiles import Profile
from specdebug.core.records import MarkRecord
from specdebug.core.sanitize import visible
from specdebug.core.secrets import Scrubber
from specdebug.core.target import Target
from specdebug.engines import ENGINES
from specdebug.remote.api import Remote, RemoteError
from specdebug.tui.context import AppContext
from specdebug.tui.panes.logs_boxes import LogsBoxes
from specdebug.tui.screens.log_context import ContextScreen
from specdebug.tui.widgets.in_turn import TextBox
from specdebug.tui.widgets.logs_status import FOLLOW_STATE, FollowState, LogsStatus, status_text
from specdebug.tui.widgets.logview import Entry, LogView, entry_for_event, entry_for_mark, entry_for_match
from specdebug.tui.widgets.metrics_panel import MetricsPanel
from specdebug.tui.widgets.steady import Steady

FLUSH_S = 0.08
STATS_EVERY_S = 0.5
BEHIND_EVERY_S = 1.0  # how often, while lines arrive, the file's size is asked (one `wc -c`)
NODE_STYLE = Style(color="cyan", bold=True)
SEP = " │ "


def tagged(entry: Entry, node: str, width: int) -> Entry:
    """The entry with its node column in front (highlights move with the text)."""
    name = visible(node)
    head = f"{name:<{width}}{SEP}"
    spans = [(0, len(name), NODE_STYLE)] + [(s + len(head), e + len(head), st) for s, e, st in entry.spans]
    return Entry(entry.kind, head + entry.text, entry.match, entry.style, spans, node=node)


def as_entries(items: list[Entry | LogMatch]) -> list[Entry]:
    """Rows for the view: a match becomes a row (highlights, escapes) only when it is drawn."""
    return [x if isinstance(x, Entry) else entry_for_match(x) for x in items]


class LogsPane(LogsBoxes):
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
        Binding("enter", "submit_input", "Enter", id="logs.submit_input", show=False),
    ]
    IN_TURN_ACTIONS = frozenset({"context"})  # the line under the cursor
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
    """

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(ctx, **kwargs)
        self.analyzer = Analyzer(self._new_parser())
        self.path: str | None = None  # what we follow (as typed / from the profile)
        self.source: str | None = None  # the profile whose log `path` is (None: a path typed with o)
        self.host: str | None = None
        self.follower: Follower | None = None
        self.state = FollowState.IDLE
        self.include_warmup = False
        # what waits to be drawn (matches stay LogMatch until drawn: most of a flood never is)
        self.buffer: ViewBuffer[Entry | LogMatch] = ViewBuffer(MAX_VIEW)
        self.marks = 0
        self.matches = 0
        self.notice: str | None = None
        self.filter_text = ""
        self._stats_at = 0.0
        self._stats_dirty = False
        self.file_size_seen: int | None = None  # the followed file's size, asked while lines flow
        self._size_at = 0.0
        self._sizing = False  # a file-size measurement is running (one at a time)
        self.node_followers: dict[str, Follower] = {}  # on a deployment: each node's follower
        self.followed: Target | None = None  # whose log this run's is (None: a typed path)

    @property
    def following(self) -> bool:
        """The view sticks to the end (False while the user has paused it)."""
        return self.buffer.following

    # -- layout --------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Steady("", id="logs-status")
        for box_id, placeholder in (
            ("logs-input", "regex, e.g. accept|ERROR"),
            ("logs-path", "/var/log/server.log or ~/logs/server.log"),
        ):
            # the filter box reopens with its regex and the cursor at its end (typing adds to it)
            box = TextBox(placeholder=placeholder, id=box_id, select_on_focus=box_id == "logs-path")
            box.border_title = self.INPUT_PROMPTS[box_id]  # the prompt stays when the box has text
            yield box
        with Horizontal(id="logs-body"):
            yield LogView(id="logs-view")
            yield MetricsPanel(id="logs-metrics")

    def on_mount(self) -> None:
        self.render_status()

    # -- feeding (the worker and tests call these) -----------------------------------------------------
    def feed_match(self, m: LogMatch, node: str | None = None, width: int = 0) -> None:
        """Account for a match (stats at once) and queue it for display (a node's: with its column)."""
        self.analyzer.add(m)
        self.matches += 1
        self._stats_dirty = True
        self.buffer.push(m if node is None else tagged(entry_for_match(m), node, width))
        if self._redraw_timer is None:
            self._dirty = True  # one flush FLUSH_S from now takes everything that came meanwhile

    def feed_event(self, ev: LogEvent, node: str | None = None, width: int = 0) -> None:
        self.state = FOLLOW_STATE.get(ev.kind, self.state)
        if ev.kind in ("truncated", "rotated", "fallback", "error"):
            self.notice = f"{ev.kind}: {ev.detail}" if ev.detail else ev.kind
            where = f"{node}:{ev.path}" if node else self.path
            self.app.notify(f"{where}: {self.notice}", severity="error" if ev.kind == "error" else "warning")
        entry = entry_for_event(ev)
        self.buffer.push(entry if node is None else tagged(entry, node, width))
        self._dirty = True

    REDRAW_S = FLUSH_S

    def redraw(self) -> None:
        self.flush()

    def flush(self) -> None:
        """Move queued entries into the view (or pending while paused); refresh stats now and then."""
        self._dirty_flag = False
        if self.buffer.has_incoming:
            batch = self.buffer.drain()
            if batch:
                self.query_one(LogView).add(as_entries(batch), follow=True)
            self.render_status()
        now = time.monotonic()
        if self._stats_dirty:
            if now - self._stats_at >= STATS_EVERY_S:
                self.render_stats()
            else:
                self._dirty = True  # numbers waiting: look again shortly (stops once they are drawn)

    # -- rendering -------------------------------------------------------------------------------------
    def status_text(self) -> Text:
        view = self.query_one(LogView)
        return status_text(
            LogsStatus(
                where=self.where(),
                state=self.state,
                paused=None if self.following else self.buffer.pending_count,
                matches=self.matches,
                dropped=self.buffer.dropped,
                marks=self.marks,
                pack=self.analyzer.parser.pack_name,
                filter_text=self.filter_text,
                hide=view.hide,
                include_warmup=self.include_warmup,
                notice=self.notice,
                behind=self.behind(),
            )
        )

    def where(self) -> str | None:
        """host:path, and whose log it is when it is a profile's (None: nothing followed)."""
        if not self.path:
            return None
        if self.node_followers and self.followed is not None:
            hosts = [n.host for n in self.followed.nodes]
            return f"{len(hosts)} nodes' logs ({', '.join(hosts)}) ({self.source}'s log)"
        where = f"{self.host}:{self.path}" if self.host else self.path
        return where + (f" ({self.source}'s log)" if self.source else "")

    def behind(self) -> int:
        """Bytes of the followed file not read yet: its size when last measured on the box, less
        where the follower has got to (0 once it passes that size)."""
        if self.follower is None or self.file_size_seen is None or self.follower.offset is None:
            return 0
        return max(0, self.file_size_seen - self.follower.offset)

    def render_status(self) -> None:
        self.query_one("#logs-status", Static).update(self.status_text())

    def render_stats(self) -> None:
        self._stats_at = time.monotonic()
        self._stats_dirty = False
        self.query_one(MetricsPanel).show_stats(self.analyzer.store, self.include_warmup)

    # -- user scrolling / pause ------------------------------------------------------------------------
    def on_log_view_user_scrolled(self, event: LogView.UserScrolled) -> None:
        """Scrolling away from the end pauses the view; coming back to the last row follows again."""
        event.stop()
        if event.at_end and not self.following:
            self.action_tail()
        elif not event.at_end and self.following:
            self.buffer.pause()
            self.render_status()

    def action_toggle_pause(self) -> None:
        if self.following:
            self.buffer.pause()
            self.render_status()
        else:
            self.action_tail()

    def action_tail(self) -> None:
        view = self.query_one(LogView)
        waiting = self.buffer.resume()
        if waiting:
            view.add(as_entries(waiting), follow=True)
        else:
            view.follow_end()
        self.render_status()

    # -- marks -----------------------------------------------------------------------------------------
    def action_mark(self, label: str = "") -> None:
        self.marks += 1
        offset = self.follower.offset if self.follower is not None else None
        self.buffer.push(entry_for_mark(self.marks, time.strftime("%H:%M:%S"), label))
        if self.ctx.journal is not None:
            try:
                self.ctx.journal.append(
                    MarkRecord(
                        pane="logs",
                        n=self.marks,
                        label=label,
                        host=self.host,
                        path=self.path,
                        offset=offset,
                        matches=self.matches,
                    )
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
        profile: Profile | None = self.ctx.profile
        kind = profile.server.kind if profile is not None else None
        patterns = dict(profile.patterns) if profile is not None else {}
        try:
            return LogParser(
                kind if kind in ENGINES else "auto",
                patterns=patterns,
                from_start=True,
                scrub=Scrubber.for_profile(profile),  # the profile's secret values never reach the view
            )
        except PatternError as exc:
            self.app.notify(f"profile patterns: {exc}", severity="error") if self.is_attached else None
            return LogParser("auto", from_start=True)

    def action_follow_profile(self) -> None:
        profile: Profile | None = self.ctx.profile
        log_file = profile.server.log_file if profile is not None else ""
        if not log_file:
            self.app.notify("no profile with a log_file: press o to type a path", severity="warning")
            return
        self.start_follow(log_file, this_run=True)

    def server_state_changed(self, state: ServerState, record: ServerRecord | None) -> None:
        """The startup pane launched a server and it got a verdict: follow its log unless busy."""
        if state in (ServerState.READY, ServerState.FAILED):
            self.profile_changed(self.ctx.profile)

    def profile_changed(self, profile: Profile | None) -> None:
        """Another profile was picked: follow its server's log, so no number on screen is another
        server's; a log the user opened by path stays, and the status says whose it is."""
        if profile is None or (self.state.busy and profile.name == self.source):
            return
        if self.state.busy and self.source is None:
            self.notice = f"a typed path, not {profile.name}'s log (f follows it)"
            self.render_status()
            return
        if profile.server.log_file and self.ctx.remote() is not None:
            self.start_follow(profile.server.log_file, this_run=True)
        elif self.state.busy:
            self.action_stop()
            self.notice = f"{profile.name} has no log_file: o opens a path"
            self.render_status()

    def start_follow(self, path: str, *, this_run: bool = False) -> None:
        """Follow `path` on the selected host; with this_run, the profile's log on every node of its
        target, from where its current server run began (launch appends to the log, so earlier
        runs' numbers must not mix into the stats)."""
        target = self.ctx.target() if this_run else None
        reachable = target.reachable() if target is not None else []
        remote = target.remote(reachable[0]) if target is not None and reachable else self.ctx.remote()
        if remote is None or (this_run and not reachable):
            self.app.notify("no host connected", severity="error")
            return
        if target is not None and target.unreachable:
            self.app.notify(
                f"{target.profile.name}: no connection to {', '.join(target.unreachable)} here: "
                "its log there is not followed",
                severity="warning",
            )
        self.path = path
        self.host = remote.name
        self.followed = target
        self.source = target.profile.name if target is not None else None
        self.analyzer = Analyzer(self._new_parser())
        self.query_one(MetricsPanel).clear_rows()
        self.buffer.clear()
        self.matches = 0
        self.notice = None
        self.file_size_seen = None
        self.query_one(LogView).clear()
        self.state = FollowState.STARTING
        self.render_status()
        self.node_followers = {}
        self.follower = None
        self._follow(remote, path, target)
        server = target.leader.profile.server if target is not None else None
        if target is not None and server is not None and server.port and target.leader in reachable:
            # the leader serves, at its --host (core.fingerprint.server_host)
            self._watch_prom(target.leader_remote, server.port, server.kind, server.listen_host)

    def action_stop(self) -> None:
        self.workers.cancel_group(self, "logs-follow")
        self.workers.cancel_group(self, "logs-prom")
        if self.state is not FollowState.IDLE:
            self.state = FollowState.STOPPED
        self.render_status()

    @work(exclusive=True, group="logs-follow", exit_on_error=False)
    async def _follow(self, remote: Remote, path: str, target: Target | None) -> None:
        """A typed path on the selected host, or every reachable node's log of the target at once
        (`follow_target_logs`, as `grep -c PROFILE --follow`: each from its run's start; a node whose
        log cannot be read says so while the others go on)."""
        if target is None:
            follower = Follower(remote, path, prefilter=self.analyzer.parser.candidate_patterns(), offset=0)
            self.follower = follower
            try:
                await self._feed_blocks(
                    remote,
                    follower,
                    follow_match_batches(remote, path, self.analyzer.parser, follower=follower),
                )
            except (RemoteError, OSError) as exc:
                self._follow_failed(path, exc, None, 0)
            return self.render_status()
        multi = target.multi  # a deployment's lines carry their node's column
        width = max(len(visible(n.host)) for n in target.nodes) if multi else 0
        parsers = iter([self.analyzer.parser])  # a parser keeps its stream's state: one per node

        def make_parser() -> LogParser:
            return next(parsers, None) or self._new_parser()

        def on_follower(node: Node, follower: Follower) -> None:
            if self.follower is None:
                self.follower = follower  # the first node's (the leader's) marks and measures
            if multi:  # a line's node column finds its follower (the context of a line)
                self.node_followers[node.host] = follower

        stream = follow_target_logs(target, make_parser, this_run=True, on_follower=on_follower)
        slice_start = time.monotonic()
        n = 0
        try:
            async for node, got in stream:
                tag = node.host if multi else None
                if isinstance(got, RemoteError):
                    self._follow_failed(node.profile.server.log_file, got, tag, width)
                    continue
                for item in got:
                    self._feed(item, tag, width)
                n += len(got)
                if n >= 64 and time.monotonic() - self._size_at > BEHIND_EVERY_S and self.follower:
                    self._size_at = time.monotonic()  # while lines flow: how much is still unread?
                    self._measure_size(target.remote(node), self.follower)
                if time.monotonic() - slice_start > 0.01:
                    # a flood must not starve the UI (nor the other nodes): a breath every 10 ms of parsing
                    await asyncio.sleep(0.005)
                    slice_start = time.monotonic()
        finally:
            await stream.aclose()
        self.render_status()

    def _feed(self, item: Match | PlainRun | LogEvent, node: str | None, width: int) -> None:
        if isinstance(item, LogEvent):
            self.feed_event(item, node, width)
        elif isinstance(item, LogMatch):  # the pane parses with a pack: never a pack-less PlainMatch
            self.feed_match(item, node, width)

    async def _feed_blocks(
        self, remote: Remote, follower: Follower, blocks: AsyncIterator[list[Match | PlainRun | LogEvent]]
    ) -> None:
        """A typed path's blocks into the view, measuring how far behind the file's end it is."""
        slice_start = time.monotonic()
        async for block in blocks:
            for item in block:
                self._feed(item, None, 0)
            if time.monotonic() - self._size_at > BEHIND_EVERY_S:
                self._size_at = time.monotonic()
                self._measure_size(remote, follower)
            if time.monotonic() - slice_start > 0.01:
                await asyncio.sleep(0.005)
                slice_start = time.monotonic()

    def _follow_failed(self, path: str, exc: Exception, node: str | None, width: int) -> None:
        """The followed log cannot be read: the status says it; a deployment's node on its own line."""
        if node is not None:
            self.feed_event(LogEvent(kind="error", path=path, detail=str(exc)), node, width)
            return
        self.state = FollowState.ERROR
        self.notice = str(exc)
        self.app.notify(f"{path}: {exc}", severity="error")

    def _measure_size(self, remote: Remote, follower: Follower) -> None:
        """How big the file is now (how far behind the pane reads), one measurement at a time: on a
        loaded box one takes longer than BEHIND_EVERY_S, and a new one cancelling it (the old
        `exclusive` worker) meant none ever finished and the pane never said it was behind."""
        if self._sizing:
            return
        self._sizing = True
        self._size_worker(remote, follower)

    @work(group="logs-size", exit_on_error=False)
    async def _size_worker(self, remote: Remote, follower: Follower) -> None:
        try:
            size = await file_size(remote, follower.resolved_path or follower.path)
        finally:
            self._sizing = False
        if size is not None and follower is self.follower:
            self.file_size_seen = size
            self.render_status()

    # -- the server's /metrics: a second source, shown above the log's numbers --------------------------
    @work(exclusive=True, group="logs-prom", exit_on_error=False)
    async def _watch_prom(self, remote: Remote, port: int, kind: str | None, host: str = "127.0.0.1") -> None:
        from specdebug.core.metrics import watch_metrics

        panel = self.query_one(MetricsPanel)
        try:
            async for ev in watch_metrics(remote, port, kind=kind, interval=1.0, host=host):
                panel.show_prom(ev)
        except (RemoteError, OSError) as exc:
            panel.show_prom_error(exc)

    # -- context ---------------------------------------------------------------------------------------
    def action_context(self) -> None:
        entry = self.query_one(LogView).current()
        if entry is None or entry.match is None or entry.match.offset is None:
            self.app.notify("select a log line first (up/down)", severity="warning")
            return
        remote = self.ctx.remotes.get(entry.node) if entry.node else self.ctx.remote()
        follower = self.node_followers.get(entry.node) if entry.node else self.follower
        if remote is None or self.path is None:
            self.app.notify("no host connected", severity="error")
            return
        m = entry.match
        if follower is not None and m.inode is not None and follower.inode not in (None, m.inode):
            self.app.notify(
                "that line is from a file that was rotated away; showing the current file", severity="warning"
            )
        path = (follower.resolved_path or follower.path) if follower is not None else self.path
        self._fetch_context(remote, m.offset, path or "")

    @work(exclusive=True, group="logs-context", exit_on_error=False)
    async def _fetch_context(self, remote: Remote, offset: int, path: str) -> None:
        try:
            lines = await read_context(remote, path, offset)
        except RemoteError as exc:
            self.app.notify(str(exc), severity="error")
            return
        scrub = Scrubber.for_profile(self.ctx.profile)
        lines = [cl.model_copy(update={"text": scrub(cl.text)}) for cl in lines]
        self.app.push_screen(ContextScreen(f"{remote.name}:{path} around byte {offset}", lines))


__all__ = ["MAX_VIEW", "ContextScreen", "Entry", "LogView", "LogsPane", "entry_for_event"]
