"""Bench and bisect on a deployment over two loopback sshd hosts (node0 = 127.0.0.2, node1 =
127.0.0.3), each node with its own simulated GPUs: bench targets the leader and records every
node's GPUs (a throttled GPU on node1 is in the result, its warnings, `history`); a bisection
moves each knob on every node at once and launches, waits for and stops the whole deployment.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from specdebug.core.bisect.models import Measurement, Role, Settings, Status
from specdebug.core.bisect.trial import Nodes, TrialSpec, run_trial
from specdebug.core.deployment import place
from specdebug.core.deployment.status import target_status
from specdebug.core.profiles import load_profile
from specdebug.core.target import target_of
from tests.bisectprofiles import BASE, NCCL
from tests.boxes import ssh_box
from tests.cluster_harness import Cluster, cluster_fixture, leftovers_fixture
from tests.deployprofiles import cli, dep_profile, group_alive
from tests.sshd_harness import free_port

pytestmark = [pytest.mark.slow, pytest.mark.spread]  # the cluster fixture is two loopback sshds


cluster = cluster_fixture("gpucluster", gpus=True)


_leftovers = leftovers_fixture()


def test_bench_records_every_nodes_gpus_and_names_node1s_throttled_gpu(
    cluster: Cluster, tmp_path: Path
) -> None:
    prof = dep_profile(tmp_path, "gpus", node1_args=("--throttle-gpu", "0", "--throttle-after", "0"))
    session = tmp_path / "session"
    assert cli(cluster, "launch", "-c", str(prof), "--wait").returncode == 0
    try:
        run = cli(
            cluster, "bench", "-c", str(prof), "--requests", "2", "--output-len", "16",
            "--session", str(session), "--json",
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        data = json.loads(run.stdout)
    finally:
        assert cli(cluster, "stop", "-c", str(prof)).returncode == 0
    assert data["host"] == "node0" and data["status"] == "done", data
    by_node = data["gpus_by_node"]
    assert list(by_node) == ["node0", "node1"], by_node
    hot = {
        (node, g["index"]) for node, s in by_node.items() for g in s["before"] + s["after"]
        if "sw_thermal_slowdown" in g["throttle_reasons"]
    }  # fmt: skip
    assert hot == {("node1", 0)}, by_node  # tp 2 over 2 nodes: GPU 0 of each
    assert data["gpu_before"] == by_node["node0"]["before"]  # the leader's, under the one-box keys
    assert any(w.startswith("GPU 0 on node1 throttled") for w in data["warnings"]), data["warnings"]
    assert not any(w.startswith("GPU") and "on node0" in w for w in data["warnings"]), data["warnings"]
    hist = cli(cluster, "history", "--session", str(session), "--json")
    assert hist.returncode == 0, hist.stderr
    assert "GPU 0 on node1 throttled" in hist.stdout
    report = cli(cluster, "report", "--session", str(session))
    assert report.returncode == 0 and "GPU 0 on node1 throttled" in report.stdout, report.stderr


# one request: the bisection judges by the server's gen_throughput, and with two a log sample spans
# the client's round trip between them (this loaded machine's, not the sim's clock: cannot-tell once)
BENCH = "[bench]\nrequests = 1\noutput_len = 96\ninput_len = 32\nwarmup_requests = 0\n"
# the sim's cost model: a missing NCCL tuning var slows every verify (bisectprofiles' NCCL env)
SIM = ("--tp", "2", "--time-scale", "0", *BASE[4:])


def dep_pair(
    tmp_path: Path, *, bad_env: dict, bad_flags: tuple[str, ...], bad_node1_env: dict | None = None
) -> tuple[Path, Path]:
    """good and bad 2-node deployments on the same ports and rendezvous (one experiment's two sides)."""
    ports = (free_port(), free_port(), free_port())
    tag = uuid.uuid4().hex[:6]
    good = dep_profile(
        tmp_path, "g", name=f"dep-bxgood-{tag}", ports=ports, sim_args=SIM, env=NCCL, tail=BENCH
    )
    bad = dep_profile(
        tmp_path,
        "b",
        name=f"dep-bxbad-{tag}",
        ports=ports,
        sim_args=SIM,
        env=bad_env,
        extra=bad_flags,
        node1_env=bad_node1_env,
        tail=BENCH,
    )
    return good, bad


def test_bisect_moves_each_knob_on_every_node_and_finds_the_nccl_var(
    cluster: Cluster, tmp_path: Path, box_state_dir: Path
) -> None:
    env = {k: v for k, v in NCCL.items() if k != "NCCL_ALGO"}  # the bad side lost NCCL_ALGO
    # and a neutral flag on every node, a neutral env var on node1 only (a knob of that node)
    good, bad = dep_pair(
        tmp_path, bad_env=env, bad_flags=("--schedule-policy", "lpm"), bad_node1_env={"SIM_HARMLESS_00": "1"}
    )
    session = tmp_path / "session"
    run = cli(
        cluster, "bisect", "--good", str(good), "--bad", str(bad), "--session", str(session),
        "--metric", "gen_throughput", "--json", timeout=400,
    )  # fmt: skip
    data = json.loads(run.stdout)
    assert data["verdict"] == "found" and data["culprits"] == ["NCCL_ALGO"], (data, run.stderr[-3000:])
    assert run.returncode == 0 and data["confirmed"], data
    assert {k["name"] for k in data["knobs"]} == {"NCCL_ALGO", "--schedule-policy", "[node1] SIM_HARMLESS_00"}
    # every trial launched both nodes and stopped both: no record of the bisection left running
    status = [cli(cluster, "status", "-c", str(p), "--json") for p in (good, bad)]
    for st in status:
        assert json.loads(st.stdout)["state"] in ("stopped", "not_launched"), st.stdout
    for node in ("node0", "node1"):  # the candidate ran on both nodes, each with its own log
        assert list(tmp_path.glob(f"dep-bxgood-*.bx-*.{node}.log")), sorted(tmp_path.iterdir())
    records = [json.loads(p.read_text()) for p in box_state_dir.glob("*.json")]
    assert records and not [r for r in records if group_alive(r["pgid"])], records  # nothing left


def test_bisect_refuses_deployments_on_different_nodes(cluster: Cluster, tmp_path: Path) -> None:
    good, _ = dep_pair(tmp_path, bad_env=NCCL, bad_flags=("--schedule-policy", "lpm"))
    bad = dep_profile(tmp_path, "other", sim_args=SIM, env=NCCL, nodes=("node0", "node2"), tail=BENCH)
    run = cli(cluster, "bisect", "--good", str(good), "--bad", str(bad), "--json")
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "the deployments' nodes differ (good: node0, node1; bad: node0, node2)" in lines[0]
    )


