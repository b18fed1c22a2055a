"""Issue 38's failed-deployment truths on the sim over two loopback sshd nodes (tests/cluster_harness.py):

- a leader that hangs before the rendezvous (it hosts the store: nothing listens there, the workers
  wait at init) is named as the leader within seconds, not blamed on node1 at the ready timeout;
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cluster_harness import Cluster, kill_recorded, start_cluster
from tests.deployprofiles import cli, dep_profile, group_alive
from tests.sshd_harness import SSHD

pytestmark = [pytest.mark.slow, pytest.mark.spread]  # the cluster fixture is two loopback sshds


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    if SSHD is None:
        pytest.skip("OpenSSH sshd not installed")
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _leftovers(box_state_dir: Path):
    yield
    kill_recorded(box_state_dir, "dep-")


def test_a_leader_hanging_before_the_rendezvous_is_named_as_the_leader_within_seconds(
    cluster: Cluster, tmp_path: Path
) -> None:
    prof = dep_profile(tmp_path, "leaderhang", node0_args=("--hang-at", "init"))
    t0 = time.monotonic()
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    took = time.monotonic() - t0
    data = json.loads(run.stdout)
    try:
        assert run.returncode == 1 and data["verdict"] == "failed", data
        assert data["failed_node"] == "node0", data["reason"]
        assert data["reason"].startswith("node0: never reached the rendezvous at 127.0.0.2:"), data["reason"]
        assert "nothing listens there" in data["reason"] and "node1 waiting at init" in data["reason"]
        assert [n["state"] for n in data["nodes"]][0] == "failed", data["nodes"]
        began = min(n["phases"].get("init_distributed", data["elapsed_s"]) for n in data["nodes"])
        assert data["elapsed_s"] - began < 30 and took < 60, (data, took)  # the ready timeout is 60 s
    finally:
        stop = cli(cluster, "stop", "-c", str(prof), "--json")
    assert stop.returncode == 0 and json.loads(stop.stdout)["stopped"], stop.stdout


def test_status_keeps_a_failed_launch_failed_while_its_groups_run(cluster: Cluster, tmp_path: Path) -> None:
    """node1 never joins: the launch fails naming it, and both groups live on (node0 waits at init):
    status says failed with the launch's reason, until a stop (then stopped)."""
    prof = dep_profile(tmp_path, "keptfailed", node1_args=("--never-join",))
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    data = json.loads(run.stdout)
    try:
        assert run.returncode == 1 and data["failed_node"] == "node1", data
        assert all(group_alive(n["pgid"]) for n in data["nodes"])  # nothing of it exited
        st = cli(cluster, "status", "-c", str(prof), "--json")
        got = json.loads(st.stdout)
        assert st.returncode == 1 and got["state"] == "failed", got
        assert got["reason"].startswith("launch failed: node1: never reached the rendezvous"), got["reason"]
        assert got["reason"].endswith("its processes still run on node0, node1"), got["reason"]
        assert [(n["host"], n["state"]) for n in got["nodes"]] == [("node0", "running"), ("node1", "failed")]
        text = cli(cluster, "status", "-c", str(prof))
        assert text.returncode == 1 and text.stdout.startswith(f"{data['profile']}: failed (launch failed: ")
    finally:
        stop = cli(cluster, "stop", "-c", str(prof), "--json")
    assert stop.returncode == 0 and json.loads(stop.stdout)["stopped"], stop.stdout
    after = json.loads(cli(cluster, "status", "-c", str(prof), "--json").stdout)
    assert after["state"] == "stopped", after
