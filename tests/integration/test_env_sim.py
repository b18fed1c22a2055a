"""`specdebug env` over the loopback sshd against the simulated box (workers titled by setproctitle).

The sshd runs on this machine, so the sim started here (by hand, or by specdebug's launch through the
sshd) is "on the box".  Workers are named by --pid or found from the launch record, never by a bare
--match: other tests may run sims at the same time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from specdebug.sim.box.local import children_titles
from tests import clifork
from tests.sshd_harness import free_port

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("specdebug.sim.server.sglang.launcher") is None,
    reason="the sim is not built yet",
)

SECRET = "hf_EnvTestSecret_7f3a9c2e51"
TUNING = {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}
TP = 2


def specdebug(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def _children_titled(parent: int, prefix: str) -> list[int]:
    return [pid for pid, title in children_titles(parent).items() if title.startswith(prefix)]


def wait_workers(parent: int, n: int = TP, timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = _children_titled(parent, "sglang::scheduler_TP")
        if len(pids) >= n:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"sim {parent} did not spawn {n} workers")


def wait_log(path: Path, needle: str, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(errors="replace").count(needle) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} x{count} not in {path}")


def sim_argv(log: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "specdebug.sim",
        "--tp",
        str(TP),
        "--port",
        str(free_port()),
        "--log-file",
        str(log),
        "--time-scale",
        "0.02",
        *extra,
    ]


class HandSim:
    """A sim started by hand (not by specdebug): its own session, killed by its group afterwards."""

    def __init__(self, tmp_path: Path, env: dict[str, str], *extra: str) -> None:
        self.log = tmp_path / "sim.log"
        full = {k: v for k, v in os.environ.items() if k != "SPT_NOENV"}
        full.update(env)
        self.proc = subprocess.Popen(
            sim_argv(self.log, *extra),
            env=full,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.workers = wait_workers(self.proc.pid)

    def pid_args(self) -> list[str]:
        return [a for pid in self.workers for a in ("--pid", str(pid))]

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(5)


@pytest.fixture
def hand_sim(tmp_path):
    sims: list[HandSim] = []

    def start(env: dict[str, str], *extra: str) -> HandSim:
        sim = HandSim(tmp_path, env, *extra)
        sims.append(sim)
        return sim

    yield start
    for sim in sims:
        sim.close()


def expect_args(env: dict[str, str]) -> list[str]:
    return [a for k, v in env.items() for a in ("--expect", f"{k}={v}")]


def no_secret(*results: subprocess.CompletedProcess) -> None:
    for r in results:
        assert SECRET not in r.stdout and SECRET not in r.stderr


def test_hand_started_with_spt_noenv_all_ok(sshd, hand_sim):
    sim = hand_sim({**TUNING, "HF_TOKEN": SECRET, "SPT_NOENV": "1"})
    want = {**TUNING, "HF_TOKEN": SECRET}
    r = specdebug("env", "-F", str(sshd.config_path), "gpubox", *sim.pid_args(), *expect_args(want), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [w["pid"] for w in out["workers"]] == sim.workers
    assert out["launcher"]["pid"] == sim.proc.pid
    for w in out["workers"]:
        assert w["environ_state"] == "readable"
        assert w["title"].startswith("sglang::scheduler_TP")
        assert {k: v["status"] for k, v in w["vars"].items()} == {
            "NCCL_PROTO": "ok",
            "NCCL_ALGO": "ok",
            "HF_TOKEN": "ok",
        }
        assert w["vars"]["HF_TOKEN"]["actual"].startswith("<masked #")
    no_secret(r)
    # not exported: the server sets its own NCCL_CUMEM_ENABLE=0 before spawning (current SGLang keeps an
    # exported one; tests/unit/test_format_gaps.py covers that case), and the check says which case it is
    r2 = specdebug(
        "env", "-F", str(sshd.config_path), "gpubox", *sim.pid_args(), "--expect", "NCCL_CUMEM_ENABLE=1"
    )
    assert r2.returncode == 1
    assert (
        f"NCCL_CUMEM_ENABLE (expected 1): has 0 [set by the server itself] on every worker ({TP})"
        in r2.stdout
    )
    assert "NCCL_CUMEM_ENABLE was not exported to the server" in r2.stderr


def test_drop_env_shows_missing_with_names(sshd, hand_sim):
    sim = hand_sim({**TUNING, "SPT_NOENV": "1"}, "--drop-env", "NCCL_")
    r = specdebug("env", "-F", str(sshd.config_path), "gpubox", *sim.pid_args(), *expect_args(TUNING))
    assert r.returncode == 1
    assert f"NCCL_PROTO missing on {TP}/{TP} workers" in r.stderr
    assert f"NCCL_ALGO missing on {TP}/{TP} workers" in r.stderr
    assert "missing" in r.stdout


def test_clobbered_without_spt_noenv_explains(sshd, hand_sim):
    sim = hand_sim({**TUNING, "HF_TOKEN": SECRET})
    r = specdebug(
        "env", "-F", str(sshd.config_path), "gpubox", *sim.pid_args(), *expect_args(TUNING), "--json"
    )
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert {w["environ_state"] for w in out["workers"]} == {"clobbered"}
    assert all(v["status"] == "unverifiable" for w in out["workers"] for v in w["vars"].values())
    for pid in sim.workers:
        assert f"(pid {pid}) is clobbered by setproctitle; relaunch with SPT_NOENV=1" in r.stderr
    assert "environ of sglang::scheduler_TP0 (pid" in r.stderr
    assert "(specdebug launch sets it by default)" in r.stderr
    assert out["launcher"]["environ_state"] == "readable"  # the launcher never calls setproctitle
    no_secret(r)


def test_clobbered_with_nccl_debug_lists_the_proof_lines(sshd, hand_sim):
    sim = hand_sim({**TUNING, "NCCL_DEBUG": "INFO", "HF_TOKEN": SECRET})
    wait_log(sim.log, "NCCL_ALGO set by environment to Ring", TP)
    want = {**TUNING, "HF_TOKEN": SECRET}
    r = specdebug(
        "env",
        "-F",
        str(sshd.config_path),
        "gpubox",
        *sim.pid_args(),
        *expect_args(want),
        "--log",
        str(sim.log),
        "--json",
    )
    no_secret(r)
    # HF_TOKEN has no NCCL proof: unverifiable on clobbered workers -> exit 1 with the explanation
    assert r.returncode == 1
    assert "clobbered by setproctitle" in r.stderr
    out = json.loads(r.stdout)
    nccl = [e for e in out["evidence"] if e["source"] == "nccl_log"]
    assert {(e["pid"], e["name"]) for e in nccl} >= {(p, n) for p in sim.workers for n in TUNING}
    assert all("set by environment to" in e["line"] for e in nccl)
    for w in out["workers"]:
        assert w["vars"]["NCCL_PROTO"] == {
            "status": "ok",
            "expected": "Simple",
            "actual": "Simple",
            "source": "nccl_log",
            "overwritten_by_server": False,
            "note": None,
        }
        assert w["vars"]["HF_TOKEN"]["status"] == "unverifiable"
    # only NCCL vars expected: every one proven by the worker's own NCCL lines -> exit 0, clobbering warned
    r = specdebug(
        "env",
        "-F",
        str(sshd.config_path),
        "gpubox",
        *sim.pid_args(),
        *expect_args(TUNING),
        "--log",
        str(sim.log),
    )
    assert r.returncode == 0, r.stderr
    assert "warning: environ of sglang::scheduler_TP0" in r.stderr
    proven = [line.split() for line in r.stdout.splitlines() if line.startswith(tuple(TUNING))]
    # the launcher's own environ, then each worker's NCCL line
    assert [row[2:] for row in proven] == [["ok", *["ok*"] * TP]] * len(TUNING)


def test_launched_by_specdebug_profile_ok(sshd, tmp_path, box_state_dir):
    name = f"envtest-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "launched.log"
    port = free_port()
    argv = sim_argv(log)
    argv[argv.index("--port") + 1] = str(port)
    env = {**TUNING, "HF_TOKEN": SECRET}
    profile = tmp_path / f"{name}.toml"
    profile.write_text(
        f'name = "{name}"\n[server]\nargv = {json.dumps(argv)}\nlog_file = "{log}"\nport = {port}\n'
        f"env = {{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in env.items())} }}\n"
        '[workers]\nmatch = "^sglang::scheduler"\n'
    )
    cfg = ["-F", str(sshd.config_path), "gpubox"]
    r = specdebug("launch", *cfg, "-c", str(profile))
    assert r.returncode == 0, r.stderr
    try:
        record = json.loads((box_state_dir / f"{name}.json").read_text())
        wait_workers(record["pid"])
        r = specdebug("env", *cfg, "-c", str(profile), "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert len(out["workers"]) == TP
        assert out["launcher"]["pid"] == record["pid"]
        assert out["expected_source"] == f"profile {name}"
        for w in out["workers"]:
            assert {k: v["status"] for k, v in w["vars"].items()} == dict.fromkeys(env, "ok")
        no_secret(r)
        text = specdebug("env", *cfg, "-c", str(profile))
        assert text.returncode == 0 and "verdict: OK" in text.stdout
        no_secret(text)
    finally:
        specdebug("stop", *cfg, "-c", str(profile), "--grace", "2")
        (box_state_dir / f"{name}.json").unlink(missing_ok=True)
