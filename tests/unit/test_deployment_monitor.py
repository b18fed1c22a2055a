"""DeploymentMonitor (core/deployment/monitor.py): what a front end folds from a deployment's
status and liveness answers, without a screen (pure: no I/O)."""

from __future__ import annotations

from specdebug.core.control.actions import ServerStatus
from specdebug.core.control.events import ServerState
from specdebug.core.control.records import ServerRecord
from specdebug.core.deployment import place
from specdebug.core.deployment.monitor import DeploymentMonitor
from specdebug.core.deployment.status import DeploymentStatus
from specdebug.core.deployment.tracker import NodeSummary
from specdebug.core.profiles import load_profile

PROFILE = """name = "d2"
[server]
kind = "sglang"
argv = ["python", "-m", "sglang.launch_server", "--port", "30000"]
port = 30000
[deployment]
nodes = ["n0", "n1"]
dist_init_port = 20000
leader_address = "10.0.0.1"
"""


def monitor(tmp_path) -> DeploymentMonitor:
    path = tmp_path / "d2.toml"
    path.write_text(PROFILE)
    return DeploymentMonitor(place(load_profile(path)))


def running(host: str, rank: int, pid: int, health: int | None) -> ServerStatus:
    rec = ServerRecord(profile=f"d2.node{rank}", host=host, pid=pid, pgid=pid, port=30000, log_file="/l")
    return ServerStatus(
        profile=rec.profile, state="running", record=rec, pids=[pid], health=health, port=30000
    )


def status(state: str, *nodes: ServerStatus, reason: str = "") -> DeploymentStatus:
    return DeploymentStatus(
        profile="d2",
        state=state,
        reason=reason,
        nodes=[NodeSummary(host=f"n{i}", rank=i, state=s.state) for i, s in enumerate(nodes)],
        node_status=list(nodes),
        health=nodes[0].health,
    )


def test_found_running_is_ready_once_the_leader_answers_and_a_node_gone_fails_it(tmp_path):
    mon = monitor(tmp_path)
    assert (
        mon.apply_status(status("running", running("n0", 0, 100, None), running("n1", 1, 200, 200))) is None
    )
    assert mon.state is ServerState.RUNNING and mon.found is not None
    change = mon.liveness("n0", [100, 101], 200)
    assert change is not None and change.state is ServerState.READY
    change = mon.liveness("n1", [], None)
    assert change is not None and change.state is ServerState.FAILED and mon.failed_node == "n1"
    assert mon.message.endswith("n0 still running (x stops every node)")
    assert mon.liveness("n0", [100], 200) is None  # failed: no more liveness news
    assert not mon.nothing_running() and mon.alive()  # n0 still holds processes: stop means something


def test_status_failed_names_the_node_that_is_gone(tmp_path):
    mon = monitor(tmp_path)
    gone = ServerStatus(profile="d2.node1", state="exited", port=30000)
    mon.apply_status(
        status("failed", running("n0", 0, 100, 200), gone, reason="n1: exited; n0 still running")
    )
    assert mon.state is ServerState.FAILED and mon.failed_node == "n1"
    assert [r.state for r in mon.rows()] == [ServerState.READY, ServerState.EXITED]


async def test_after_a_node_failed_its_leftovers_and_the_running_node_are_followed(tmp_path):
    """The deployment failed on n1 (its main process gone, a worker still exiting): the watch goes on
    re-asking every node that still lists processes, so neither keeps a PID that is gone."""
    import asyncio

    from specdebug.core.deployment.monitor import watch_deployment_liveness

    mon = monitor(tmp_path)
    mon.apply_status(status("running", running("n0", 0, 100, 200), running("n1", 1, 200, None)))
    answers = {
        "n0": iter([([100, 101], 200), ([100, 101], 200), ([], None), ([], None)]),
        "n1": iter([([201], None), ([201], None), ([], None), ([], None)]),
    }

    from specdebug.remote.api import RemoteError

    class NoHelper:  # main_process_exit and record_now find no helper: liveness alone decides
        state_dir = "/s"

        def __init__(self, name: str) -> None:
            self.name = name

        async def box_op(self, op: str, request: dict, timeout: float = 30) -> dict:
            raise RemoteError("no helper")

    async def liveness(remote, rec, profile):
        return next(answers[remote.name])

    async def watch() -> None:
        remotes = {"n0": NoHelper("n0"), "n1": NoHelper("n1")}
        async for _ in watch_deployment_liveness(mon, remotes, liveness=liveness, interval=0.01):  # type: ignore[arg-type]
            pass

    await asyncio.wait_for(watch(), 10)
    assert mon.state is ServerState.FAILED and mon.failed_node == "n1"
    assert mon.nodes["n1"].pids == [] and mon.nodes["n0"].pids == []
    assert mon.message == "n1: server's main process 200 died (killed or crashed)"
    assert mon.nothing_running() and not mon.alive()
