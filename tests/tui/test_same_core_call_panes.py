"""The pane side of "a pane and its verb call the same core function with the same target" (issue 38;
the verbs' side is tests/integration/test_same_core_call.py).  Each pane's action is driven as a user
drives it, the core function it reaches is spied (recorded, then nothing runs on a box), and what it
got must be the profile's target placed as the verb places it (`core.deployment.place`: one node on
the selected host for a one-box profile, every node of a `[deployment]`), with the app's connections:

    Startup `l`      -> core.deployment.control.launch_target   (`launch`)
    Env (on open)    -> core.deployment.node_env.target_env     (`env`)
    Logs `f`         -> core.logs.matches.follow_target_logs    (`grep -c PROFILE --follow`)
    Bench `b`        -> target_bench_events                     (`bench`)
    Bisect `a`       -> Bisection, whose every trial runs on `Nodes.target(candidate)` (`bisect`)

A 2-node deployment of the sim (tests/deployprofiles.py) and a one-box profile, on stand-in boxes that
answer at once (no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from specdebug.core.bisect.trial import Nodes
from specdebug.core.deployment import place
from specdebug.core.logs.follow import Follower
from specdebug.core.profiles import load_profile
from specdebug.core.target import Target
from specdebug.errors import SpecdebugError
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes import bench as bench_pane
from specdebug.tui.panes import bisect as bisect_pane
from specdebug.tui.panes import env as env_pane
from specdebug.tui.panes import logs as logs_pane
from specdebug.tui.panes import startup as startup_pane
from specdebug.tui.panes.bench import BenchPane
from specdebug.tui.panes.bisect import BisectPane
from specdebug.tui.panes.env import EnvPane
from specdebug.tui.panes.logs import LogsPane
from specdebug.tui.panes.startup import StartupPane
from tests.boxes import TableBox
from tests.deployprofiles import dep_profile
from tests.integration.test_same_core_call import expected_nodes, nodes_of
from tests.tui.pilotwait import until


def connected_box(name: str) -> TableBox:
    """A stand-in box that is connected (the panes wait for that before they act), with nothing on it."""
    return TableBox(name)


ONE_BOX = """name = "one-box"
[server]
kind = "sglang"
argv = ["python", "-m", "sglang.launch_server", "--port", "30000"]
port = 30000
"""


def ctx_for(tmp_path: Path, kind: str) -> tuple[AppContext, str | None]:
    """The app's context and the HOST the verb is given (none for a deployment: it names its nodes)."""
    if kind == "deployment":
        path = dep_profile(tmp_path, "same")
        remotes = {h: connected_box(h) for h in ("node0", "node1")}
        return AppContext(
            remotes=remotes, selected="node1", profile=load_profile(path), profile_path=path
        ), None
    path = tmp_path / "one-box.toml"
    path.write_text(ONE_BOX)
    remotes = {h: connected_box(h) for h in ("gpubox", "spare")}
    return AppContext(
        remotes=remotes, selected="gpubox", profile=load_profile(path), profile_path=path
    ), "gpubox"


def assert_the_verbs_target(got: Target, ctx: AppContext, host: str | None) -> None:
    """Placed as the verb places it, every node on the app's own connection to it."""
    assert ctx.profile is not None
    assert nodes_of(got) == expected_nodes(ctx.profile, host, None)  # the verbs' test's expectation
    assert got.deployment == place(ctx.profile, host)
    assert got.unreachable == ()
    assert {h: r for h, r in got.remotes.items()} == {n.host: ctx.remotes[n.host] for n in got.nodes}
    assert got == ctx.target()


KINDS = ["deployment", "one-box"]


@pytest.mark.parametrize("kind", KINDS)
async def test_startup_launch_calls_launch_target_with_the_profiles_target(
    tmp_path, monkeypatch, kind
) -> None:
    ctx, host = ctx_for(tmp_path, kind)
    got: list[Target] = []

    async def launch_target(target: Target, **kwargs: Any) -> Any:
        got.append(target)
        raise SpecdebugError("spied: nothing launched")

    monkeypatch.setattr(startup_pane, "launch_target", launch_target)
    app = SpecdebugApp(ctx, panes=[StartupPane])
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(StartupPane)
        await until(pilot, lambda: pane.state == "idle", 60)  # its status check on open found nothing
        pane.focus()
        await pilot.press("l")
        await until(pilot, lambda: bool(got), 60)
    assert_the_verbs_target(got[0], ctx, host)


