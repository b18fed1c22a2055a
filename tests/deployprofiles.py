"""Two-node deployment profiles of the sim for the cluster tests (tests/cluster_harness.py), and
the CLI as a user runs it against the cluster: shared by the deployment, bench and bisect tests."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from tests import clifork
from tests.cluster_harness import Cluster
from tests.leakcheck import living_groups
from tests.sshd_harness import free_port


def cli(cluster: Cluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    verb, rest = args[0], args[1:]
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", verb, "-F", str(cluster.config_path), *rest],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def dep_profile(
    tmp_path: Path,
    stem: str,
    *,
    kind: str = "sglang",
    env: dict | None = None,
    node1_env: dict | None = None,
    node1_args: tuple[str, ...] = (),
    node0_args: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
    name: str | None = None,
    ports: tuple[int, int, int] | None = None,
    sim_args: tuple[str, ...] = ("--tp", "2", "--time-scale", "0.02"),
    tail: str = "",
    nodes: tuple[str, str] = ("node0", "node1"),
    leader_address: str | None = None,
    deployment_extra: str = "",
) -> Path:
    """A two-node deployment of the sim; each node its own port and sidecar (the nodes share a machine).
    `ports` (node0, node1, rendezvous) and `name` let two profiles be one experiment's two sides
    (a bisection's good and bad); `tail` is more TOML (e.g. a [bench] table); `deployment_extra` more
    keys of [deployment] (e.g. expect_transport); `node0_args` flags of the leader alone (a fault of its own)."""
    name = name or f"dep-{stem}-{uuid.uuid4().hex[:6]}"
    p0, p1, dist = ports or (free_port(), free_port(), free_port())
    argv = [sys.executable, "-m", "specdebug.sim", *sim_args, "--port", str(p0)]
    if kind == "vllm":  # vLLM's multiprocessing mode: the engine adds --master-addr/--master-port, --headless
        argv = [sys.executable, "-m", "specdebug.sim", "--engine", "vllm", "serve", "m", "-tp", "2"]
        argv += ["--port", str(p0), "--time-scale", "0.02"]
    argv += ["--log-file", str(tmp_path / f"{name}.n0.sim.log"), *extra]
    text = (
        f"name = {json.dumps(name)}\n[server]\nkind = {json.dumps(kind)}\nargv = {json.dumps(argv)}\n"
        f"log_file = {json.dumps(str(tmp_path / f'{name}.log'))}\nport = {p0}\n"
        + "".join(f"env.{k} = {json.dumps(v)}\n" for k, v in (env or {}).items())
        + "[ready]\ntimeout_s = 60\n"
        f"[deployment]\nnodes = {json.dumps(list(nodes))}\ndist_init_port = {dist}\n"
        + (f"leader_address = {json.dumps(leader_address)}\n" if leader_address else "")
        + deployment_extra
        + "[deployment.node_args]\n"
        + (f"{json.dumps(nodes[0])} = {json.dumps(list(node0_args))}\n" if node0_args else "")
        + f"{json.dumps(nodes[1])} = {json.dumps(['--port', str(p1), '--log-file', str(tmp_path / f'{name}.n1.sim.log'), *node1_args])}\n"
    )
    if node1_env:
        text += f"[deployment.node_env.{json.dumps(nodes[1])}]\n" + "".join(
            f"{k} = {json.dumps(v)}\n" for k, v in node1_env.items()
        )
    path = tmp_path / f"{name}.toml"
    path.write_text(text + tail)
    return path


def group_alive(pgid: int) -> bool:
    """A live (not zombie) process in the group: a killed one waits a moment for its reaper."""
    return bool(living_groups([pgid]))
