"""Env pane: matrix rendering (snapshot), marking two processes for a diff, refresh through a fake box."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import DataTable

from specdebug.core.env.model import EnvQuery
from specdebug.core.env.report import build_report
from specdebug.remote.api import FileRead, ProcInfo, RunResult
from specdebug.tui.context import AppContext
from specdebug.tui.panes.env import EnvPane, short_title
from tests.boxes import TableBox
from tests.tui.pilotwait import toasts, until

SECRET = "hf_PaneSecretValue0001"


def _p(pid, ppid, cmdline, uid=0):
    return ProcInfo(
        pid=pid,
        ppid=ppid,
        pgid=200,
        sid=1,
        uid=uid,
        state="S",
        start_ticks=7000,
        comm=cmdline[0][:15],
        cmdline=cmdline,
    )


def _env(**env) -> bytes:
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())


PROCS = [
    _p(1, 0, ["/sbin/init"]),
    _p(200, 1, ["python3", "-m", "sglang.launch_server", "--tp", "4", "--api-key", "sk-pane-secret"]),
    _p(201, 200, ["sglang::scheduler_TP0"]),
    _p(202, 200, ["sglang::scheduler_TP1"]),
    _p(203, 200, ["sglang::scheduler_TP2"]),
    _p(204, 200, ["sglang::scheduler_TP3"], uid=1001),
]
GOOD = dict(
    NCCL_PROTO="Simple",
    NCCL_ALGO="Ring",
    HF_TOKEN=SECRET,
    CUDA_VISIBLE_DEVICES="0,1,2,3",
    NCCL_CUMEM_ENABLE="0",
)


def files() -> dict[str, FileRead]:
    def f(path, data=None, error=None):
        return path, FileRead(path, data, error)

    out = dict(
        [
            f("/proc/stat", b"btime 1700000000\n"),
            f("/etc/passwd", b"root:x:0:0::/root:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n"),
            f("/proc/200/environ", _env(**{**GOOD, "NCCL_CUMEM_ENABLE": "1"})),
            f("/proc/201/environ", _env(**GOOD)),
            f("/proc/202/environ", _env(**{**GOOD, "NCCL_PROTO": "LL", "NCCL_DEBUG": "INFO"})),
            f("/proc/203/environ", b"\0" * 200),
            f("/proc/204/environ", error="EACCES"),
        ]
    )
    for pid in (200, 201, 202, 203, 204):
        uid = 1001 if pid == 204 else 0
        out.update(
            [f(f"/proc/{pid}/status", f"State:\tS (sleeping)\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n".encode())]
        )
    return out


NCCL_LINES = ["gpubox:203:300 [2] NCCL INFO NCCL_PROTO set by environment to Simple"]
QUERY = EnvQuery(
    match="sglang::scheduler",
    expected={"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring", "HF_TOKEN": SECRET, "NCCL_CUMEM_ENABLE": "1"},
    expected_source="profile eagle3",
    log_path="/tmp/specdebug/eagle3.log",
    server_kind="sglang",
)


def report():
    return build_report(QUERY, PROCS, files(), NCCL_LINES)


class EnvApp(App):
    def __init__(self, ctx: AppContext | None = None, marks: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.ctx = ctx or AppContext()
        self.marks = marks

    def compose(self) -> ComposeResult:
        yield EnvPane(self.ctx)

    def on_mount(self) -> None:
        if not self.ctx.remotes:
            pane = self.query_one(EnvPane)
            pane.show_report(report())
            for pid in self.marks:
                pane.mark(pid)


def test_env_pane_matrix_snapshot(snap_compare):
    assert snap_compare(EnvApp(), terminal_size=(150, 42))


def test_env_pane_diff_snapshot(snap_compare):
    assert snap_compare(EnvApp(marks=(201, 202)), terminal_size=(150, 42))


def test_short_title():
    rep = report()
    assert [short_title(w) for w in rep.workers] == ["TP0", "TP1", "TP2", "TP3"]
    assert short_title(rep.launcher) == "python3"


async def test_matrix_contents_and_no_secret():
    app = EnvApp()
    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.pause()
        table = app.query_one("#env-matrix", DataTable)
        assert [str(c.label) for c in table.columns.values()][:3] == ["variable", "expected", "launcher 200"]
        assert (
            table.row_count == 1 + 4 + 2
        )  # environ row, expected vars, extras (CUDA_VISIBLE_DEVICES, NCCL_DEBUG)
        assert str(table.get_cell("__environ__", "p203")) == "clobbered"
        assert str(table.get_cell("__environ__", "p204")) == "denied"
        assert str(table.get_cell("NCCL_PROTO", "p202")) == "LL ≠"
        assert str(table.get_cell("NCCL_PROTO", "p203")) == "Simple ✓ [nccl]"
        assert str(table.get_cell("NCCL_CUMEM_ENABLE", "p201")).endswith("!")
        everything = " ".join(
            str(table.get_cell_at((r, c))) for r in range(table.row_count) for c in range(len(table.columns))
        )
        assert SECRET not in everything and "sk-pane-secret" not in everything


async def test_mark_key_builds_diff():
    app = EnvApp()
    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.pause()
        pane = app.query_one(EnvPane)
        table = app.query_one("#env-matrix", DataTable)
        table.focus()
        table.cursor_coordinate = (1, 3)  # TP0 column
        await pilot.press("m")
        table.cursor_coordinate = (1, 4)  # TP1 column
        await pilot.press("m")
        assert pane.marked == [(None, 201), (None, 202)]
        diff = app.query_one("#env-diff", DataTable)
        names = [str(diff.get_cell_at((r, 0))) for r in range(diff.row_count)]
        assert names == ["NCCL_DEBUG", "NCCL_PROTO"]
        await pilot.press("escape")
        assert pane.marked == []


def FakeRemote(**answers) -> TableBox:
    """The box of these tests: PROCS and files(); `run` fails, box operations too unless answered."""
    return TableBox(
        "gpubox", PROCS, files(), run_answer=answers.pop("run_answer", RunResult(1, b"")), **answers
    )


async def test_refresh_runs_the_core_check():
    ctx = AppContext(remotes={"gpubox": FakeRemote()}, selected="gpubox")
    app = EnvApp(ctx)
    async with app.run_test(size=(150, 42)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        pane = app.query_one(EnvPane)
        assert pane.report is not None
        # no profile: expected = launcher's prefixed vars
        assert pane.report.expected_source == "launcher pid 200"
        assert [w.pid for w in pane.report.workers] == [201, 202, 203, 204]
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert pane.report is not None


async def test_refresh_without_host_notifies():
    app = EnvApp()
    async with app.run_test() as pilot:
        app.query_one(EnvPane).action_refresh()
        assert await until(pilot, lambda: any("no host" in m for m in toasts(app))), toasts(app)


async def test_variable_column_stays_and_legend_is_not_colour_only():
    """At 80 columns the process columns scroll; the variable names stay (issue 26), and an ok
    cell says so with a sign, not colour alone."""
    from textual.widgets import DataTable

    app = EnvApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one("#env-matrix", DataTable)
        assert await until(pilot, lambda: table.max_scroll_x > 0)  # more columns than fit
        table.scroll_x = table.max_scroll_x

        def shown() -> str:
            return "".join(s.text for y in range(1, 6) for s in table.render_line(y))

        # scrolled on a later idle
        assert await until(pilot, lambda: table.scroll_x > 0 and "NCCL_PROTO" in shown()), shown()
        legend = str(app.query_one("#env-legend").render())
        assert "✓ ok" in legend
        assert any("✓" in str(c) for row in table.rows for c in table.get_row(row))
