"""Issue 38's failed-deployment truths on the sim over two loopback sshd nodes (tests/cluster_harness.py):

- a leader that hangs before the rendezvous (it hosts the store: nothing listens there, the workers
  wait at init) is named as the leader within seconds, not blamed on node1 at the ready timeout;
- `status` keeps a launch that failed failed while its nodes' groups still run (the records say so);
- `bench` on a deployment whose node dies during the run marks the result failed naming the node, and
  refuses a deployment with a dead node before measuring anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster_harness import Cluster, cluster_fixture, leftovers_fixture
from tests.deployprofiles import cli, dep_profile, group_alive

pytestmark = [pytest.mark.slow, pytest.mark.spread]  # the cluster fixture is two loopback sshds


cluster = cluster_fixture()


_leftovers = leftovers_fixture()


def test_a_leader_hanging_before_the_rendezvous_is_named_as_the_leader_within_seconds(
    cluster: Cluster, tmp_path: Path
) -> None:
    prof = dep_profile(tmp_path, "leaderhang", node0_args=("--hang-at", "init"))
    # named long before the ready timeout: 600 s here, and the run's limit is 200 s (no clock read)
    prof.write_text(prof.read_text().replace("[ready]\ntimeout_s = 60\n", "[ready]\ntimeout_s = 600\n"))
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json", timeout=200)
    data = json.loads(run.stdout)
    try:
        assert run.returncode == 1 and data["verdict"] == "failed", data
        assert data["failed_node"] == "node0", data["reason"]
        assert data["reason"].startswith("node0: never reached the rendezvous at 127.0.0.2:"), data["reason"]
        assert "nothing listens there" in data["reason"] and "node1 waiting at init" in data["reason"]
        assert [n["state"] for n in data["nodes"]][0] == "failed", data["nodes"]
        print(f"named after {data['elapsed_s']:.1f} s")
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


def _wait_for(cond, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_bench_marks_a_node_dying_during_the_run_and_refuses_a_dead_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    prof = dep_profile(tmp_path, "benchdead")
    session = tmp_path / "session"
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    leader, node1 = json.loads(run.stdout)["nodes"]
    bench_argv = [
        sys.executable, "-m", "specdebug.cli", "bench", "-F", str(cluster.config_path), "-c", str(prof),
        "--requests", "12", "--output-len", "48", "--session", str(session), "--json",
    ]  # fmt: skip
    try:
        log = Path(leader["log_file"])
        start = log.stat().st_size
        bench = subprocess.Popen(bench_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:  # node1 dies once the leader serves the first request: the figures are a broken deployment's
            assert _wait_for(lambda: "POST /v1/completions" in log.read_text()[start:], 60), log.read_text()[
                start:
            ]
            os.killpg(node1["pgid"], signal.SIGKILL)
            out, errs = bench.communicate(timeout=120)
        finally:
            if bench.poll() is None:
                bench.kill()
        result = json.loads(out)
        assert bench.returncode == 1 and result["status"] == "failed", (result, errs)
        assert result["failure_reason"].startswith("a node failed during the benchmark: "), result
        assert "node1: exited" in result["failure_reason"], result["failure_reason"]
        hist = json.loads(cli(cluster, "history", "--session", str(session), "--json").stdout)
        assert [r["status"] for r in hist["results"]] == ["failed"], hist  # journaled failed, not done

        again = cli(
            cluster, "bench", "-c", str(prof), "--requests", "2", "--output-len", "16",
            "--session", str(session), "--json",
        )  # fmt: skip
        assert again.returncode == 1 and again.stdout == "", again.stdout
        assert "not benchmarked: " in again.stderr and "node1: exited" in again.stderr, again.stderr
        assert "Traceback" not in again.stderr
        hist = json.loads(cli(cluster, "history", "--session", str(session), "--json").stdout)
        assert len(hist["results"]) == 1, hist  # the refused run journaled nothing
    finally:
        assert cli(cluster, "stop", "-c", str(prof)).returncode == 0
