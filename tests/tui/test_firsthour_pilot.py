"""Issue 11, section 2 (the TUI, a new user's first hour), driven with Pilot: what the tmux tests
need not repeat.  Each test names the point it covers."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import httpx
from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Input, Static

from specdebug.core.control.actions import ServerStatus
from specdebug.core.control.records import ServerRecord
from specdebug.core.control.tracker import startup_history
from specdebug.core.env.report import build_report
from specdebug.core.logs.events import LogEvent
from specdebug.core.profiles import load_profile
from specdebug.core.records import BenchResultRecord, MarkRecord
from specdebug.remote.api import RunResult
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.panes.bench import BenchPane
from specdebug.tui.panes.env import EnvPane
from specdebug.tui.panes.logs import LogsPane, LogView, entry_for_event
from specdebug.tui.panes.startup import StartupPane
from specdebug.tui.screens.help import HelpScreen
from tests.boxes import TableBox
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import until
from tests.tui.test_bench_pane import fake_results
from tests.tui.test_env_pane import PROCS, QUERY, FakeRemote, files
from tests.tui.test_startup_pane import HISTORY, T0, FakeJournal, StartupApp, feed_ready

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROFILE = EXAMPLES / "eagle3-3step.toml"


def rendered(widget: Static) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def notes(app) -> list[str]:
    """Every toast the app raised: those `recording` kept (a toast expires after 5 s, and a stall of
    a loaded machine can be longer than that), else the ones still shown."""
    said = getattr(app, "said_in_test", None)
    return list(said) if said is not None else [str(n.message) for n in app._notifications]  # noqa: SLF001


def recording(app: SpecdebugApp) -> SpecdebugApp:
    said: list[str] = []
    notify = app.notify

    def record(message, **kw):
        said.append(str(message))
        return notify(message, **kw)

    app.notify = record  # type: ignore[method-assign]
    app.said_in_test = said  # type: ignore[attr-defined]
    return app


async def settle(pilot, n: int = 3) -> None:
    for _ in range(n):
        await pilot.pause()


async def show(pilot, key: str, pane_cls) -> None:
    """Press a tab's number key and wait until focus is inside that pane.  A key pressed while the
    tabs are still being set up (a loaded machine, right after start) is undone by their first
    activation, so it is pressed again: pressing a shown tab's key is harmless."""
    for _ in range(5):
        await pilot.press(key)
        if await until(pilot, lambda: inside(pilot.app, pane_cls), 6):
            return
    raise AssertionError(f"focus never reached {pane_cls.__name__}: {pilot.app.focused}")


def app_with_profile(**kw) -> SpecdebugApp:
    ctx = AppContext(
        remotes={"gpubox": StillRemote("gpubox")},
        selected="gpubox",
        profile=load_profile(PROFILE),
        profile_path=PROFILE,
        **kw,
    )
    return recording(SpecdebugApp(ctx))


# -- reopening while the server runs --------------------------------------------------------------


def running_status(profile, health: int | None) -> ServerStatus:
    record = ServerRecord(
        profile=profile.name,
        pid=4242,
        pgid=4242,
        port=profile.server.port,
        log_file="/tmp/x.log",
        started_at=T0,
    )
    return ServerStatus(
        profile=profile.name,
        state="running",
        record=record,
        pids=[4242, 4250],
        port=record.port,
        health=health,
    )


