"""`specdebug stacks` on the sim's vLLM mode over the real loopback sshd, with the real py-spy (issue 37).

The sim's engine core and workers run in frames named and filed like real vLLM's (sim.server.vllm.
frames), so this checks the shapes a real server shows: idle, the engine core waits in
`EngineCoreProc._process_input_queue` (core.py) and each worker in `MessageQueue.dequeue`
(shm_broadcast.py) under `WorkerProc.worker_busy_loop` (multiproc_executor.py); the engine core is
told apart from the workers and is no rank; under load the workers are named busy (forward,
sampling or the n-gram drafter).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_stacks_sim import Launched, specdebug
from tests.sshd_harness import free_port, on_session_path

pytestmark = pytest.mark.skipif(
    not on_session_path("py-spy"), reason="py-spy not installed (pip install py-spy)"
)
NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":1}'
BUSY = ("in the forward pass", "in sampling", "in the drafter")


def write_profile(tmp: Path) -> Path:
    port = free_port()
    argv = [sys.executable, "-m", "specdebug.sim", "--engine", "vllm", "--model", "m"]
    argv += ["--tensor-parallel-size", "2", "--port", str(port), "--time-scale", "0.02"]
    argv += ["--speculative-config", NGRAM]
    path = tmp / "v.toml"
    path.write_text(
        f'name = "v"\n[server]\nkind = "vllm"\nargv = {json.dumps(argv)}\nport = {port}\n'
        f"log_file = {json.dumps(str(tmp / 'v.log'))}\n"
        '[workers]\nmatch = "VLLM::"\n'
    )
    return path


def dump_until(srv: Launched, done, what: str) -> dict:
    """`stacks --json` until `done(dump)` (a rank on a loaded box may still be on its way), with a deadline."""
    deadline = time.monotonic() + 30
    while True:
        r = specdebug("stacks", *srv.ssh, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        d = json.loads(r.stdout)
        if done(d):
            return d
        assert time.monotonic() < deadline, f"never {what}: " + json.dumps(d["groups"])[:3000]
        time.sleep(0.5)


def names_files(group: dict) -> list[tuple[str, str]]:
    return [(f["name"], Path(f["file"]).name) for f in group["frames"]]


def test_idle_engine_core_and_workers_read_as_real_vllm(sshd, tmp_path: Path) -> None:
    with Launched(sshd, write_profile(tmp_path)) as srv:
        d = dump_until(
            srv, lambda d: all(g["phase"] == "idle (waiting for work)" for g in d["groups"]), "idle"
        )
        human = specdebug("stacks", *srv.ssh)
        load = subprocess.Popen(
            [sys.executable, "-m", "specdebug.cli", "bench", *srv.ssh, "--requests", "2"]
            + ["--concurrency", "2", "--output-len", "4000", "--session", str(tmp_path / "s")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            busy = dump_until(
                srv,
                lambda d: any(g["role"] == "worker" and g["phase"].startswith(BUSY) for g in d["groups"]),
                "busy",
            )
        finally:
            load.kill()
            load.wait(10)
    roles = sorted((w["role"], w["rank"], w["label"]) for w in d["workers"])
    assert roles == [("engine core", None, ""), ("worker", 0, "TP0"), ("worker", 1, "TP1")]
    workers, core = d["groups"]
    assert (workers["role"], workers["ranks"], workers["differs"]) == ("worker", [0, 1], False)
    assert (core["role"], core["ranks"], core["differs"]) == ("engine core", [], False)
    assert ("MessageQueue.dequeue", "shm_broadcast.py") in names_files(workers)
    assert ("WorkerProc.worker_busy_loop", "multiproc_executor.py") in names_files(workers)
    assert ("EngineCoreProc._process_input_queue", "core.py") in names_files(core)
    assert names_files(core)[:2] == [("Condition.wait", "threading.py"), ("Queue.get", "queue.py")]
    assert d["summary"] == (
        "workers: all 2 rank(s) in the same stack: idle (waiting for work); engine core: idle (waiting for work)"
    )
    assert human.returncode == 0 and "differs" not in human.stdout
    assert "ranks 0, 1 = TP0, TP1" in human.stdout and "engine core (pids" in human.stdout
    busy_names = {f["name"] for g in busy["groups"] if g["role"] == "worker" for f in g["frames"]}
    assert "WorkerProc._execute_worker_rpc" in busy_names
    assert busy_names & {"GPUModelRunner._model_forward", "GPUModelRunner._sample", "NgramProposer.propose"}
