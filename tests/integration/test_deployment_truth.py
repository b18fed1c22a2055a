"""Issue 38's truth checks on the sim's deployments (two loopback sshd nodes, tests/cluster_harness.py):

- a healthy 2 x 8 deployment has no transport finding, though each end of an inter-node edge prints
  its own NIC index (the sim prints GPU d's NIC, d mod 4, as NCCL prints its own: rank 7 on node0
  says NET/IB/3, rank 8 on node1 says NET/IB/0 for the same edge);
- NCCL_IB_DISABLE=1 on one node is a socket finding (its ends over sockets, the other node's over IB)
  and, with `expect_transport = "ib"`, a failing env;
- env and stacks on a profile whose server is not running say so (exit 1), never answering with other
  processes that match its [workers] match; --all-matching is that look, labelled, no verdict.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cluster_harness import Cluster, cluster_fixture, leftovers_fixture
from tests.deployprofiles import cli, dep_profile

pytestmark = [pytest.mark.slow, pytest.mark.spread]  # the cluster fixture is two loopback sshds

TWO_BY_EIGHT = ("--tp", "16", "--time-scale", "0.02")  # 8 ranks per node
NCCL_INFO = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
WORKERS = '[workers]\nmatch = "sglang::scheduler"\n'


cluster = cluster_fixture()


_leftovers = leftovers_fixture()


def launched(cluster: Cluster, prof: Path) -> dict:
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json", timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(run.stdout)
    assert data["verdict"] == "ready", data
    return data


def test_a_healthy_2x8_deployment_has_no_transport_finding(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "2x8", env=NCCL_INFO, sim_args=TWO_BY_EIGHT, tail=WORKERS)
    launched(cluster, prof)
    try:
        env = cli(cluster, "env", "-c", str(prof), "--json")
        data = json.loads(env.stdout)
        proof = data["transport"]
        assert env.returncode == 0, env.stderr
        assert proof["verdict"] == "ib-gdrdma" and proof["findings"] == [], proof["findings"]
        assert [len(n["workers"]) for n in data["nodes"]] == [8, 8]  # sglang::scheduler_TP0..7 per node
        edges = proof["edges"]  # 7->8 and 15->0, channels 0 and 1, each printed by both ends
        assert len(edges) == 8 and {(e["src"], e["dst"]) for e in edges} == {(7, 8), (15, 0)}
        vias = {(e["src"], e["channel"], e["node"]): e["via"] for e in edges}
        # the two ends of one edge print different NIC indices: what the old check called a disagreement
        assert vias[(7, 0, "node0")] == "NET/IB/3/GDRDMA" and vias[(7, 0, "node1")] == "NET/IB/0/GDRDMA"
        assert proof["intra_node"] == {"node0": {"p2p": 14}, "node1": {"p2p": 14}}
        text = cli(cluster, "env", "-c", str(prof))
        assert "transport: ib-gdrdma" in text.stdout and "finding:" not in text.stdout, text.stdout
    finally:
        assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def test_ib_disabled_on_one_node_fails_env_when_ib_is_expected(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(
        tmp_path,
        "noib",
        env=NCCL_INFO,
        node1_env={"NCCL_IB_DISABLE": "1"},
        sim_args=TWO_BY_EIGHT,
        deployment_extra='expect_transport = "ib"\n',
    )
    launched(cluster, prof)
    try:
        env = cli(cluster, "env", "-c", str(prof), "--json")
        proof = json.loads(env.stdout)["transport"]
        assert env.returncode == 1, env.stderr  # every worker's env is as asked: the transport fails it
        assert proof["verdict"] == "socket" and proof["expected"] == "ib"
        # node1's ranks print their ends over sockets, node0's (IB on) over IB: the verdict is the worst
        assert len(proof["failures"]) == 1 and proof["failures"][0].startswith(
            "ib expected, but 4 of 8 inter-node channel lines went socket (printed by node1; "
        ), proof["failures"]
        socket = [f for f in proof["findings"] if "NET/Socket/0" in f]
        assert len(socket) == 4 and all("its two ends disagree (node0 printed NET/IB/" in f for f in socket)
        assert "env: transport: ib expected, but 4 of 8" in env.stderr
        text = cli(cluster, "env", "-c", str(prof))
        assert text.returncode == 1 and "expect_transport): ib: FAILED" in text.stdout, text.stdout
    finally:
        assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def test_env_and_stacks_on_a_server_not_running_say_so(cluster: Cluster, tmp_path: Path) -> None:
    """Another server's workers run on the box (they match the profile's [workers] match): env and
    stacks of a profile never launched, or stopped, say it is not running and show none of them."""
    other = dep_profile(tmp_path, "other", tail=WORKERS)
    others = [n["pid"] for n in launched(cluster, other)["nodes"]]
    mine = dep_profile(tmp_path, "mine", tail=WORKERS)  # never launched
    plain = tmp_path / "plain.toml"  # a one-box profile, never launched
    plain.write_text(
        'name = "dep-plain"\n[server]\nkind = "sglang"\nargv = ["python3", "-m", "specdebug.sim"]\n'
        f"port = 1\n{WORKERS}"
    )
    try:
        for args in (("env", "-c", str(mine)), ("env", "node0", "-c", str(plain))):
            run = cli(cluster, *args)
            assert run.returncode == 1 and "is not running" in run.stderr, (args, run.stdout, run.stderr)
            assert "--all-matching" in run.stderr and "verdict" not in run.stdout
            assert not any(str(pid) in run.stdout for pid in others), run.stdout
        as_json = json.loads(cli(cluster, "env", "-c", str(mine), "--json").stdout)
        assert not as_json["running"] and as_json["transport"] is None
        assert [n["running"] for n in as_json["nodes"]] == [False, False]
        one = json.loads(cli(cluster, "env", "node0", "-c", str(plain), "--json").stdout)
        assert one["running"] is False and one["exit_code"] == 1
        for prof in (mine, plain):  # py-spy never runs on the other server's workers
            run = cli(cluster, "stacks", "node0", "-c", str(prof))
            assert run.returncode == 1 and "is not running on node0" in run.stderr, run.stderr

        look = cli(cluster, "env", "node0", "-c", str(plain), "--all-matching", "--json")
        data = json.loads(look.stdout)
        assert look.returncode == 0 and data["box_wide"] and data["summary"]["ok"] is None, look.stderr
        assert data["summary"]["warnings"][0].startswith("box-wide look: ")
        text = cli(cluster, "env", "node0", "-c", str(plain), "--all-matching").stdout
        assert text.startswith("box-wide look on node0: ") and "FAILED" not in text
        assert re.search(r"box-wide look: \d+ processes, not this profile's server \(no verdict\)", text)

        assert cli(cluster, "stop", "-c", str(other)).returncode == 0
        stopped = cli(cluster, "env", "-c", str(other))
        assert stopped.returncode == 1 and "not running on any of its 2 nodes" in stopped.stderr
        assert "its launch record says it stopped at" in stopped.stderr
        run = cli(cluster, "stacks", "node0", "-c", str(other))
        assert run.returncode == 1 and "is not running on node0" in run.stderr, run.stderr
    finally:
        cli(cluster, "stop", "-c", str(other))
