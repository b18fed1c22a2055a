"""`specdebug env` text for 8 workers is a compact matrix (issue 41: it was 64 lines, a block per
worker): a row per variable, a column per worker, every mismatch visible; `--long` keeps the
block form and `--json` its shape.  Over the loopback sshd against a hand-started 8-worker sim."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.test_env_sim import HandSim, expect_args, specdebug, wait_workers

TP8 = 8
EXPORTED = {
    "NCCL_PROTO": "Simple",
    "NCCL_ALGO": "Ring",
    "NCCL_IB_DISABLE": "0",
    "NCCL_SOCKET_IFNAME": "lo",
    "NCCL_MIN_NCHANNELS": "4",
    "TORCH_NCCL_BLOCKING_WAIT": "0",
    "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1",  # long: shown once below
    "NCCL_NET_GDR_LEVEL": "PHB",
}
# what the workers should have: one not exported (missing), one exported otherwise (different)
EXPECTED = {
    **{k: v for k, v in EXPORTED.items() if k != "NCCL_NET_GDR_LEVEL"},
    "NCCL_NET_GDR_LEVEL": "SYS",
    "NCCL_P2P_LEVEL": "NVL",
}


@pytest.fixture
def sim8(tmp_path):
    sim = HandSim.__new__(HandSim)
    HandSim.__init__(sim, tmp_path, {**EXPORTED, "SPT_NOENV": "1"}, "--tp", str(TP8))
    yield sim
    sim.close()


def test_eight_workers_fit_a_terminal_and_show_every_mismatch(sshd, sim8):
    sim = sim8
    sim.workers = sorted(wait_workers(sim.proc.pid, TP8))
    assert len(sim.workers) == TP8
    cfg = ["-F", str(sshd.config_path), "gpubox"]
    r = specdebug("env", *cfg, *sim.pid_args(), *expect_args(EXPECTED))
    assert r.returncode == 1, r.stderr
    lines = r.stdout.rstrip("\n").splitlines()
    assert len(lines) <= 32, f"{len(lines)} lines:\n{r.stdout}"  # the block form: 64+
    assert max(len(line) for line in lines) <= 120, r.stdout
    # a row per variable; a column per worker, headed by its PID
    pid_row = lines[next(i for i, line in enumerate(lines) if line.startswith("variable ")) + 1]
    assert pid_row.split() == [
        str(sim.proc.pid),
        *map(str, sim.workers),
    ]  # the launcher's, then each worker's

    def row(name: str) -> list[str]:
        return next(line for line in lines if line.startswith(name + " ")).split()

    # the launcher (inherits what was exported), then each worker
    assert row("NCCL_P2P_LEVEL") == ["NCCL_P2P_LEVEL", "NVL", *["MISS"] * (1 + TP8)]
    assert row("NCCL_NET_GDR_LEVEL") == ["NCCL_NET_GDR_LEVEL", "SYS", *["DIFF"] * (1 + TP8)]
    assert row("NCCL_PROTO") == ["NCCL_PROTO", "Simple", *["ok"] * (1 + TP8)]
    # the different value, once, with whom it is on
    diff = [line for line in lines if "(expected SYS)" in line]
    assert diff == [f"  NCCL_NET_GDR_LEVEL (expected SYS): has PHB on every worker ({TP8}) and the launcher"]
    # the long value once, under its note number
    note = re.search(r"^NCCL_IB_HCA\s+(\[\d+\])", r.stdout, re.M)
    assert note is not None
    assert r.stdout.count(EXPORTED["NCCL_IB_HCA"]) == 1
    assert f"{note.group(1)} {EXPORTED['NCCL_IB_HCA']}" in r.stdout
    assert "legend:" in r.stdout and "verdict: FAILED" in r.stdout

    # --long: the block per worker of before
    long = specdebug("env", *cfg, *sim.pid_args(), *expect_args(EXPECTED), "--long")
    assert long.returncode == 1, long.stderr
    assert all(f"worker   pid {p:<7}" in long.stdout for p in sim.workers)
    assert "different   PHB (expected SYS)" in long.stdout
    assert len(long.stdout.splitlines()) > 60
    # --json: the report's shape, unchanged
    js = specdebug("env", *cfg, *sim.pid_args(), *expect_args(EXPECTED), "--json")
    out = json.loads(js.stdout)
    assert [w["pid"] for w in out["workers"]] == sim.workers
    assert all(w["vars"]["NCCL_P2P_LEVEL"]["status"] == "missing" for w in out["workers"])