class EventsApp(StartupApp):
    """The startup pane alone, recording the server events it tells the app."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.seen: list[str] = []

    def on_pane_server_state_changed(self, event: Pane.ServerStateChanged) -> None:
        self.seen.append(event.state)


async def test_found_running_server_shows_ready_and_tells_the_other_panes() -> None:
    app = EventsApp(upto=0, finish=False)
    async with app.run_test(size=(130, 40)) as pilot:
        pane = app.query_one(StartupPane)
        pane.apply_status(running_status(pane.profile, 200))
        await settle(pilot)
        head = pane.head_text().plain
        assert pane.state == "ready" and "READY" in head and "found running" in head
        assert "PID 4242" in head and "health 200" in head
        assert "found already running" in str(pane.phases_view())
        assert app.seen == ["ready"]  # logs and env follow this server without a key
        pane.apply_status(running_status(pane.profile, None))
        assert pane.state == "running" and "RUNNING" in pane.verdict_text().plain


async def test_found_server_still_starting_turns_ready_when_healthy(monkeypatch) -> None:
    from specdebug.tui.panes import startup as pane_module

    async def liveness(remote, record, profile):
        return [4242], 200

    monkeypatch.setattr(pane_module.server_control, "liveness", liveness)
    app = StartupApp(upto=0, finish=False)
    app.ctx.remotes = {"box": StillRemote("box")}  # the target: the profile on this (frozen) box
    async with app.run_test(size=(130, 40)) as pilot:
        pane = app.query_one(StartupPane)
        pane.workers.cancel_group(pane, "startup-run")  # its status check waits on a box that never answers
        pane.MONITOR_S = 0.05
        pane.apply_status(running_status(pane.profile, None))
        assert pane.state == "running"
        task = asyncio.create_task(pane._watch_live(pane.ctx.target(), pane.watched()))  # noqa: SLF001
        await until(pilot, lambda: pane.state == "ready", 30)
        task.cancel()
        assert pane.state == "ready"


# -- attaches do not feed the ETA ------------------------------------------------------------------

ATTACH = [
    {
        "kind": "launch",
        "profile": "eagle3-3step",
        "pid": 5000,
        "pgid": 4990,
        "port": 30000,
        "log_file": "/var/log/sglang.log",
        "started_at": T0 + 100,
        "attached": True,
    },
    {
        "kind": "verdict",
        "verdict": "ready",
        "profile": "eagle3-3step",
        "pid": 5000,
        "at": T0 + 100.1,
        "elapsed_s": 0.1,
        "phases": [
            {"name": "launch", "at": 0.0, "elapsed_s": 0},
            {"name": "ready", "at": 0.0, "elapsed_s": 0.1},
        ],
    },
]


async def test_eta_counts_only_real_launches() -> None:
    app = StartupApp(upto=0, finish=False)
    app.ctx.journal = FakeJournal(HISTORY + ATTACH)
    async with app.run_test(size=(130, 40)) as pilot:
        await settle(pilot)
        pane = app.query_one(StartupPane)
        pane.load_history()
        assert "usually 14.0s over 1 run)" in pane.head_text().plain


def test_eta_keeps_a_real_launch_that_reuses_an_attached_pid() -> None:
    real = {**HISTORY[0], "pid": 5000, "at": T0 + 514.0}  # started at T0+500, long after the attach
    hist = startup_history(FakeJournal(ATTACH + [real]).records(), "eagle3-3step")
    assert hist is not None and hist.runs == 1 and hist.expected_total_s == 14.0


# -- the env pane follows the profile ---------------------------------------------------------------


def NoRecordRemote() -> TableBox:
    """The fake box of the env tests, with no server state files (box process control: "missing")."""
    return FakeRemote(run_answer=RunResult(0, b'{"state": "missing"}'), box_ops={"*": {"state": "missing"}})


async def test_env_pane_follows_profile_switch() -> None:
    """No profile: a labelled box-wide look.  A profile whose server is not running: "not running",
    never the box's other matching processes as its workers (issue 38); `a` asks for the look."""
    ctx = AppContext(remotes={"gpubox": NoRecordRemote()}, selected="gpubox", profile_choices=[PROFILE])
    app = SpecdebugApp(ctx, panes=[EnvPane])
    async with app.run_test(size=(150, 42)) as pilot:
        await app.workers.wait_for_complete()
        await settle(pilot)
        pane = app.query_one(EnvPane)
        assert pane.report is not None and pane.report.expected_source == "launcher pid 200"
        assert pane.report.box_wide and pane.report.summary.verdict == "box-wide look"
        app._profile_picked(PROFILE)  # noqa: SLF001  (what enter in the P picker does)
        await settle(pilot)
        await app.workers.wait_for_complete()
        await settle(pilot)
        verdict = str(pane.query_one("#env-verdict").render())
        assert pane.report is None and pane.reports == [] and verdict.startswith("not running"), verdict
        assert "eagle3-3step is not running on gpubox" in str(pane.query_one("#env-how").render())
        pane.action_all_matching()
        await settle(pilot)
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert pane.report is not None and pane.report.box_wide
        assert pane.report.expected_source == "profile eagle3-3step" and pane.report.summary.ok is None


