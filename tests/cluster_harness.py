"""Two "nodes" for multi-node tests: one real sshd answering on 127.0.0.2 and 127.0.0.3.

Both nodes are this machine, so what the deployment keeps per node (records, logs) must never
collide (the deployment names them by rank and node); the ssh config gives each node its alias
(node0, node1) and HostName, which the deployment's default leader address is read from.
"""

from __future__ import annotations

import getpass
import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.sshd_harness import Sshd, start_sshd

NODES = {"node0": "127.0.0.2", "node1": "127.0.0.3"}


@dataclass
class Cluster:
    sshd: Sshd
    config_path: Path
    nodes: dict[str, str]

    def stop(self) -> None:
        self.sshd.stop()


def start_cluster(workdir: Path, nodes: dict[str, str] = NODES, *, gpus: bool = False) -> Cluster:
    """`gpus`: each node its own 8 simulated GPUs (the sim's nvidia-smi first on that node's PATH,
    its own load folder), so what a node's sim does to its GPUs shows on that node only."""
    address_env: dict[str, dict[str, str]] = {}
    if gpus:
        from specdebug.sim.box.nvidia_smi import ENV_DIR, write_shim

        for alias, addr in nodes.items():
            bin_dir, gpu_dir = workdir / f"bin-{alias}", workdir / f"gpus-{alias}"
            gpu_dir.mkdir(parents=True, exist_ok=True)
            write_shim(bin_dir)
            address_env[addr] = {"PATH": str(bin_dir), ENV_DIR: str(gpu_dir)}
    sshd = start_sshd(workdir, listen=tuple(nodes.values()), max_sessions=30, address_env=address_env)
    lines: list[str] = []
    for alias, addr in nodes.items():
        lines += [
            f"Host {alias}",
            f"  HostName {addr}",
            f"  Port {sshd.port}",
            f"  User {getpass.getuser()}",
            f"  IdentityFile {sshd.client_key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {sshd.known_hosts}",
        ]
    config = workdir / "cluster_ssh_config"
    config.write_text("\n".join(lines) + "\n")
    return Cluster(sshd=sshd, config_path=config, nodes=dict(nodes))


def kill_recorded(state_dir: Path, marker: str) -> int:
    """Kill every process group a record in `state_dir` names whose leader still runs our `marker`
    (a test's own name in its command line: never a reused PID); the records are removed."""
    return sum(kill_record(path, marker) for path in (state_dir.glob("*.json") if state_dir.is_dir() else []))


def kill_record(path: Path, marker: str) -> bool:
    """Kill the process group one server record names if its leader still runs our `marker`; the
    record is removed either way.  True: a group was killed."""
    try:
        pgid = json.loads(path.read_text())["pgid"]
        leader = Path(f"/proc/{pgid}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError):
        path.unlink(missing_ok=True)
        return False
    killed = marker.encode() in leader
    if killed:
        os.killpg(pgid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return killed


def cluster_fixture(folder: str = "cluster", *, gpus: bool = False) -> Any:
    """The module's two-node loopback cluster as a pytest fixture (`cluster = cluster_fixture()` in a test
    module): one place for the set-up five deployment files repeated."""
    import pytest

    from tests.sshd_harness import SSHD

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
        if SSHD is None:
            pytest.skip("OpenSSH sshd not installed")
        c = start_cluster(tmp_path_factory.mktemp(folder), gpus=gpus)
        yield c
        c.stop()

    return cluster


def leftovers_fixture(marker: str = "dep-") -> Any:
    """An autouse fixture that kills what a failing test left recorded under `marker` in its state folder."""
    import pytest

    @pytest.fixture(autouse=True)
    def _leftovers(box_state_dir: Path) -> Iterator[None]:
        yield
        kill_recorded(box_state_dir, marker)

    return _leftovers
