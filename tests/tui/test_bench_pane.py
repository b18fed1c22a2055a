"""Bench pane: history from the journal, baseline, compare, run/cancel against a local fake server,
read-only mode, and a snapshot with fixed results."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from specdebug.core.bench.models import BenchConfig, BenchResult, LatencyStats, ServerMetrics
from specdebug.core.hosts import GpuInfo
from specdebug.core.journal import Journal
from specdebug.core.records import BenchResultRecord
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.bench import BenchPane, bar, chart
from tests.fixtures.bench.fake_sse import FakeServerConfig, FakeSSEServer
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import toasts, until
from tests.unit.test_bench_runner import LocalRemote, make_profile

LocalConnection = LocalRemote  # this machine as the box, with the lifecycle the app drives


ARGV = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-num-steps"]


def fake_results() -> list[BenchResult]:
    def r(name, tok, steps, env, accept, verify, ttft, start, **kw):
        return BenchResult(
            profile=name,
            fingerprint=f"fp{steps}",
            host="gpubox",
            started_at=start,
            argv=[*ARGV, steps],
            env=env,
            config=BenchConfig(concurrency=1),
            decode_tok_s=tok,
            output_tok_s=tok * 0.98,
            request_throughput=0.3,
            ttft_ms=LatencyStats(p50=ttft, mean=ttft),
            itl_ms=LatencyStats(p50=1000 / tok, p99=30.0),
            server=ServerMetrics(accept_len=accept, verify_ms=verify, gen_throughput=tok, samples=4),
            **kw,
        )

    hot = GpuInfo(index=2, temperature_c=86, throttle_reasons=["sw_thermal_slowdown"])
    return [
        r("baseline", 89.0, "1", {}, 1.0, 11.2, 40.0, 1_700_000_000.0),
        r("eagle-2step-nccl", 94.2, "2", {"NCCL_PROTO": "Simple"}, 2.1, 19.0, 42.5, 1_700_000_300.0),
        r(
            "eagle-3step",
            60.3,
            "3",
            {},
            2.5,
            30.0,
            44.1,
            1_700_000_600.0,
            gpu_after=[hot],
            warnings=["GPU 2 throttled after the run: sw_thermal_slowdown"],
        ),
        r("eagle-2step-nccl", 93.8, "2", {"NCCL_PROTO": "Simple"}, 2.1, 19.1, 41.9, 1_700_000_900.0),
    ]


def test_bar_and_chart() -> None:
    assert bar(10, 10, 4) == "████" and bar(5, 10, 4) == "██" and bar(0, 10) == ""
    assert bar(1, 8, 1) == "▏"
    from specdebug.core.report import HistoryEntry

    text = chart([HistoryEntry(i + 1, float(i), r) for i, r in enumerate(fake_results())]).plain
    line = text.splitlines()[1]
    assert line.startswith("eagle-2step-nccl") and line.endswith("93.8") and "▏" not in line


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_bench_pane_snapshot(snap_compare, utc) -> None:
    app = SpecdebugApp(
        AppContext(remotes={"gpubox": StillRemote("gpubox")}, selected="gpubox"), panes=[BenchPane]
    )

    async def feed(pilot):
        pane = pilot.app.query_one(BenchPane)
        pane.show_results(fake_results(), baseline=0)
        pane.show_compare(pane.entries[1], pane.entries[2])
        await pilot.pause()

    assert snap_compare(app, run_before=feed, terminal_size=(150, 30))


async def test_history_baseline_compare_from_journal(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "s")
    for res in fake_results():
        journal.append(BenchResultRecord(result=res), sync=True)
    ctx = AppContext(remotes={"gpubox": StillRemote("gpubox")}, selected="gpubox", journal=journal)
    app = SpecdebugApp(ctx, panes=[BenchPane])
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BenchPane)
        table = app.query_one("#bench-table", DataTable)
        assert table.row_count == 4
        assert str(table.get_row("2")[3]) == "+5.8%"
        table.focus()
        await pilot.press("down", "equals_sign")  # row 2 becomes the baseline
        assert str(table.get_row("2")[3]) == "base"
        assert journal.events({"mark"})[-1]["label"] == "baseline"
        await pilot.press("c", "down", "c")  # compare #2 with #3
        panel = app.query_one("#bench-compare", Static)
        assert panel.has_class("-shown") and pane.compared == (2, 3)
        await pilot.press("escape")
        assert not panel.has_class("-shown")
        await pilot.press("c", "c")  # same run (#3) twice: vs baseline (#2)
        assert panel.has_class("-shown") and pane.compared == (2, 3)
    # reopening the session shows the baseline choice
    app2 = SpecdebugApp(ctx, panes=[BenchPane])
    async with app2.run_test(size=(150, 30)):
        assert str(app2.query_one("#bench-table", DataTable).get_row("2")[3]) == "base"


async def test_run_and_cancel_against_fake_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("The server is fired up and ready to roll!\n")
    journal = Journal(tmp_path / "s")
    async with FakeSSEServer(FakeServerConfig(step_s=0.002)) as srv:
        profile = make_profile(srv.port, log, extra="")
        ctx = AppContext(
            remotes={"local": LocalConnection()}, selected="local", profile=profile, journal=journal
        )
        app = SpecdebugApp(ctx, panes=[BenchPane])
        async with app.run_test(size=(150, 30)) as pilot:
            pane = app.query_one(BenchPane)
            app.query_one("#bench-table", DataTable).focus()
            await pilot.press("b")
            await until(pilot, lambda: pane.entries, 30)
            assert len(pane.entries) == 1 and pane.entries[0].result.profile == "base"
            assert pane.progress is None
            assert len(journal.events({"bench_result"})) == 1

            srv.config.step_s = 0.05  # slow: cancel mid-run
            await pilot.press("b")
            assert await until(pilot, lambda: pane.progress is not None), "the run never started"
            await pilot.press("x")
            await until(pilot, lambda: pane.progress is None, 30)
            assert pane.progress is None
            assert len(journal.events({"bench_result"})) == 1


async def test_readonly_blocks_run(tmp_path: Path) -> None:
    profile = make_profile(30000, tmp_path / "x.log")  # a real profile: the context is typed
    ctx = AppContext(remotes={"gpubox": StillRemote("gpubox")}, readonly=True, profile=profile)
    app = SpecdebugApp(ctx, panes=[BenchPane])
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(BenchPane)
        app.query_one("#bench-table", DataTable).focus()
        assert pane.check_action("run", ()) is False
        await pilot.press("b")
        await pilot.pause()
        assert pane.progress is None and app.is_running


async def test_run_without_profile_notifies() -> None:
    app = SpecdebugApp(AppContext(remotes={"gpubox": StillRemote("gpubox")}), panes=[BenchPane])
    async with app.run_test(size=(120, 30)) as pilot:
        app.query_one("#bench-table", DataTable).focus()
        await pilot.press("b")
        assert await until(pilot, lambda: any("profile" in m for m in toasts(app))), toasts(app)
        assert app.query_one(BenchPane).progress is None


del asyncio, os
