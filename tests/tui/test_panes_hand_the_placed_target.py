"""The Bench and Bisect panes on a profile with [deployment] hand core the placed target, as the
`bench` and `bisect` verbs do (issue 38): the benchmark runs on the leader as its node runs it (its
record, its log, the multi-node flags) with every node's connection, and a bisection's trials are
placed on every node.  Handing core the unplaced profile and one connection measured a record and a
log the launch never writes, and started trial servers without the multi-node flags.

The core calls are spied (recorded, then nothing runs): what is checked is what the pane hands over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import DataTable

from specdebug.core.bench import runner as bench_runner
from specdebug.core.profiles import load_profile
from specdebug.errors import SpecdebugError
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes import bisect as bisect_pane
from specdebug.tui.panes.bench import BenchPane
from specdebug.tui.panes.bisect import BisectPane
from tests.deployprofiles import dep_profile
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import toasts, until


def two_node_ctx(tmp_path: Path, path: Path) -> AppContext:
    remotes = {h: StillRemote(h) for h in ("node0", "node1")}
    return AppContext(remotes=remotes, selected="node1", profile=load_profile(path), profile_path=path)


async def test_bench_pane_benchmarks_the_leader_as_placed_with_every_node(tmp_path, monkeypatch) -> None:
    path = dep_profile(tmp_path, "bench")
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def spy(*args: Any, **kwargs: Any):
        calls.append((args, kwargs))
        return
        yield  # an async generator that ends at once: no result

    monkeypatch.setattr(bench_runner, "bench_events", spy)  # what target_bench_events runs
    ctx = two_node_ctx(tmp_path, path)
    app = SpecdebugApp(ctx, panes=[BenchPane])
    async with app.run_test(size=(150, 30)) as pilot:
        pane = app.query_one(BenchPane)
        app.query_one("#bench-table", DataTable).focus()
        await pilot.press("b")
        await until(pilot, lambda: bool(calls) and pane.progress is None, 60)
    (remote, profile, *_), kwargs = calls[0]
    name = ctx.profile.name
    assert remote is ctx.remotes["node0"]  # the leader serves, whichever host is selected
    assert profile.name == f"{name}.node0"  # the node's record ...
    assert profile.server.log_file.endswith(f"{name}.node0.log")  # ... and the log its launch writes
    assert "--nnodes" in profile.server.argv and "--node-rank" in profile.server.argv
    assert dict(kwargs["nodes"]) == ctx.remotes  # every node's GPUs; a dead node refuses the run
    assert [n.host for n in kwargs["deployment"].nodes] == ["node0", "node1"]


class SpyBisection:
    """Records how the pane builds the engine, then refuses (an error the pane's handler says)."""

    made: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        SpyBisection.made.append((args, kwargs))
        raise SpecdebugError("spied: not started")


async def test_bisect_pane_places_its_trials_on_every_node(tmp_path, monkeypatch) -> None:
    good = dep_profile(tmp_path, "good", name="dep-good")
    bad = dep_profile(tmp_path, "bad", name="dep-bad", extra=("--speculative-num-steps", "2"))
    SpyBisection.made = []
    monkeypatch.setattr(bisect_pane, "Bisection", SpyBisection)
    ctx = two_node_ctx(tmp_path, good)
    app = SpecdebugApp(ctx, panes=[BisectPane])
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(BisectPane)
        pane.set_end("good", good)
        pane.set_end("bad", bad)
        pane.action_start()
        await pilot.pause()
    (remote, good_profile, _bad, *_), kwargs = SpyBisection.made[0]
    assert remote is ctx.remotes["node0"]  # the leader serves each trial's benchmark
    assert good_profile.deployment is not None  # each trial's config is placed on the nodes
    nodes = kwargs.get("nodes")
    assert nodes is not None, "the trials ran on one box, without the multi-node flags"
    assert dict(nodes.remotes) == ctx.remotes
    placed = nodes.place(good_profile)
    assert [n.host for n in placed.nodes] == ["node0", "node1"]
    assert "--node-rank" in placed.nodes[1].profile.server.argv


async def test_a_deployment_node_with_no_connection_here_is_said_and_nothing_is_launched(
    tmp_path, monkeypatch
) -> None:
    """node1 of the deployment is not a host of this app: `l` names it and launches nothing (before,
    the pane fell back to one box and launched the unplaced profile on node0 alone)."""
    from specdebug.tui.panes import startup as startup_pane
    from specdebug.tui.panes.startup import StartupPane

    path = dep_profile(tmp_path, "partial")
    calls: list[Any] = []

    async def launch_target(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        raise SpecdebugError("spied")

    monkeypatch.setattr(startup_pane, "launch_target", launch_target)
    ctx = AppContext(remotes={"node0": StillRemote("node0")}, selected="node0", profile=load_profile(path))
    assert ctx.target() is not None and ctx.target().unreachable == ("node1",)  # type: ignore[union-attr]
    app = SpecdebugApp(ctx, panes=[StartupPane])
    async with app.run_test(size=(150, 40)) as pilot:
        pane = app.query_one(StartupPane)
        pane.workers.cancel_group(pane, "startup-run")
        pane.focus()
        await pilot.press("l")
        await until(pilot, lambda: any("node1" in m for m in toasts(app)), 60)
        await pilot.pause()
    said = toasts(app)
    assert any("no connection to node1 here" in m for m in said), said
    assert calls == []
