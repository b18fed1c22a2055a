"""`specdebug spec --advise` and `--try` on the vLLM flavour of the sim, over the real loopback sshd.

The session holds the plain-decode baseline and EAGLE-3 at 1 and 3 speculative tokens (launched,
benchmarked and stopped through the core calls `launch` and `bench` use).  `--advise --json` gives a
prediction with an interval for each depth of the grid (1..5), the measured depths marked, the best,
and every input with its source.  `--try` launches the advised depth (the profile's argv with it
applied), benchmarks it, stops it, and records predicted against measured in the journal; the
measurement meets the prediction (the sim's cost model is linear in depth, as the advisor's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specdebug.core.bench.runner import BenchRequest, run_benchmark
from specdebug.core.control import actions as server_control
from specdebug.core.control.events import Verdict
from specdebug.core.control.launch import launch
from specdebug.core.control.watch import watch
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile
from specdebug.core.records import SpecAdviceTryRecord
from tests import clifork
from tests.pace import CpuWatch, rate_ok
from tests.security.boxkit import forget_server, unique, write_profile
from tests.sshd_harness import free_port

pytestmark = pytest.mark.slow
NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
DRAFTER = "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B"


def profile_file(folder: Path, name: str, port: int, tokens: int) -> Path:
    argv = [sys.executable, "-m", "specdebug.sim", "--engine", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
            "-tp", "1", "--host", "127.0.0.1", "--port", str(port), "--time-scale", "0"]  # fmt: skip
    if tokens:
        spec = {"method": "eagle3", "model": DRAFTER, "num_speculative_tokens": tokens}
        argv += ["--speculative-config", json.dumps(spec)]
    server = {
        "argv": argv,
        "port": port,
        "log_file": str(folder / f"{name}.log"),
        "kind": "vllm",
        "env": NCCL,
    }
    bench = {"requests": 2, "concurrency": 1, "input_len": 16, "output_len": 200}
    return write_profile(folder / f"{name}.toml", name, server, ready={"timeout_s": 60}, bench=bench)


def specdebug(*args: str) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args], capture_output=True, text=True, timeout=240
    )


async def measure(remote, path: Path, journal: Journal) -> None:
    profile = load_profile(path)
    record = await launch(remote, profile, journal=journal)
    try:
        verdict = None
        async for ev in watch(remote, record, profile, journal=journal):
            if isinstance(ev, Verdict):
                verdict = ev
        assert verdict is not None and verdict.verdict == "ready", verdict
        req = BenchRequest(requests=2, output_len=200, input_len=16)
        res = await run_benchmark(remote, profile, req, journal=journal, host="gpubox")
        assert res.status == "done", res.errors
    finally:
        await server_control.stop_record(remote, record, grace_s=5, journal=journal)


@pytest.mark.timeout(420)
async def test_advise_predicts_each_depth_and_try_checks_the_best(remote, sshd, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "session")
    port = free_port()
    names = {tokens: unique(f"advice-vllm-{tokens}") for tokens in (0, 1, 3)}
    paths = {tokens: profile_file(tmp_path, names[tokens], port, tokens) for tokens in names}
    tried_name = None
    try:
        for tokens in (0, 1, 3):
            await measure(remote, paths[tokens], journal)
        ssh = (
            "-F",
            str(sshd.config_path),
            "gpubox",
            "-c",
            str(paths[3]),
            "--session",
            str(journal.session_dir),
        )
        got = specdebug("spec", *ssh, "--advise", "--json")
        assert got.returncode == 0, got.stderr
        advice = json.loads(got.stdout)["advice"]
        cands = {c["depth"]: c for c in advice["candidates"]}
        assert sorted(cands) == [1, 2, 3, 4, 5]
        for c in cands.values():
            assert c["low"] < c["predicted_tok_s"] < c["high"], c
        assert cands[1]["measured_by"] and cands[3]["measured_by"] and not cands[2]["measured_by"]
        assert cands[4]["extrapolated"] and not cands[2]["extrapolated"]
        best = advice["best"]
        assert best["depth"] in cands and best["predicted_tok_s"] == max(
            c["predicted_tok_s"] for c in cands.values()
        )
        assert advice["cycle_model"].startswith("cycle = ") and "least squares" in advice["cycle_model"]
        assert any(i.startswith("acceptance: ") and "/metrics" in i for i in advice["inputs"]), advice[
            "inputs"
        ]
        assert any(i.startswith("baseline decode step") for i in advice["inputs"])
        assert advice["measure_next"]

        human = specdebug("spec", *ssh, "--advise")
        assert human.returncode == 0 and "advice for " in human.stdout and "measure next:" in human.stdout

        tried_name = f"{names[3]}.try-d{best['depth']}"
        with CpuWatch() as cpu:
            got = specdebug("spec", *ssh, "--try", "--json")
        assert got.returncode == 0, got.stderr
        tried = json.loads(got.stdout)["tried"]
        assert tried["config"] == tried_name and tried["depth"] == best["depth"]
        assert tried["predicted_tok_s"] == pytest.approx(best["predicted_tok_s"], rel=0.02)
        assert rate_ok(tried["measured_tok_s"], tried["predicted_tok_s"], 0.15, cpu), (tried, cpu.describe())
        records = [r for r in Journal(journal.session_dir).records() if isinstance(r, SpecAdviceTryRecord)]
        assert len(records) == 1 and records[0].measured_tok_s == tried["measured_tok_s"]
        assert records[0].config == tried_name and records[0].inside is not None
        # the tried server was stopped, its result recorded: the next advice counts it as measured
        assert "stopped" in got.stderr
        again = json.loads(specdebug("spec", *ssh, "--advise", "--json").stdout)["advice"]
        assert {c["depth"]: c for c in again["candidates"]}[best["depth"]]["measured_by"]
    finally:
        for name in [*names.values(), *([tried_name] if tried_name else [])]:
            forget_server(name)