def test_env_hint_names_no_cli_flags() -> None:
    from specdebug.tui.panes.env import tui_warnings

    query = QUERY.model_copy(update={"expected": {}, "expected_source": "profile baseline"})
    report = build_report(query, PROCS, files(), [])
    shown = " ".join(tui_warnings(report))
    assert "no expected variables" in shown and "P picks another profile" in shown
    assert "--expect" not in shown and "-c PROFILE" not in shown


# -- pane keys stay where focus goes; read-only says so ---------------------------------------------


async def palette(pilot, entry: str) -> None:
    """Pick `entry` in the command palette, waiting for its search (slow under load)."""
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette), 30)
    await pilot.press(*entry)

    def offered() -> bool:
        hits = pilot.app.screen.query_one(CommandList)
        return hits.highlighted is not None and entry in str(
            hits.get_option_at_index(hits.highlighted).prompt
        )

    assert await until(pilot, offered, 30), f"palette never offered {entry!r}"
    await pilot.press("enter")
    await settle(pilot, 6)


def inside(app, pane_cls) -> bool:
    focused = app.focused
    pane = app.query_one(pane_cls)
    return focused is not None and (focused is pane or pane in focused.ancestors)


async def test_pane_keys_survive_tab_resize_and_same_tab_key() -> None:
    app = app_with_profile()
    async with app.run_test(size=(150, 45)) as pilot:
        await show(pilot, "3", LogsPane)
        for _ in range(4):
            await pilot.press("tab")
            await settle(pilot)
            assert inside(app, LogsPane), app.focused
            assert "f" in app.screen.active_bindings
        await pilot.press("3")  # the tab already shown
        await settle(pilot)
        assert inside(app, LogsPane)
        await pilot.resize_terminal(100, 30)
        await settle(pilot)
        await pilot.resize_terminal(150, 45)
        await settle(pilot)
        assert inside(app, LogsPane) and "f" in app.screen.active_bindings


async def test_readonly_keys_and_palette_say_read_only() -> None:
    app = app_with_profile(readonly=True)
    async with app.run_test(size=(150, 45)) as pilot:
        await show(pilot, "2", StartupPane)
        assert "l" not in app.screen.active_bindings  # not offered in the footer
        await pilot.press("l")
        await settle(pilot)
        assert "read-only seat: Launch would change the box" in notes(app)
        await palette(pilot, "Startup: Restart")
        assert "read-only seat: Restart would change the box" in notes(app)
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert any("Launch (disabled: read-only)" == row[2] for row in app.screen.rows)


# -- second-press confirmation ------------------------------------------------------------------------


async def test_stop_confirmation_says_its_window() -> None:
    app = app_with_profile()
    async with app.run_test(size=(150, 45)) as pilot:
        pane = app.query_one(StartupPane)
        pane.workers.cancel_group(pane, "startup-run")  # the fake host never connects
        feed_ready(pane)
        await show(pilot, "2", StartupPane)
        await pilot.press("x")
        await settle(pilot)
        assert any("press x again within 3 s to stop eagle3-3step" == n for n in notes(app))
        assert pane.state == "ready"


async def test_palette_restart_goes_through_the_confirmation() -> None:
    app = app_with_profile()
    async with app.run_test(size=(150, 45)) as pilot:
        pane = app.query_one(StartupPane)
        pane.workers.cancel_group(pane, "startup-run")  # the fake host never connects
        feed_ready(pane)
        await palette(pilot, "Startup: Restart")
        asked = "press R again (or pick it in the palette again) within 3 s to restart eagle3-3step"
        # the palette runs the command after its own messages: slow under load
        await until(pilot, lambda: asked in notes(app), 30)
        assert asked in notes(app), notes(app)
        assert pane.state == "ready"  # nothing was stopped


# -- compare keeps the table's direction --------------------------------------------------------------