@pytest.mark.parametrize(
    ("case", "node1_args"),
    [
        ("never-joins", ("--never-join",)),
        # dies 1 s after its ready: before the deployment is ready, or during the ~3 s benchmark
        ("dies", ("--die-after-ready", "1")),
    ],
)
def test_a_trial_whose_node_fails_is_a_failed_start_naming_it(
    cluster: Cluster, tmp_path: Path, case: str, node1_args: tuple[str, ...]
) -> None:
    prof = load_profile(
        dep_profile(tmp_path, case, sim_args=SIM, env=NCCL, node1_args=node1_args, tail=BENCH)
    )

    async def run() -> list:
        remotes = {n: ssh_box(n, ssh_config=cluster.config_path) for n in ("node0", "node1")}
        for r in remotes.values():
            await r.start()
            await r.wait_connected(15)
        try:
            nodes = Nodes(remotes=remotes, place=lambda p: place(p, ssh_config=cluster.config_path))
            spec = TrialSpec(
                bisect="t", index=1, role=Role.BAD, profile=prof, fingerprint=prof.fingerprint(),
                applied=[], settings=Settings(requests=2, output_len=150, concurrency=1, input_len=32),
            )  # fmt: skip
            out = [x async for x in run_trial(remotes["node0"], spec, nodes=nodes)]
            st = await target_status(target_of(nodes.place(prof), remotes))
            return [*out, st]
        finally:
            for r in remotes.values():
                await r.close()

    *events, m, st = asyncio.run(run())
    assert isinstance(m, Measurement) and m.status is Status.FAILED_START, m
    if case == "never-joins":
        assert m.reason.startswith("failed to start: node1: never reached the rendezvous"), m.reason
    else:
        assert m.reason.startswith(
            ("failed to start: node1: ", "a node died during the benchmark: node1: ")
        ), m.reason
    assert st.state == "stopped" and [n.state for n in st.nodes] == ["stopped", "stopped"], st
