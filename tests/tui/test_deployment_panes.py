"""A profile with [deployment] in the TUI: the hosts pane groups its nodes, the Startup pane shows
a phase row per node and the deployment's verdict naming the node (events fed, no network)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.widgets import DataTable, Static

from specdebug.core.control.events import GroupChange, LogLine, ServerPhase, ServerState, Verdict
from specdebug.core.control.records import ServerRecord
from specdebug.core.deployment.control import DeploymentStop, NodeEvent
from specdebug.core.deployment.tracker import DeploymentVerdict, NodeSummary
from specdebug.core.profiles import load_profile
from specdebug.tui.app import SpecdebugApp
from specdebug.tui.context import AppContext
from specdebug.tui.panes.hosts import HostsPane
from specdebug.tui.panes.startup import StartupPane
from tests.tui.fakes import StillRemote, sample_host_info
from tests.tui.pilotwait import toasts

T0 = 1_700_000_000.0
PROFILE = """name = "dsv3-2n"
[server]
kind = "sglang"
argv = ["python", "-m", "sglang.launch_server", "--tp", "16", "--port", "30000"]
port = 30000
[deployment]
nodes = ["node0", "node1"]
dist_init_port = 20000
leader_address = "10.0.0.1"
"""


def deployment_ctx(tmp_path: Path, *extra: str) -> AppContext:
    path = tmp_path / "dsv3-2n.toml"
    path.write_text(PROFILE)
    remotes = {h: StillRemote(h) for h in ("node0", "node1", *extra)}
    return AppContext(remotes=remotes, selected="node0", profile=load_profile(path), profile_path=path)


def text_of(renderable, width: int = 100) -> str:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def record(host: str, pid: int, rank: int) -> ServerRecord:
    return ServerRecord(
        profile=f"dsv3-2n.node{rank}",
        host=host,
        pid=pid,
        pgid=pid,
        port=30000,
        log_file=f"/l/{host}.log",
        started_at=T0,
    )


def phase(host: str, rank: int, name: str, s: float) -> NodeEvent:
    return NodeEvent(host=host, rank=rank, event=ServerPhase(name=name, at=T0 + s, elapsed_s=s))


async def test_hosts_pane_groups_the_deployments_nodes_leader_first(tmp_path):
    ctx = deployment_ctx(tmp_path, "spare")
    ctx.remotes = {
        "spare": ctx.remotes["spare"],
        "node1": ctx.remotes["node1"],
        "node0": ctx.remotes["node0"],
    }
    app = SpecdebugApp(ctx, panes=[HostsPane])
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(HostsPane)
        pane.show_info(sample_host_info("node0"))
        pane.show_info(sample_host_info("node1"))
        await pilot.pause()
        table = app.query_one("#hosts-table", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)][:3] for i in range(table.row_count)]
        assert rows == [
            ["▾ dsv3-2n", "2/2 connected", "16 over 2 nodes"],
            ["├ node0 leader", "connected 1.2 ms", "8 (1 throttled)"],
            ["└ node1 rank 1", "connected 1.2 ms", "8 (1 throttled)"],
            ["spare", "connected 1.2 ms", ""],
        ]


async def test_startup_pane_shows_a_phase_row_per_node_and_names_the_failed_node(tmp_path):
    app = SpecdebugApp(deployment_ctx(tmp_path), panes=[StartupPane])
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(StartupPane)
        pane.workers.cancel_group(pane, "startup-run")  # the status check waits on hosts that never answer
        pane.clock = lambda: T0 + 12
        mon = pane.nodes_monitor()
        assert mon is not None and [n.host for n in mon.deployment.nodes] == ["node0", "node1"]
        mon.launched({"node1": record("node1", 4101, 1), "node0": record("node0", 4001, 0)})
        for ev in (
            phase("node0", 0, "init_distributed", 2.0),
            phase("node1", 1, "init_distributed", 2.5),
            phase("node1", 1, "load_weights", 4.0),
            NodeEvent(host="node1", rank=1, event=GroupChange(pids=[4101, 4102, 4103], at=T0 + 4)),
            NodeEvent(host="node0", rank=0, event=LogLine(text="Init torch distributed begin.", at=T0 + 2)),
        ):
            mon.apply(ev)
        pane.render_view()
        await pilot.pause()
        table = text_of(pane.nodes_table(mon))
        assert "▶  node0 leader  starting  init_distributed    2.0s    4001" in table
        assert "▶  node1 #1      starting  load_weights        4.0s    4101      3" in table
        assert "node0: Init torch distributed begin." in str(pane.query_one("#startup-log", Static).render())
        assert "deployment of 2 nodes  STARTING  elapsed 12.0s" in text_of(pane.nodes_head(mon))

        verdict = DeploymentVerdict(
            verdict="failed",
            profile="dsv3-2n",
            reason="node1: exited (node0 waiting at init for 9 s)",
            failed_node="node1",
            at=T0 + 11,
            elapsed_s=11.0,
            nodes=[
                NodeSummary(host="node0", rank=0, state="starting", reason="in phase init_distributed"),
                NodeSummary(host="node1", rank=1, state="failed", reason="exited"),
            ],
        )
        change = mon.apply(verdict)
        assert change is not None and change.state is ServerState.FAILED
        text = text_of(pane.nodes_verdict(mon))
        assert text.startswith("FAILED after 11.0s: node1\nnode1: exited (node0 waiting at init for 9 s)")
        assert "✗  node1 #1      failed" in text_of(pane.nodes_table(mon))
        assert pane.state is ServerState.FAILED


async def test_startup_pane_ready_as_one_then_a_node_dying_fails_the_deployment(tmp_path):
    app = SpecdebugApp(deployment_ctx(tmp_path), panes=[StartupPane])
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(StartupPane)
        pane.workers.cancel_group(pane, "startup-run")
        mon = pane.nodes_monitor()
        mon.launched({"node1": record("node1", 4101, 1), "node0": record("node0", 4001, 0)})
        mon.apply(NodeEvent(host="node0", rank=0, event=Verdict(verdict="ready", elapsed_s=9.0, at=T0 + 9)))
        ready = DeploymentVerdict(
            verdict="ready",
            profile="dsv3-2n",
            at=T0 + 9,
            elapsed_s=9.0,
            nodes=[
                NodeSummary(host="node0", rank=0, state="ready"),
                NodeSummary(host="node1", rank=1, state="ready"),
            ],
        )
        assert mon.apply(ready).state is ServerState.READY
        assert text_of(pane.nodes_verdict(mon)) == "READY as one after 9.0s on 2 nodes\n"
        assert [r.state for r in mon.rows()] == [ServerState.READY, ServerState.READY]
        assert mon.liveness("node0", [4001, 4002], 200) is None
        change = mon.liveness("node1", [], None)  # node1's group is gone while the leader answers
        assert change is not None and change.state is ServerState.FAILED
        assert mon.failed_node == "node1"
        assert mon.message.startswith("node1: the server's process group is gone")
        assert mon.message.endswith("node0 still running (x stops every node)")
        assert pane.running_servers()[0].host == "node0"  # the quit note stops it from the leader
        stop = DeploymentStop(
            profile="dsv3-2n",
            stopped=True,
            nodes=[
                {"host": h, "rank": r, "profile": f"dsv3-2n.node{r}", "stopped": True, "message": "stopped"}
                for r, h in enumerate(("node0", "node1"))
            ],
        )
        assert mon.stopped(stop).state is ServerState.STOPPED
        assert mon.nothing_running() and pane.running_servers() == []
        await pilot.pause()


def test_the_tui_on_a_deployment_connects_every_node_without_a_host(tmp_path):
    import pytest

    from specdebug.verbs.tui import tui_hosts, tui_parser

    path = deployment_ctx(tmp_path).profile_path
    assert tui_hosts(tui_parser().parse_args(["-c", str(path)])) == ["node0", "node1"]
    assert tui_hosts(tui_parser().parse_args(["-c", str(path), "spare"])) == ["spare", "node0", "node1"]
    with pytest.raises(ValueError, match="give a HOST"):
        tui_hosts(tui_parser().parse_args([]))


async def test_env_pane_has_a_node_row_per_process_and_the_transport_verdict(tmp_path):
    from specdebug.core.deployment.nccl import TransportProof
    from specdebug.core.deployment.node_env import NodeEnv
    from specdebug.tui.panes.env import EnvPane
    from tests.tui.test_env_pane import report

    app = SpecdebugApp(deployment_ctx(tmp_path), panes=[EnvPane])
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(EnvPane)
        pane.workers.cancel_group(pane, "env-check")  # the hosts never answer: the test feeds the check
        dep = app.ctx.target().deployment
        proof = TransportProof(
            verdict="socket",
            reason="1 of 4 inter-node edges via NET/Socket (as node1 printed them)",
            findings=["node1: NCCL_IB_DISABLE=1 in the workers' environ: IB off by intent"],
        )
        # the same PIDs on both nodes (two boxes): every column stays its own
        pane.show_nodes([NodeEnv(dep.nodes[0], report(), []), NodeEnv(dep.nodes[1], report(), [])], proof)
        await pilot.pause()
        table = app.query_one("#env-matrix", DataTable)
        keys = [k.value for k in table.columns]
        assert keys[:4] == ["var", "expected", "node0:p200", "node0:p201"] and "node1:p201" in keys
        assert str(table.get_cell("__node__", "node1:p203")) == "node1"
        assert str(table.get_cell("__environ__", "node1:p203")) == "clobbered"
        verdict = str(app.query_one("#env-verdict", Static).render())
        assert verdict.splitlines()[0] == "FAILED  2 nodes"
        assert verdict.splitlines()[1].startswith("node0: FAILED, 4 workers: ")
        assert "transport: socket (1 of 4 inter-node edges via NET/Socket (as node1 printed them))" in verdict
        assert "finding: node1: NCCL_IB_DISABLE=1" in verdict
        pane.mark(("node0", 202))
        pane.mark(("node1", 201))
        await pilot.pause()
        title = str(app.query_one("#env-diff-title", Static).render())
        assert title.startswith("diff node0 TP1 202 vs node1 TP0 201: 2 differing")


async def test_env_pane_says_a_stopped_deployment_is_not_running_and_a_missed_expectation_fails(tmp_path):
    """No node running: "not running" (no transport, nobody else's processes).  Every node's env ok but
    the transport misses `expect_transport`: FAILED, with the expectation's line."""
    from specdebug.core.deployment.nccl import TransportProof
    from specdebug.core.deployment.node_env import NodeEnv
    from specdebug.core.env.model import EnvQuery
    from specdebug.core.env.report import build_report
    from specdebug.tui.panes.env import EnvPane
    from tests.tui.test_env_pane import PROCS, files

    app = SpecdebugApp(deployment_ctx(tmp_path), panes=[EnvPane])
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(EnvPane)
        pane.workers.cancel_group(pane, "env-check")  # the hosts never answer: the test feeds the check
        dep = app.ctx.target().deployment
        gone = [
            NodeEnv(n, None, [], f"dsv3-2n.node{n.rank} is not running on {n.host}", running=False)
            for n in dep.nodes
        ]
        pane.show_nodes(gone, None)
        await pilot.pause()
        verdict = str(app.query_one("#env-verdict", Static).render())
        assert verdict.splitlines()[0].startswith("not running  on any of 2 nodes"), verdict
        assert "node1: dsv3-2n.node1 is not running on node1" in verdict and "transport" not in verdict
        ok = build_report(EnvQuery(match="sglang::scheduler", expected={}), PROCS[:4], files(), [])
        assert ok.summary.ok
        proof = TransportProof(
            verdict="socket",
            reason="8 of 8 inter-node edges went socket",
            expected="ib",
            failures=["ib expected, but 8 of 8 inter-node channel lines went socket (printed by node1)"],
        )
        pane.show_nodes([NodeEnv(n, ok, []) for n in dep.nodes], proof)
        await pilot.pause()
        verdict = str(app.query_one("#env-verdict", Static).render())
        assert verdict.splitlines()[0] == "FAILED  2 nodes" and "node0: OK" in verdict, verdict
        assert "expected ib: FAILED" in verdict and "ib expected, but 8 of 8" in verdict


async def test_logs_pane_merges_every_nodes_lines_with_a_node_column_and_filters_by_node(tmp_path):
    from specdebug.core.logs.events import LogEvent, LogMatch
    from specdebug.tui.panes.logs import LogsPane
    from specdebug.tui.widgets.logview import LogView

    app = SpecdebugApp(deployment_ctx(tmp_path), panes=[LogsPane])
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(LogsPane)
        pane.feed_event(LogEvent(kind="opened", path="/l/node1.log", offset=0), "node1", 5)
        pane.feed_match(LogMatch(line="Init torch distributed begin.", event="startup", offset=0), "node0", 5)
        line = "Decode batch. #running-req: 1, gen throughput (token/s): 42.0"
        pane.feed_match(
            LogMatch(line=line, event="decode_batch", spans=[(56, 60, "x")], offset=9), "node1", 5
        )
        pane.flush()
        await pilot.pause()
        view = app.query_one(LogView)
        assert [e.text for e in view.entries] == [
            "node1 │ ── following at byte 0 ──",
            "node0 │ Init torch distributed begin.",
            f"node1 │ {line}",
        ]
        assert view.entries[2].spans[-1][:2] == (64, 68)  # the value's highlight moved with the text
        assert view.entries[2].node == "node1" and pane.matches == 2
        assert pane.apply_filter("^node1", hide=True)
        await pilot.pause()
        assert [view.entries[i].text[:5] for i in view.rows if view.entries[i].kind == "match"] == ["node1"]


def test_a_node_whose_nccl_lines_go_to_a_debug_file_is_a_finding(tmp_path):
    from specdebug.core.deployment.node_env import NodeEnv, transport_of
    from tests.tui.test_env_pane import report

    dep = deployment_ctx(tmp_path).target().deployment
    rep = report()
    rep.workers[0].extra["NCCL_DEBUG_FILE"] = "/tmp/nccl.%h.%p"
    proof = transport_of([NodeEnv(dep.nodes[0], report(), []), NodeEnv(dep.nodes[1], rep, [])])
    assert proof.verdict == "unproven"
    assert proof.findings[-1].startswith("node1: NCCL_DEBUG_FILE=/tmp/nccl.%h.%p sends its NCCL lines")


async def test_picking_a_deployment_whose_nodes_are_not_connected_is_refused(tmp_path):
    path = deployment_ctx(tmp_path).profile_path
    app = SpecdebugApp(
        AppContext(remotes={"gpubox": StillRemote("gpubox")}, selected="gpubox"), panes=[HostsPane]
    )
    async with app.run_test(size=(120, 30)) as pilot:
        app._profile_picked(path)  # what the profile picker calls with the chosen file
        await pilot.pause()
        assert app.ctx.profile is None and app.ctx.target() is None
        said = toasts(app)
        assert any("its [deployment] nodes node0, node1 are not connected here" in m for m in said), said
