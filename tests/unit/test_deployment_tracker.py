"""The deployment's state machine: ready only as one, a failure named by its node, and a node that
never reached the rendezvous told apart from the ones waiting there."""

from __future__ import annotations

from specdebug.core.control.events import GroupChange, HealthChange, ServerPhase, Verdict
from specdebug.core.deployment import place
from specdebug.core.deployment.tracker import RENDEZVOUS_GRACE_S, STORE_GRACE_S, DeploymentTracker
from specdebug.core.profiles import Profile


def deployment(kind: str = "sglang"):
    profile = Profile.model_validate(
        {
            "name": "big",
            "server": {"argv": ["python3", "-m", "sglang.launch_server", "--port", "30000"], "kind": kind},
            "deployment": {"nodes": ["n0", "n1"], "dist_init_port": 20000, "leader_address": "10.0.0.1"},
        }
    )
    return place(profile)


def phase(name: str, at: float) -> ServerPhase:
    return ServerPhase(name=name, at=at, elapsed_s=at)


def ready(at: float) -> Verdict:
    return Verdict(verdict="ready", at=at, elapsed_s=at)


def test_ready_only_when_the_leader_is_ready_and_every_worker_is_alive_past_init():
    t = DeploymentTracker(deployment(), started_at=0.0)
    assert t.feed("n1", GroupChange(pids=[10, 11], at=1), 1) is None
    assert t.feed("n1", phase("init_distributed", 2), 2) is None
    assert t.feed("n0", phase("init_distributed", 2), 2) is None
    assert t.feed("n1", HealthChange(status=200, at=3), 3) is None  # a worker's dummy /health is not enough
    assert t.feed("n1", GroupChange(pids=[], at=4), 4) is None  # gone: not up
    assert t.feed("n0", ready(5), 5) is None
    v = t.feed("n1", GroupChange(pids=[10, 11], at=6), 6)
    assert v is not None and v.verdict == "ready"
    assert [(n.host, n.state) for n in v.nodes] == [("n0", "ready"), ("n1", "ready")]


def test_vllm_headless_worker_is_up_once_past_init():
    t = DeploymentTracker(deployment("vllm"), started_at=0.0)
    t.feed("n1", GroupChange(pids=[10], at=1), 1)
    t.feed("n1", phase("init_distributed", 2), 2)
    t.feed("n1", phase("load_weights", 3), 3)
    v = t.feed("n0", ready(4), 4)
    assert v is not None and v.verdict == "ready"


def test_a_failure_is_named_by_its_node_with_the_rendezvous_note():
    t = DeploymentTracker(deployment(), started_at=0.0)
    t.feed("n0", phase("init_distributed", 1), 1)
    v = t.feed("n0", Verdict(verdict="failed", reason="timed out", at=41, elapsed_s=41), 41)
    assert v is not None and v.verdict == "failed" and v.failed_node == "n0"
    assert v.reason == "n1: never reached the rendezvous; n0 waiting at init for 40 s (n0: timed out)"
    assert [n.state for n in v.nodes] == ["failed", "starting"]


def test_no_connection_to_the_rendezvous_while_another_node_joined_fails_that_node():
    t = DeploymentTracker(deployment(), started_at=0.0)
    for host in ("n0", "n1"):
        t.feed(host, GroupChange(pids=[1, 2], at=1), 1)
        t.feed(host, phase("init_distributed", 1), 1)
    assert [h for h, _ in t.at_rendezvous()] == ["n0", "n1"]
    assert t.rendezvous("n1", False, 2) is None  # not yet: a node may be connecting
    assert t.rendezvous("n0", True, 2) is None
    assert t.rendezvous("n1", False, 2 + RENDEZVOUS_GRACE_S - 0.1) is None
    v = t.rendezvous("n1", False, 2 + RENDEZVOUS_GRACE_S)
    assert v is not None and v.failed_node == "n1"
    assert v.reason.startswith("n1: never reached the rendezvous at 10.0.0.1:20000")
    assert "while n0 joined" in v.reason and "n0 waiting at init for 6 s" in v.reason


def test_nobody_connected_is_no_verdict():
    t = DeploymentTracker(deployment(), started_at=0.0)
    assert t.rendezvous("n1", False, 1) is None and t.rendezvous("n1", False, 100) is None