@pytest.mark.parametrize("kind", KINDS)
async def test_env_check_calls_target_env_with_the_profiles_target(tmp_path, monkeypatch, kind) -> None:
    ctx, host = ctx_for(tmp_path, kind)
    got: list[Target] = []

    async def target_env(target: Target, **kwargs: Any) -> Any:
        got.append(target)
        raise SpecdebugError("spied: nothing checked")

    monkeypatch.setattr(env_pane, "target_env", target_env)
    app = SpecdebugApp(ctx, panes=[EnvPane])
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: bool(got), 60)  # the pane checks on open, without a key
    assert_the_verbs_target(got[0], ctx, host)


@pytest.mark.parametrize("kind", KINDS)
async def test_logs_follow_calls_follow_target_logs_with_the_profiles_target(
    tmp_path, monkeypatch, kind
) -> None:
    ctx, host = ctx_for(tmp_path, kind)
    got: list[Target] = []

    async def follow_target_logs(target: Target, make_parser: Any, **kwargs: Any):
        got.append(target)
        assert kwargs.get("this_run") is True  # this run's lines: earlier runs' numbers never mix in
        for node in target.nodes:  # each node's follower as it starts, as the core hands them over
            kwargs["on_follower"](node, Follower(target.remote(node), node.profile.server.log_file))
        return
        yield

    monkeypatch.setattr(logs_pane, "follow_target_logs", follow_target_logs)
    monkeypatch.setattr(LogsPane, "_watch_prom", lambda self, *a: None)  # the /metrics panel: not this test's
    app = SpecdebugApp(ctx, panes=[LogsPane])
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(LogsPane)
        pane.focus()
        await pilot.press("f")
        await until(pilot, lambda: bool(got), 60)
        await pilot.pause()
        where = pane.where() or ""
    assert_the_verbs_target(got[0], ctx, host)
    if kind == "one-box":  # one node: the one-box status line, host:path
        assert where.startswith("gpubox:") and where.endswith("(one-box's log)"), where
    else:
        assert where.startswith("2 nodes' logs (node0, node1)"), where


@pytest.mark.parametrize("kind", KINDS)
async def test_bench_run_calls_target_bench_events_with_the_profiles_target(
    tmp_path, monkeypatch, kind
) -> None:
    ctx, host = ctx_for(tmp_path, kind)
    got: list[Target] = []

    async def target_bench_events(target: Target, *args: Any, **kwargs: Any):
        got.append(target)
        return
        yield

    monkeypatch.setattr(bench_pane, "target_bench_events", target_bench_events)
    app = SpecdebugApp(ctx, panes=[BenchPane])
    async with app.run_test(size=(150, 40)) as pilot:
        app.query_one("#bench-table", DataTable).focus()
        await pilot.press("b")
        await until(pilot, lambda: bool(got), 60)
    assert_the_verbs_target(got[0], ctx, host)


@pytest.mark.parametrize("kind", KINDS)
async def test_bisect_trials_run_on_the_candidate_placed_on_the_profiles_target(
    tmp_path, monkeypatch, kind
) -> None:
    """The engine is built as the `bisect` verb builds it (the good end's target: its leader's
    connection, and on a deployment every node's with the placement); each trial's target is then
    core's `Nodes.target(candidate)`, the good end's here."""
    ctx, host = ctx_for(tmp_path, kind)
    assert ctx.profile_path is not None
    bad = tmp_path / "bad.toml"
    bad.write_text(
        ctx.profile_path.read_text().replace('name = "', 'name = "bad-', 1) + "\n# the other end\n"
    )
    made: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class SpyBisection:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append((args, kwargs))
            raise SpecdebugError("spied: not started")

    monkeypatch.setattr(bisect_pane, "Bisection", SpyBisection)
    app = SpecdebugApp(ctx, panes=[BisectPane])
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(BisectPane)
        pane.set_end("good", ctx.profile_path)
        pane.set_end("bad", bad)
        pane.focus()
        await pilot.press("a")
        await until(pilot, lambda: bool(made), 60)
    (remote, good, _bad, *_), kwargs = made[0]
    nodes: Nodes | None = kwargs.get("nodes")
    trial = (nodes or Nodes.one(remote)).target(good)  # what core's run_trial places each trial on
    assert_the_verbs_target(trial, ctx, host)
