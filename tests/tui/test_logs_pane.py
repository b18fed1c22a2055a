"""Logs pane: rendering from fed matches (snapshots), filter, pause/pending, marks, context, flood,
and a live follow through the real on-box agent run locally."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Input

from specdebug.core.control.events import ServerState
from specdebug.core.logs.events import LogEvent
from specdebug.core.logs.parser import LogParser
from specdebug.core.profiles import Profile
from specdebug.tui.context import AppContext
from specdebug.tui.panes.logs import MAX_VIEW, ContextScreen, LogsPane, LogView
from specdebug.tui.widgets.metrics_panel import MetricsPanel
from tests.tui.pilotwait import toasts, until
from tests.unit.test_log_follow_local import LocalRemote

P = "[2026-01-15 12:00:{:02d} TP0] "
READY = "[2026-01-15 12:00:10] The server is fired up and ready to roll!"


def decode(i: int, al: float, tp: float) -> str:
    return (
        P.format(i) + f"Decode batch, #running-req: {1 + i % 4}, #token: {900 + i}, token usage: 0.0{i % 9}, "
        f"accept len: {al:.2f}, accept rate: {al / 4:.2f}, cuda graph: True, gen throughput (token/s): {tp:.2f}, "
        f"#queue-req: {i % 3}"
    )


LINES = [
    "[2026-01-15 12:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=1)",
    P.format(1) + "Load weight begin. avail mem=78.00 GB",
    P.format(2) + "Capture cuda graph begin. This can take up to several minutes. avail mem=30.00 GB",
    P.format(3)
    + "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, "
    "#queue-req: 0, cuda graph: False, input throughput (token/s): 12.50",
    decode(4, 1.00, 0.39),
    READY,
    *[decode(i, 2.0 + (i % 5) * 0.3, 100.0 + i * 7) for i in range(11, 40)],
    "gpubox:4242:4250 [0] NCCL INFO NCCL_PROTO set by environment to Simple",
    P.format(41) + "Scheduler hit an exception: Traceback (most recent call last):",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
]


class FakeJournal:
    def __init__(self) -> None:
        self.items: list[tuple[str, dict]] = []

    def append(self, record, *, sync: bool = False):
        self.items.append((record.kind, record.to_json()))
        return record


def feed_lines(pane: LogsPane, lines: list[str], offset: int = 0) -> None:
    parser = pane.analyzer.parser
    pane.feed_event(LogEvent(kind="opened", path="/var/log/sglang.log", offset=0, inode=7))
    for line in lines:
        m = parser.parse(line, offset=offset, inode=7)
        offset += len(line) + 1
        if m is not None:
            pane.feed_match(m)


class LogsApp(App):
    def __init__(
        self, lines: list[str] = LINES, remote=None, journal=None, filter_text: str = "", hide: bool = True
    ) -> None:
        super().__init__()
        remotes = {"gpubox": remote} if remote is not None else {}
        self.ctx = AppContext(remotes=remotes, journal=journal)
        self.lines = lines
        self.filter_text, self.hide = filter_text, hide

    def compose(self) -> ComposeResult:
        yield LogsPane(self.ctx)

    def on_mount(self) -> None:
        pane = self.query_one(LogsPane)
        if self.lines:
            pane.path, pane.host, pane.state = "/var/log/sglang.log", "gpubox", "following"
            feed_lines(pane, self.lines)
            pane.flush()
            pane.render_stats()
        if self.filter_text:
            pane.apply_filter(self.filter_text, hide=self.hide)
        self.screen.set_focus(pane.query_one(LogView))  # now, not after a refresh: keys may follow at once


def test_logs_pane_snapshot(snap_compare):
    assert snap_compare(LogsApp(), terminal_size=(150, 40))


def test_logs_pane_filter_highlight_snapshot(snap_compare):
    assert snap_compare(LogsApp(filter_text=r"accept len: 2\.\d+", hide=False), terminal_size=(150, 40))


def test_logs_pane_empty_snapshot(snap_compare):
    assert snap_compare(LogsApp(lines=[]), terminal_size=(100, 20))


async def test_stats_exclude_warmup_and_toggle() -> None:
    app = LogsApp()
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(LogsPane)
        summ = pane.analyzer.store.summary()
        assert summ["accept_len"]["n"] == 29  # the decode line before "fired up" is warmup
        rows = pane.query_one(MetricsPanel).rows
        assert "accept_len" in rows and "verify_ms" not in rows
        assert pane.analyzer.store.events["error"] == 2 and pane.analyzer.store.events["nccl_env"] == 1
        await pilot.press("w")
        assert pane.include_warmup
        assert "in stats" in pane.status_text().plain


async def test_filter_hide_and_highlight() -> None:
    app = LogsApp()
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(LogsPane)
        view = pane.query_one(LogView)
        total = len(view.rows)
        await pilot.press("slash")
        await pilot.press(*"OutOfMem")
        assert len(view.rows) == 2  # the match + the "following" notice (notices always shown)
        await pilot.press("enter")  # keep the filter, back to the lines
        assert app.focused is view
        await pilot.press("h")  # highlight only
        assert len(view.rows) == total and not view.hide
        await pilot.press("h")
        assert len(view.rows) == 2
        assert pane.apply_filter("(unclosed") is False  # incomplete regex keeps the last one
        assert pane.filter_text == "OutOfMem"


async def test_scroll_up_pauses_and_counts_pending() -> None:
    app = LogsApp()
    async with app.run_test(size=(150, 20)) as pilot:
        pane = app.query_one(LogsPane)
        view = pane.query_one(LogView)
        await pilot.press("up", "up")
        assert not pane.following
        before = len(view.rows)
        feed_lines(pane, [decode(50 + i, 3.0, 10.0) for i in range(7)], offset=10_000)
        pane.flush()
        assert len(view.rows) == before and pane.buffer.pending_count == 8  # 7 lines + the notice
        assert "PAUSED 8 pending" in pane.status_text().plain
        await pilot.press("end")
        assert pane.following and not pane.buffer.pending and len(view.rows) == before + 8
        assert view.cursor == len(view.rows) - 1
        await pilot.press("p")
        assert not pane.following
        await pilot.press("p")
        assert pane.following


async def test_mark_inserts_line_and_journals() -> None:
    journal = FakeJournal()
    app = LogsApp(journal=journal)
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(LogsPane)
        await pilot.press("m")
        view = pane.query_one(LogView)
        assert view.entries[-1].kind == "mark" and "mark 1" in view.entries[-1].text
        assert journal.items[0][0] == "mark" and journal.items[0][1]["n"] == 1
        assert journal.items[0][1]["path"] == "/var/log/sglang.log"


async def test_flood_is_bounded_and_counted() -> None:
    app = LogsApp(lines=[])
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(LogsPane)
        parser = LogParser("sglang")
        m = parser.parse(decode(20, 2.5, 99.0), offset=0)
        n = 3 * MAX_VIEW
        for _ in range(n):
            pane.feed_match(m)
        pane.flush()
        view = pane.query_one(LogView)
        assert len(view.entries) <= MAX_VIEW
        assert pane.buffer.dropped == n - MAX_VIEW
        assert pane.analyzer.store.summary()["accept_len"]["n"] == n  # stats keep every sample
        await pilot.pause()
        assert "dropped from view" in pane.status_text().plain


async def test_bindings_have_ids() -> None:
    ids = {b.id for b in LogsPane.BINDINGS}
    assert {"logs.follow", "logs.filter", "logs.mark", "logs.pause", "logs.context", "logs.tail"} <= ids
    assert all(b.id for b in LogView.BINDINGS) and LogsPane.MUTATING_ACTIONS == frozenset()


async def test_follow_typed_path_then_context(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    body = [f"[2026-01-15 12:00:{i:02d} TP0] chatter {i}" for i in range(40)]
    body[30] = decode(30, 2.75, 50.0)
    log.write_text("\n".join(body) + "\n")
    remote = LocalRemote()
    app = LogsApp(lines=[], remote=remote)
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(LogsPane)
        await pilot.press("o")
        box = pane.query_one("#logs-path", Input)
        assert app.focused is box
        box.value = str(log)
        await pilot.press("enter")
        await until(pilot, lambda: pane.matches >= 1 and pane.query_one(LogView).current() is not None, 30)
        assert pane.matches == 1 and pane.state == "following"
        assert pane.analyzer.store.summary()["accept_len"]["last"] == 2.75
        with open(log, "a") as f:
            f.write(decode(41, 3.25, 60.0) + "\n")
        await until(pilot, lambda: pane.matches >= 2, 30)
        assert pane.matches == 2
        pane.flush()
        view = pane.query_one(LogView)
        await pilot.press("up")
        assert view.current().match.metrics["accept_len"] == 2.75
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ContextScreen), 30)
        screen = app.screen
        assert isinstance(screen, ContextScreen)
        assert [c.text for c in screen.lines if c.target] == [body[30]]
        assert screen.lines[0].text == body[10]
        await pilot.press("escape")
        await pilot.press("x")
        assert await until(pilot, lambda: pane.state == "stopped"), pane.state


async def test_follow_profile_without_profile_warns() -> None:
    app = LogsApp(lines=[])
    async with app.run_test(size=(100, 20)) as pilot:
        await pilot.press("f")
        assert await until(pilot, lambda: any("log_file" in m for m in toasts(app))), toasts(app)


async def test_server_ready_starts_following_profile_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(READY + "\n" + decode(12, 2.5, 10.0) + "\n")
    remote = LocalRemote()
    remote.state_dir = str(tmp_path / "servers")  # no record of this run: follow from the start
    app = LogsApp(lines=[], remote=remote)
    app.ctx.profile = Profile.model_validate(
        {"name": "t", "server": {"argv": ["true"], "kind": "sglang", "log_file": str(log)}}
    )
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(LogsPane)
        pane.server_state_changed(ServerState.STOPPED, None)
        assert pane.state == "idle"
        pane.server_state_changed(ServerState.READY, None)
        await until(pilot, lambda: pane.matches >= 2, 30)
        assert pane.path == str(log) and pane.analyzer.parser.pack_name == "sglang"
        assert pane.analyzer.store.summary()["accept_len"]["n"] == 1
        pane.server_state_changed(ServerState.READY, None)  # already following: no restart
        assert pane.matches == 2


async def test_refollow_after_pause_and_stop_resumes_live_view(tmp_path: Path) -> None:
    """Up (pause), x (stop), f (follow again): the view follows again and End always resumes."""
    log = tmp_path / "server.log"
    log.write_text("\n".join([READY, *[decode(i, 2.5, 90.0) for i in range(60)]]) + "\n")
    remote = LocalRemote()
    remote.state_dir = str(tmp_path / "servers")
    app = LogsApp(lines=[], remote=remote)
    app.ctx.profile = Profile.model_validate(
        {"name": "t", "server": {"argv": ["true"], "kind": "sglang", "log_file": str(log)}}
    )
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(LogsPane)
        pane.start_follow(str(log))
        await until(pilot, lambda: pane.matches >= 60, 30)
        await pilot.pause(0.3)  # let the last scroll-to-end settle
        pane.query_one(LogView).focus()
        await pilot.press("up")
        await pilot.pause(0.1)
        assert not pane.following, (pane.matches, len(pane.query_one(LogView).rows), app.focused)
        pane.action_stop()
        pane.start_follow(str(log))
        await until(pilot, lambda: pane.matches >= 60, 30)
        await pilot.pause(0.2)
        assert pane.following, "a fresh follow must not come up paused"
        pane.buffer.pause()  # paused with whatever is in view: End resumes
        await pilot.press("end")
        await pilot.pause(0.1)
        assert pane.following
