"""A deployment over two loopback sshd hosts (node0 = 127.0.0.2, node1 = 127.0.0.3, both this
machine): launched as one, status/stop/attach on every node, a node dying after ready named.

Real parts: the sshd harness answering as two hosts, the CLI as a user runs it, the simulated box on
every node (each node its own sim on its own port, given per node in `[deployment.node_args]`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import clifork
from tests.cluster_harness import Cluster, cluster_fixture, leftovers_fixture
from tests.deployprofiles import cli, dep_profile, group_alive
from tests.sshd_harness import free_port

pytestmark = [pytest.mark.slow, pytest.mark.spread]  # the cluster fixture is two loopback sshds


cluster = cluster_fixture()


_leftovers = leftovers_fixture()


def test_launch_as_one_status_and_stop_leave_nothing(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "one")
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["verdict"] == "ready", data
    nodes = data["nodes"]
    assert [(n["host"], n["rank"], n["state"]) for n in nodes] == [
        ("node0", 0, "ready"),
        ("node1", 1, "ready"),
    ]
    assert all(isinstance(n["pid"], int) and n["pgid"] == n["pid"] for n in nodes)
    logs = [Path(n["log_file"]) for n in nodes]
    assert logs[0] != logs[1] and all(p.exists() for p in logs)  # one machine: per-node logs
    assert "node1" in logs[1].name
    # workers first, the leader last
    stderr = run.stderr
    assert stderr.index("node 1 on node1") < stderr.index("node 0 on node0"), stderr

    st = cli(cluster, "status", "-c", str(prof), "--json")
    assert st.returncode == 0, st.stderr
    assert json.loads(st.stdout)["state"] == "running"

    stop = cli(cluster, "stop", "-c", str(prof), "--json")
    assert stop.returncode == 0, stop.stderr
    assert json.loads(stop.stdout)["stopped"] is True
    assert not any(group_alive(n["pgid"]) for n in nodes)
    after = json.loads(cli(cluster, "status", "-c", str(prof), "--json").stdout)
    assert after["state"] == "stopped" and [n["state"] for n in after["nodes"]] == ["stopped", "stopped"]


def test_a_node_dying_after_ready_fails_the_deployment_naming_it(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "dies")
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    node1 = json.loads(run.stdout)["nodes"][1]
    os.killpg(node1["pgid"], signal.SIGKILL)
    t0 = time.monotonic()
    while group_alive(node1["pgid"]) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    st = cli(cluster, "status", "-c", str(prof), "--json")
    data = json.loads(st.stdout)
    assert st.returncode == 1 and data["state"] == "failed", data
    assert data["reason"].startswith("node1: exited") and "node0 still running" in data["reason"]
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def test_a_host_other_than_the_leader_is_refused_and_one_node_needs_a_host(
    cluster: Cluster, tmp_path: Path
) -> None:
    prof = dep_profile(tmp_path, "host")
    run = cli(cluster, "status", "node1", "-c", str(prof))
    assert run.returncode == 2 and "not the deployment's leader 'node0'" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    plain = tmp_path / "plain.toml"
    plain.write_text('[server]\nargv = ["true"]\nkind = "custom"\nport = 1234\n')
    run = cli(cluster, "status", "-c", str(plain))
    assert run.returncode == 2 and "give the HOST" in run.stderr, run.stderr


def test_a_node_that_cannot_launch_refuses_the_whole_deployment(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "busy")
    text = prof.read_text()
    p1 = int(text.split('"node1" = ["--port", "')[1].split('"')[0])
    import socket

    with socket.socket() as s:  # node1's port is taken (on 127.0.0.1, as the box checks it)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", p1))
        s.listen()
        run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 1
    data = json.loads(run.stdout)
    assert data["verdict"] == "refused" and data["reason"].startswith("node1: "), data
    st = json.loads(cli(cluster, "status", "-c", str(prof), "--json").stdout)
    assert [n["state"] for n in st["nodes"]] == ["not_launched", "not_launched"]  # nothing started


def test_grep_follows_every_nodes_log_tagged_by_node(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "grep")
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    logs = {n["host"]: Path(n["log_file"]) for n in json.loads(run.stdout)["nodes"]}
    once = cli(cluster, "grep", "-c", str(prof), "-e", "Init (?:parallel|torch distributed) begin", "--json")
    got = [json.loads(line) for line in once.stdout.splitlines()]
    assert once.returncode == 0 and {g["node"] for g in got} == {"node0", "node1"}, once.stderr
    follow = subprocess.Popen(
        [sys.executable, "-m", "specdebug.cli", "grep", "-F", str(cluster.config_path), "-c", str(prof),
         "-e", "MARK-(?P<n>\\d)", "--follow", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        seen: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            for host, log in logs.items():  # the test owns these files: a line appended on each node
                with log.open("a") as f:
                    f.write(f"MARK-{host[-1]}\n")
            time.sleep(0.5)
            while True:
                ready, _, _ = select.select([follow.stdout], [], [], 0.2)
                if not ready:
                    break
                line = follow.stdout.readline()
                if not line:
                    break
                m = json.loads(line)
                seen[m["node"]] = m["fields"]["n"]
        assert seen == {"node0": 0, "node1": 1}, follow.stderr.read() if follow.poll() is not None else seen
    finally:
        follow.terminate()
        follow.wait(10)
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def test_env_shows_every_nodes_workers_and_the_transport_verdict(cluster: Cluster, tmp_path: Path) -> None:
    """Both nodes' workers with their env, and the transport verdict from every rank's NCCL lines:
    socket when one node has NCCL_IB_DISABLE=1, IB with GPUDirect RDMA by default (the sim)."""
    node1_env = {"NCCL_IB_DISABLE": "1", "NCCL_DEBUG_FILE": str(tmp_path / "nccl.%h.%p")}
    prof = dep_profile(tmp_path, "env", env={"NCCL_DEBUG": "INFO"}, node1_env=node1_env)
    plain = dep_profile(tmp_path, "envib", env={"NCCL_DEBUG": "INFO"})
    for p in (prof, plain):  # side by side on the same loopback nodes: --force past the GPU check
        run = cli(cluster, "launch", "-c", str(p), "--wait", "--json", "--force")
        assert run.returncode == 0, run.stderr
    env = cli(cluster, "env", "-c", str(prof), "--json")
    data = json.loads(env.stdout)
    assert env.returncode == 0, env.stderr
    by_node = {n["host"]: n for n in data["nodes"]}
    assert set(by_node) == {"node0", "node1"} and all(n["workers"] for n in by_node.values())
    assert all(w["vars"]["NCCL_IB_DISABLE"]["status"] == "ok" for w in by_node["node1"]["workers"])
    assert all("NCCL_IB_DISABLE" not in w["vars"] for w in by_node["node0"]["workers"])
    proof = data["transport"]
    assert proof["verdict"] == "socket", proof["reason"]
    assert {(e["src_node"], e["dst_node"]) for e in proof["edges"]} == {
        ("node0", "node1"),
        ("node1", "node0"),
    }
    assert any(e["node"] == "node1" and e["via"] == "NET/Socket/0" for e in proof["edges"])
    assert any(f.startswith("node1: NCCL_DEBUG_FILE=") for f in proof["findings"]), proof["findings"]
    ib = json.loads(cli(cluster, "env", "-c", str(plain), "--json").stdout)["transport"]
    assert ib["verdict"] == "ib-gdrdma" and ib["findings"] == [], ib["reason"]
    text = cli(cluster, "env", "-c", str(prof))
    assert "\nnode 1 node1: " in text.stdout and "transport: socket" in text.stdout, text.stderr
    for p in (prof, plain):
        assert cli(cluster, "stop", "-c", str(p)).returncode == 0


def test_bench_targets_the_leader(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "bench")
    assert cli(cluster, "launch", "-c", str(prof), "--wait").returncode == 0
    run = cli(cluster, "bench", "-c", str(prof), "--requests", "2", "--output-len", "16", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["host"] == "node0" and data["status"] == "done", data
    gpus = data["gpus_by_node"]  # every node's GPUs, the leader's also under gpu_before/gpu_after
    assert list(gpus) == ["node0", "node1"] and gpus["node1"]["before"], gpus
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


@pytest.mark.parametrize(
    ("case", "node1_args", "node1_env"),
    [
        ("never-joins", ("--never-join",), None),  # the others would wait 600 s (torch's default)
        (
            "wrong-interface",
            ("--dist-timeout", "30"),
            {"NCCL_SOCKET_IFNAME": "=nosuchnic0", "NCCL_DEBUG": "INFO"},
        ),
    ],
)
def test_a_node_failing_at_the_rendezvous_is_named_within_seconds(
    cluster: Cluster, tmp_path: Path, case: str, node1_args: tuple[str, ...], node1_env: dict | None
) -> None:
    prof = dep_profile(tmp_path, case, node1_args=node1_args, node1_env=node1_env)
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    data = json.loads(run.stdout)
    assert run.returncode == 1 and data["verdict"] == "failed", data
    assert data["failed_node"] == "node1" and data["reason"].startswith("node1: "), data["reason"]
    # seconds after the rendezvous began, not a timeout; a node slow to start may not have logged its
    # init line yet when the other's failure decides the deployment (then: seconds after the launch)
    began = min(
        (n["phases"]["init_distributed"] for n in data["nodes"] if "init_distributed" in n["phases"]),
        default=0.0,
    )
    assert data["elapsed_s"] - began < 20, data
    if case == "never-joins":
        assert (
            "never reached the rendezvous at 127.0.0.2:" in data["reason"]
            and "node0 waiting at init" in data["reason"]
        )
    else:  # NCCL's own warning and the node's pin, not only torch's "Internal check failed"
        assert "NCCL WARN Bootstrap : no socket interface found" in data["reason"], data["reason"]
        assert "NCCL_SOCKET_IFNAME==nosuchnic0" in data["reason"]
    assert [n["state"] for n in data["nodes"]][1] == "failed"
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def settled_status(cluster: Cluster, prof: Path, timeout: float) -> dict:
    """`status --json` once it leaves running: a node killed as a whole is "unverified" for as long as
    its members are still exiting (the box cannot prove them), then failed; that moment is longer on
    a loaded machine, so it is waited out like running."""
    deadline = time.monotonic() + timeout
    while True:
        st = json.loads(cli(cluster, "status", "-c", str(prof), "--json").stdout)
        if st["state"] not in ("running", "unverified") or time.monotonic() > deadline:
            return st
        time.sleep(0.5)


def test_a_node_dying_on_its_own_after_ready_is_named_by_status(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "selfdie", node1_args=("--die-after-ready", "2"))
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    st = settled_status(cluster, prof, 30)
    assert st["state"] == "failed" and st["reason"].startswith("node1: exited"), st
    assert st["health"] == 200  # the leader still answers
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def test_vllm_mode_deployment_launches_as_one_and_stops(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "vllm", kind="vllm", env={"NCCL_DEBUG": "INFO"})
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["verdict"] == "ready" and [n["state"] for n in data["nodes"]] == ["ready", "ready"], data
    env = json.loads(cli(cluster, "env", "-c", str(prof), "--json").stdout)
    assert {n["host"] for n in env["nodes"] if n["workers"]} == {"node0", "node1"}
    assert env["transport"]["verdict"] == "ib-gdrdma", env["transport"]["reason"]
    stop = cli(cluster, "stop", "-c", str(prof), "--json")
    assert stop.returncode == 0 and json.loads(stop.stdout)["stopped"], stop.stdout
    assert not any(group_alive(n["pgid"]) for n in data["nodes"])


def test_attach_and_restart_act_on_every_node(cluster: Cluster, tmp_path: Path) -> None:
    prof = dep_profile(tmp_path, "attach")
    first = json.loads(cli(cluster, "launch", "-c", str(prof), "--wait", "--json").stdout)
    assert first["verdict"] == "ready", first
    att = cli(cluster, "attach", "-c", str(prof), "--json", "--timeout", "30")
    data = json.loads(att.stdout)
    assert att.returncode == 0 and data["verdict"] == "ready", att.stderr
    assert [n["pid"] for n in data["nodes"]] == [n["pid"] for n in first["nodes"]]  # the same servers
    again = cli(cluster, "restart", "-c", str(prof), "--wait", "--json", "--grace", "5")
    data = json.loads(again.stdout)
    assert again.returncode == 0 and data["verdict"] == "ready", again.stderr
    assert not any(group_alive(n["pgid"]) for n in first["nodes"])  # the old ones are gone on both nodes
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def test_an_nccl_watchdog_timeout_on_a_node_fails_the_deployment_in_status(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The node's group lives on (its dummy /health still says 200) after a rank's collective timed out:
    status reads the watchdog's line of this run and names the node with how far its rank got."""
    prof = dep_profile(tmp_path, "watchdog", node1_args=("--nccl-timeout-after", "1", "--dist-timeout", "5"))
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    st = settled_status(cluster, prof, 40)
    assert st["state"] == "failed" and st["reason"].startswith("node1: failed (NCCL watchdog: "), st
    assert "last completed NCCL work: 31" in st["reason"] and st["nodes"][0]["state"] == "running"
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0