def test_an_nccl_warning_and_the_nodes_interface_pin_explain_a_failure():
    profile = Profile.model_validate(
        {
            "name": "big",
            "server": {"argv": ["python3", "-m", "sglang.launch_server", "--port", "30000"]},
            "deployment": {
                "nodes": ["n0", "n1"],
                "dist_init_port": 20000,
                "leader_address": "10.0.0.1",
                "node_env": {"n1": {"NCCL_SOCKET_IFNAME": "=eth9"}},
            },
        }
    )
    t = DeploymentTracker(place(profile), started_at=0.0)
    excerpt = ["vm:1:1 [0] bootstrap.cc:66 NCCL WARN Bootstrap : no socket interface found", "Traceback ..."]
    v = t.feed(
        "n1",
        Verdict(verdict="failed", reason="ncclInternalError: Internal check failed.", excerpt=excerpt),
        3,
    )
    assert v is not None and v.reason == (
        "n1: ncclInternalError: Internal check failed.; NCCL WARN Bootstrap : no socket interface found "
        "(the profile gives n1 NCCL_SOCKET_IFNAME==eth9)"
    )


def test_a_leader_at_init_whose_store_is_not_up_while_a_worker_waits_is_named():
    """Rank 0 (the leader) hosts the rendezvous store: nothing listening there is the leader's
    failure, not the workers' whose connections it refuses."""
    t = DeploymentTracker(deployment(), started_at=0.0)
    for host in ("n0", "n1"):
        t.feed(host, GroupChange(pids=[1, 2] if host == "n0" else [3], at=1), 1)
    t.feed("n0", phase("init_distributed", 1), 1)
    assert t.store_unproven()
    assert t.store(False, [], 2) is None  # no worker waits at init yet: it may still be starting
    t.feed("n1", phase("init_distributed", 3), 3)
    assert t.rendezvous("n1", False, 3) is None and t.rendezvous("n0", False, 3) is None
    assert t.store(False, [], 2 + STORE_GRACE_S - 0.1) is None
    assert t.store(True, [2], 2 + STORE_GRACE_S) is None  # up after all: the grace starts again
    assert t.store(False, [], 3 + STORE_GRACE_S) is None
    v = t.store(False, [], 3 + 2 * STORE_GRACE_S)
    assert v is not None and v.failed_node == "n0"
    assert v.reason.startswith("n0: never reached the rendezvous at 10.0.0.1:20000 (rank 0 hosts the store")
    assert (
        "nothing listens there 22 s after its init line" in v.reason
        and "n1 waiting at init for 20 s" in v.reason
    )
    assert [n.state for n in v.nodes] == ["failed", "starting"]


def test_a_store_held_by_another_process_or_a_joined_node_is_no_leader_verdict():
    t = DeploymentTracker(deployment(), started_at=0.0)
    for host in ("n0", "n1"):
        t.feed(host, GroupChange(pids=[1] if host == "n0" else [3], at=1), 1)
        t.feed(host, phase("init_distributed", 1), 1)
    assert t.store(True, [99], 2) is None
    v = t.store(True, [99], 2 + STORE_GRACE_S)
    assert v is not None and "only PIDs 99 listen there, none of n0's server" in v.reason
    t = DeploymentTracker(deployment(), started_at=0.0)
    for host in ("n0", "n1"):
        t.feed(host, GroupChange(pids=[1] if host == "n0" else [3], at=1), 1)
        t.feed(host, phase("init_distributed", 1), 1)
    t.rendezvous("n1", True, 2)  # a worker joined: the store is up somewhere, the old rule decides
    assert not t.store_unproven() and t.store(False, [], 100) is None


def test_a_timeout_at_init_is_laid_to_the_live_node_that_never_printed_its_init_line():
    """The leader hung before its init line (no store, no line): node1's timeout at init is the
    leader's failure, named as such (issue 38: it was blamed on node1)."""
    t = DeploymentTracker(deployment(), started_at=0.0)
    t.feed("n0", GroupChange(pids=[1], at=1), 1)
    t.feed("n1", GroupChange(pids=[3], at=1), 1)
    t.feed("n1", phase("init_distributed", 2), 2)
    v = t.feed("n1", Verdict(verdict="failed", reason="timed out", error_kind="timeout", at=62), 62)
    assert v is not None and v.failed_node == "n0"
    assert v.reason == "n0: never reached the rendezvous; n1 waiting at init for 60 s (n1: timed out)"
    assert [(n.state, n.reason) for n in v.nodes] == [
        ("failed", "never reached the rendezvous (no init line while n1 waited at init)"),
        ("failed", "timed out"),  # its own verdict, the consequence
    ]
