"""Benchmarks over the loopback sshd against the simulated box.

The sim runs on this machine (so "on the box" for the sshd); the built-in client reaches it through an
SSH local forward, reads the fake nvidia-smi and the sim's log through the remote layer. Checks: the
single-stream decode tok/s is the sim's modelled rate or below it (never above: below only where a
busy machine stalls the sim or the client) for the baseline, 2-step (NCCL env) and 3-step configs;
results land in the journal with fingerprints and server metrics; history/report verbs read them; kill -9 of a `specdebug bench` mid-run leaves earlier results readable; an external
command's output streams back and parses.
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

from specdebug.core.bench.events import BenchDone, BenchLine
from specdebug.core.bench.runner import BenchRequest, bench_events, run_benchmark
from specdebug.core.journal import Journal
from specdebug.core.profiles import load_profile
from specdebug.core.report import history
from specdebug.sim.box import local as sim_local
from tests import clifork
from tests.pace import CpuWatch, rate_ok

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
NCCL = {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "NVL"}
SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "draft"]
CONFIGS = {
    "baseline": ([], {}),
    "eagle-2step-nccl": (
        [
            *SPEC,
            "--speculative-num-steps",
            "2",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "3",
        ],
        NCCL,
    ),
    "eagle-3step": (
        [
            *SPEC,
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "2",
            "--speculative-num-draft-tokens",
            "6",
        ],
        {},
    ),
}
COMMON = ["--model-path", "model", "--tp", "2", "--decode-log-interval", "5", "--profile-verify"]


def write_profile(tmp: Path, name: str, port: int, log: Path, *, command: list[str] | None = None) -> Path:
    args, env = CONFIGS[name]
    argv = [
        sys.executable,
        "-m",
        "specdebug.sim",
        *COMMON,
        *args,
        "--port",
        str(port),
        "--log-file",
        str(log),
    ]
    lines = [
        f'name = "{name}"',
        "[server]",
        f"argv = {json.dumps(argv)}",
        f"env = {{{', '.join(f'{k} = {json.dumps(v)}' for k, v in env.items())}}}",
        f"log_file = {json.dumps(str(log))}",
        "[bench]",
        "requests = 2",
        "output_len = 64",
        "input_len = 32",
    ]
    if command:
        lines.append(f"command = {json.dumps(command)}")
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start_sim(tmp: Path, name: str):
    args, env = CONFIGS[name]
    log = tmp / f"{name}.log"
    sim = sim_local.start_local_sim([*COMMON, *args], log_file=log, extra_env=env, time_scale=0.02)
    sim.wait_ready(60)
    return sim, log


def specdebug(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args], capture_output=True, text=True, timeout=timeout
    )


async def test_three_configs_match_the_model_and_land_in_history(remote, sshd, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "session")
    for name in CONFIGS:
        sim, log = start_sim(tmp_path, name)
        with sim:
            model = sim.sidecar()["model"]
            profile = load_profile(write_profile(tmp_path, name, sim.port, log))
            with CpuWatch() as cpu:
                res = await run_benchmark(remote, profile, BenchRequest(), journal=journal, host="gpubox")
        expected = model["expected_single_stream_tok_s"]
        assert res.status == "done" and res.successful_requests == 2, res.errors
        # the model's pace where the CPU was free; on a contended machine its order of magnitude (tests/pace.py)
        assert rate_ok(res.decode_tok_s, expected, 0.05, cpu), (
            name,
            res.decode_tok_s,
            expected,
            cpu.describe(),
        )
        assert res.headline() == res.decode_tok_s
        assert res.output_tok_s < res.decode_tok_s  # includes TTFT
        assert res.fingerprint == profile.fingerprint() and res.server_version
        assert len(res.gpu_before) == 4 and any("GPU 2 throttled" in w for w in res.warnings)
        assert not any("not ready" in w for w in res.warnings), res.warnings
        assert res.server is not None and res.server.samples >= 2
        assert res.server.gen_throughput is not None
        if name != "baseline":  # SGLang prints accept len only when speculating
            assert res.server.accept_len == pytest.approx(model["expected_accept_length"], rel=0.2)
            assert res.server.verify_ms == pytest.approx(model["verify_ms"], rel=0.1)

    entries = history(journal.records())
    assert [e.result.profile for e in entries] == list(CONFIGS)
    assert len({e.result.fingerprint for e in entries}) == 3

    out = specdebug("history", "--session", str(journal.session_dir), "--json")
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)["results"]
    assert [r["fingerprint"] for r in results] == [e.result.fingerprint for e in entries]
    report = specdebug("report", "--session", str(journal.session_dir))
    assert report.returncode == 0
    assert "| 3 |" in report.stdout and "`--speculative-num-steps: (absent) -> '2'`" in report.stdout
    assert "env NCCL_PROTO: 'Simple' -> (absent)" in report.stdout


@pytest.fixture(scope="module")
def baseline_sim(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench-sim")
    sim, log = start_sim(tmp, "baseline")
    with sim:
        yield sim, log, tmp


def test_bench_verb_and_kill_9_mid_run(sshd, baseline_sim) -> None:
    sim, log, tmp = baseline_sim
    profile = write_profile(tmp, "baseline", sim.port, log)
    session = tmp / "kill-session"
    base = ["bench", "-F", str(sshd.config_path), "gpubox", "-c", str(profile), "--session", str(session)]
    for _ in range(2):
        out = specdebug(*base, "--requests", "1", "--output-len", "16", "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        for key in ("ttft_ms", "itl_ms"):
            assert set(data[key]) >= {"p50", "p90", "p99", "mean"} and data[key]["p50"] is not None
        assert data["output_tok_s"] > 0 and data["request_throughput"] > 0
        assert data["profile"] == "baseline" and data["fingerprint"] and isinstance(data["warnings"], list)

    proc = subprocess.Popen(
        [sys.executable, "-m", "specdebug.cli", *base, "--requests", "50", "--output-len", "200"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    size = log.stat().st_size
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and b"Decode batch" not in log.read_bytes()[size:]:
        time.sleep(0.1)  # the third run is decoding: kill it now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    entries = history(Journal(session).records())
    assert len(entries) == 2 and all(e.result.fingerprint for e in entries)
    out = specdebug("history", "--session", str(session), "--json")
    assert out.returncode == 0 and len(json.loads(out.stdout)["results"]) == 2


async def test_external_command_streams_and_parses(remote, baseline_sim) -> None:
    sim, log, tmp = baseline_sim
    cmd = [
        "sh",
        "-c",
        'echo "bench against port $1"; cat "$2"',
        "sh",
        "{port}",
        str(FIX / "vllm_bench_serve_spec.txt"),
    ]
    profile = load_profile(write_profile(tmp, "baseline", sim.port, log, command=cmd))
    events = [ev async for ev in bench_events(remote, profile, BenchRequest(kind="external"))]
    lines = [ev.text for ev in events if isinstance(ev, BenchLine)]
    assert isinstance(events[-1], BenchDone)
    res = events[-1].result
    assert lines[0] == f"bench against port {sim.port}"
    assert res.kind == "external" and res.source_format == "vllm" and res.status == "done"
    assert (
        res.output_tok_s == 620.31
        and res.spec is not None
        and res.spec.per_position_acceptance_pct[-1] == 57.03
    )
    assert res.fingerprint and res.profile == "baseline"


async def test_cli_bad_host_exit_1(sshd, baseline_sim, tmp_path: Path) -> None:
    sim, log, tmp = baseline_sim
    profile = write_profile(tmp, "baseline", sim.port, log)
    out = specdebug(
        "bench",
        "-F",
        str(sshd.config_path),
        "root@127.0.0.1:1",
        "-c",
        str(profile),
        "--session",
        str(tmp_path / "s"),
        "--connect-timeout",
        "3",
    )
    assert out.returncode == 1