async def test_compare_goes_from_earlier_or_baseline_to_the_other() -> None:
    app = SpecdebugApp(AppContext(remotes={"gpubox": StillRemote("gpubox")}), panes=[BenchPane])
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BenchPane)
        pane.show_results(fake_results(), baseline=0)
        table = app.query_one("#bench-table", DataTable)
        table.focus()
        table.move_cursor(row=2)  # #3 first
        await pilot.press("c", "up", "c")  # then #2
        await settle(pilot)
        assert pane.compared == (2, 3)
        panel = rendered(app.query_one("#bench-compare", Static))
        assert "from #2 eagle-2step-nccl" in panel and "to #3 eagle-3step" in panel
        assert "-36.0%" in panel and "+56.2%" in panel  # tok/s down, ITL up: #3 vs #2
        table.move_cursor(row=2)
        await pilot.press("c")
        table.move_cursor(row=0)  # then the baseline
        await pilot.press("c")
        await settle(pilot)
        assert pane.compared == (1, 3)


def test_history_compare_uses_the_same_direction(tmp_path: Path, capsys) -> None:
    from specdebug.cli import main
    from specdebug.core.journal import Journal

    journal = Journal(tmp_path / "s")
    for res in fake_results():
        journal.append(BenchResultRecord(result=res), sync=True)
    assert main(["history", "--session", str(tmp_path / "s"), "--compare", "3", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("from #2 eagle-2step-nccl -> to #3 eagle-3step")
    assert "-36.0%" in out


# -- polish ------------------------------------------------------------------------------------------


async def test_bench_failure_is_one_named_toast(monkeypatch) -> None:
    from specdebug.core.bench import runner as bench_module  # the pane's target_bench_events runs it

    async def boom(*args, **kwargs):
        raise httpx.ReadError("")
        yield  # an async generator, as bench_events

    monkeypatch.setattr(bench_module, "bench_events", boom)
    app = app_with_profile()
    async with app.run_test(size=(150, 40)) as pilot:
        await show(pilot, "5", BenchPane)
        await pilot.press("b")
        await settle(pilot, 6)
        shown = [n for n in notes(app) if "bench" in n]
        assert shown == ["benchmark failed: ReadError"], shown


async def test_bench_cancel_is_one_toast(monkeypatch) -> None:
    from specdebug.core.bench import runner as bench_module  # the pane's target_bench_events runs it

    async def forever(*args, **kwargs):
        await asyncio.Event().wait()
        yield  # an async generator, as bench_events

    monkeypatch.setattr(bench_module, "bench_events", forever)
    app = app_with_profile()
    async with app.run_test(size=(150, 40)) as pilot:
        await show(pilot, "5", BenchPane)
        await pilot.press("b")
        await settle(pilot)
        assert app.query_one(BenchPane).progress is not None
        await pilot.press("x", "x")
        await settle(pilot, 6)
        shown = [n for n in notes(app) if n.startswith("benchmark")]
        assert shown == ["benchmark cancelled (nothing recorded)"], shown


async def test_input_boxes_have_prompts_and_the_footer_fits_typing() -> None:
    app = app_with_profile()
    async with app.run_test(size=(150, 40)) as pilot:
        await show(pilot, "3", LogsPane)
        await pilot.press("slash")
        await settle(pilot)
        box = app.focused
        assert isinstance(box, Input) and box.id == "logs-input"
        assert "filter" in str(box.border_title) and "Enter" in str(box.border_title)
        bindings = app.screen.active_bindings
        assert "f" not in bindings and "slash" not in bindings  # letters are text now
        assert bindings["escape"].binding.description == "Close"
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.focused, LogView) and "f" in app.screen.active_bindings
        assert "escape" not in app.screen.active_bindings
        await pilot.press("o")
        await settle(pilot)
        assert app.focused.id == "logs-path" and "path" in str(app.focused.border_title)


def test_missing_file_notice_says_waiting_once() -> None:
    ev = LogEvent(kind="missing", path="/x.log", detail="no such file (waiting for it)")
    text = entry_for_event(ev).text
    assert text.count("waiting") == 1 and "no such file" in text


async def test_bench_table_uses_a_narrow_terminal() -> None:
    app = SpecdebugApp(AppContext(remotes={"gpubox": StillRemote("gpubox")}), panes=[BenchPane])
    async with app.run_test(size=(100, 30)) as pilot:
        app.query_one(BenchPane).show_results(fake_results(), baseline=0)
        await settle(pilot)
        table = app.query_one("#bench-table", DataTable)
        assert table.region.width >= 96  # no empty side column eating 40 cells
        assert table.virtual_size.width <= table.region.width  # every column shown


async def test_help_shows_keys_as_typed() -> None:
    app = app_with_profile()
    async with app.run_test(size=(150, 45)) as pilot:
        await pilot.press("f1")
        await settle(pilot)
        keys = [row[1] for row in app.screen.rows]
        assert "?/F1" in keys and "Ctrl+L" in keys
        assert not any("question_mark" in k or "_" in k for k in keys)


def test_report_title_and_marks_read_as_text(tmp_path: Path, capsys) -> None:
    from specdebug.cli import main
    from specdebug.core.journal import Journal

    session = tmp_path / "session"  # the demo's folder name
    journal = Journal(session)
    journal.append(MarkRecord(pane="logs", n=1, label="", host="simbox", path="/x.log", offset=10, matches=3))
    journal.append(MarkRecord(label="NCCL_PROTO exported", origin="cli"))
    assert main(["report", "--session", str(session)]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("# specdebug session of ") and "session session" not in first
    assert "**mark**: mark 1 in simbox:/x.log at byte 10 after 3 matches" in out
    assert "**mark**: NCCL_PROTO exported (from the command line)" in out
    assert "{" not in out


# -- quitting with a server running --------------------------------------------------------------------


async def test_quit_remembers_the_running_server_and_its_stop_command() -> None:
    from specdebug.tui.pane import RunningServer
    from specdebug.verbs.tui import still_running_lines

    app = app_with_profile()
    async with app.run_test(size=(150, 45)) as pilot:
        pane = app.query_one(StartupPane)
        pane.workers.cancel_group(pane, "startup-run")
        pane.apply_status(running_status(pane.profile, 200))
        await pilot.press("q")
        await settle(pilot)
    assert app.still_running == [RunningServer("gpubox", "eagle3-3step", str(PROFILE), 4242, 30000)] or (
        len(app.still_running) == 1 and app.still_running[0].pid == 4242
    )
    (line,) = still_running_lines(app.still_running, "cfg file")
    assert line.startswith("specdebug: eagle3-3step is still running on gpubox (PID 4242, port ")
    assert line.endswith(f"stop it with: specdebug stop -F 'cfg file' gpubox -c {PROFILE}")


def test_panes_without_servers_leave_nothing_running() -> None:
    assert Pane.running_servers(object()) == []  # type: ignore[arg-type]


# -- snapshots of the changed views -------------------------------------------------------------------


class FoundApp(App):
    """The startup pane showing a server found running (READY, not watched from launch)."""

    def __init__(self) -> None:
        super().__init__()
        self.ctx = AppContext(profile=load_profile(PROFILE), journal=FakeJournal(HISTORY))

    def compose(self) -> ComposeResult:
        yield StartupPane(self.ctx)

    def on_mount(self) -> None:
        pane = self.query_one(StartupPane)
        pane.clock = lambda: T0 + 312
        pane.apply_status(running_status(pane.profile, 200))
        pane.render_view()


def test_startup_pane_found_running_snapshot(snap_compare, monkeypatch) -> None:
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert snap_compare(FoundApp(), terminal_size=(130, 20))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_logs_filter_box_with_prompt_snapshot(snap_compare) -> None:
    from tests.tui.test_logs_pane import LogsApp

    async def type_filter(pilot) -> None:
        from textual.widgets import Input

        await pilot.press("slash", *"accept")
        for box in pilot.app.query(Input):  # shown steadily: a blink that came due under load hid it
            box.cursor_blink = False
        await settle(pilot)

    assert snap_compare(LogsApp(), run_before=type_filter, terminal_size=(150, 20))