def test_an_unreachable_node_is_unverified_and_stop_still_stops_the_others(
    cluster: Cluster, tmp_path: Path
) -> None:
    prof = dep_profile(tmp_path, "unreach")
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    assert run.returncode == 0, run.stderr
    nodes = json.loads(run.stdout)["nodes"]
    broken = tmp_path / "ssh_config_node1_down"  # node1's port points nowhere: connection refused
    text = cluster.config_path.read_text().split("Host node1")
    broken.write_text(
        text[0] + "Host node1" + text[1].replace(f"Port {cluster.sshd.port}", f"Port {free_port()}")
    )
    down = clifork.run(
        [sys.executable, "-m", "specdebug.cli", "status", "-F", str(broken), "-c", str(prof), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    st = json.loads(down.stdout)
    assert down.returncode == 1 and st["state"] == "unverified", st
    assert [n["state"] for n in st["nodes"]] == ["running", "unverified"] and "node1" in down.stderr
    stop = clifork.run(
        [sys.executable, "-m", "specdebug.cli", "stop", "-F", str(broken), "-c", str(prof), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    res = json.loads(stop.stdout)
    assert stop.returncode == 1 and not res["stopped"], res
    assert [r["stopped"] for r in res["nodes"]] == [True, False]
    assert not group_alive(nodes[0]["pgid"]) and group_alive(nodes[1]["pgid"])
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0  # reachable again: the rest stops
    assert not group_alive(nodes[1]["pgid"])
    launch = clifork.run(
        [sys.executable, "-m", "specdebug.cli", "launch", "-F", str(broken), "-c", str(prof), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    refused = json.loads(launch.stdout)
    assert (
        launch.returncode == 1 and refused["verdict"] == "refused" and refused["reason"].startswith("node1: ")
    )
    st = json.loads(cli(cluster, "status", "-c", str(prof), "--json").stdout)
    assert st["state"] == "stopped", st  # nothing started on node0 either


def test_a_vllm_worker_nodes_reason_is_its_own_first_error_not_vllms_wrapper(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Gloo cannot find node1's interface: node1's reason is Gloo's own line, not the wrappers vLLM
    logs after it (`WorkerProc initialization failed ...`, `Executor failed to start.`)."""
    prof = dep_profile(tmp_path, "gloo", kind="vllm", node1_env={"GLOO_SOCKET_IFNAME": "ib0"})
    run = cli(cluster, "launch", "-c", str(prof), "--wait", "--json")
    data = json.loads(run.stdout)
    assert run.returncode == 1 and data["failed_node"] == "node1", data
    node1 = data["nodes"][1]
    assert "Unable to find address for: ib0" in node1["reason"], node1["reason"]
    assert "WorkerProc initialization failed" not in data["reason"], data["reason"]
    assert cli(cluster, "stop", "-c", str(prof)).returncode == 0
