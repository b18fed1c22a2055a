"""Startup pane: checklist/verdict rendering from fed events (snapshots), bindings, read-only."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from specdebug.core.control.events import GroupChange, HealthChange, Launched, LogLine
from specdebug.core.control.records import ServerRecord
from specdebug.core.control.tracker import StartupTracker
from specdebug.core.profiles import load_profile
from specdebug.core.records import parse_record
from specdebug.tui.context import AppContext
from specdebug.tui.panes.startup import StartupPane
from tests.tui.pilotwait import toasts, until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOG = "/tmp/specdebug/eagle3-3step.log"
T0 = 1_700_000_000.0
P = "[2026-01-01 10:00:00 TP0] "
LINES = [
    (
        0.4,
        "[2026-01-01 10:00:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2-Instruct', tp_size=8)",
    ),
    (0.9, P + "Load weight begin. avail mem=78.00 GB"),
    (
        6.2,
        P
        + "Load weight end. elapsed=5.30 s, type=DeepseekV3ForCausalLM, avail mem=40.00 GB, mem usage=38.00 GB.",
    ),
    (6.3, P + "KV Cache is allocated. #tokens: 400000, KV size: 12.00 GB"),
    (7.1, P + "Capture cuda graph begin. This can take up to several minutes. avail mem=20.00 GB"),
    (8.0, P + "Scheduler hit an exception: Traceback (most recent call last):"),
    (8.0, '  File "/sglang/srt/model_executor/cuda_graph_runner.py", line 300, in __init__'),
    (8.0, "Exception: Capture cuda graph failed: CUDA error: out of memory"),
    (8.0, "Possible solutions:"),
    (8.0, "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)"),
]


class FakeJournal:
    """A journal holding these records (given as their JSON lines, read back as the journal does)."""

    def __init__(self, events):
        self._records = [parse_record({"ts": 1.0, **e}) for e in events]

    def records(self, kinds=None):
        return [e for e in self._records if kinds is None or e.kind in kinds]


HISTORY = [
    {
        "kind": "verdict",
        "verdict": "ready",
        "profile": "eagle3-3step",
        "elapsed_s": 14.0,
        "phases": [
            {"name": n, "at": 0.0, "elapsed_s": s}
            for n, s in [
                ("launch", 0),
                ("args", 0.5),
                ("load_weights", 1),
                ("kv_cache", 6.5),
                ("cuda_graph", 7.2),
                ("http_server", 11),
                ("warmup", 12),
                ("ready", 14),
            ]
        ],
    },
]


def record(profile) -> ServerRecord:
    return ServerRecord(
        profile=profile.name,
        pid=4242,
        pgid=4242,
        port=profile.server.port,
        log_file=LOG,  # fixed: the example's default log is per user, under the box's state folder
        started_at=T0,
    )


def feed(pane: StartupPane, upto: int, *, finish: bool) -> None:
    profile = pane.ctx.profile
    tracker = StartupTracker(
        kind="sglang", started_at=T0, timeout_s=120, profile=profile.name, pid=4242, pgid=4242
    )
    pane.apply(Launched(record=record(profile)))
    pane.apply(GroupChange(pids=[4242, 4250, 4251], at=T0 + 1))
    pane.apply(HealthChange(status=None, at=T0 + 1))
    for dt, line in LINES[:upto]:
        for ev in tracker.feed_line(line, T0 + dt):
            pane.apply(ev)
    if finish:
        for ev in tracker.tick(T0 + 8.4):
            pane.apply(ev)


class StartupApp(App):
    def __init__(
        self, upto: int = len(LINES), finish: bool = True, history: bool = True, ready: bool = False
    ):
        super().__init__()
        self.ready = ready
        profile = load_profile(EXAMPLES / "eagle3-3step.toml")
        self.ctx = AppContext(profile=profile, journal=FakeJournal(HISTORY if history else []))
        self.upto, self.finish = upto, finish

    def compose(self) -> ComposeResult:
        yield StartupPane(self.ctx)

    def on_mount(self) -> None:
        pane = self.query_one(StartupPane)
        if self.ready:
            feed_ready(pane)
        else:
            pane.clock = lambda: T0 + 7.6
            feed(pane, self.upto, finish=self.finish)
        pane.render_view()


def feed_ready(pane: StartupPane) -> None:
    pane.clock = lambda: T0 + 20
    profile = pane.ctx.profile
    tracker = StartupTracker(
        kind="sglang", started_at=T0, timeout_s=120, profile=profile.name, pid=4242, pgid=4242
    )
    pane.apply(Launched(record=record(profile)))
    for dt, line in LINES[:5]:
        for ev in tracker.feed_line(line, T0 + dt):
            pane.apply(ev)
    for ev in tracker.feed_line("[2026-01-01 10:00:00] The server is fired up and ready to roll!", T0 + 12):
        pane.apply(ev)
    for ev in tracker.health(200, T0 + 12.1):
        pane.apply(ev)


def test_startup_pane_failed_snapshot(snap_compare):
    assert snap_compare(StartupApp(), terminal_size=(130, 40))


def test_startup_pane_in_progress_snapshot(snap_compare):
    assert snap_compare(StartupApp(upto=5, finish=False), terminal_size=(130, 40))


def test_startup_pane_ready_without_history_snapshot(snap_compare):
    assert snap_compare(StartupApp(history=False, ready=True), terminal_size=(130, 40))


async def test_state_and_eta():
    app = StartupApp(upto=5, finish=False)
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.pause()
        pane = app.query_one(StartupPane)
        assert pane.state == "starting" and pane.history is not None
        assert "ETA 6.4s" in pane.head_text().plain  # usual 14 s, 7.6 s elapsed
        assert [p.name for p in pane.phases][-1] == "cuda_graph"
        assert len(pane.log_lines) == 5 and isinstance(LogLine(text="x", at=0), LogLine)


async def test_bindings_have_ids_and_readonly_disables_mutations():
    ids = {b.id for b in StartupPane.BINDINGS}
    assert ids == {"startup.launch", "startup.stop", "startup.restart", "startup.attach", "startup.stacks"}
    assert StartupPane.MUTATING_ACTIONS == {"launch", "stop", "restart"}
    app = StartupApp()
    app.ctx.readonly = True
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.pause()
        pane = app.query_one(StartupPane)
        assert pane.check_action("launch", ()) is False
        assert pane.check_action("attach", ()) is True


async def test_launch_without_host_notifies():
    app = StartupApp(finish=False, upto=0)
    async with app.run_test(size=(130, 40)) as pilot:
        pane = app.query_one(StartupPane)
        pane.focus()
        await pilot.press("l")
        assert await until(pilot, lambda: any("no host" in m for m in toasts(app))), toasts(app)


async def test_usually_does_not_count_the_run_shown():
    """After a ready verdict is journaled, "usually N s over K runs" must not count that run."""
    this_run = {**HISTORY[0], "elapsed_s": 12.1, "pid": 4242, "at": T0 + 12.1}
    app = StartupApp(ready=True)
    app.ctx.journal = FakeJournal([*HISTORY, this_run])
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.pause()
        pane = app.query_one(StartupPane)
        pane.load_history()  # what the pane does once the verdict is written
        pane.render_view()
        head = pane.head_text().plain
        assert "usually 14.0s over 1 run)" in head, head
