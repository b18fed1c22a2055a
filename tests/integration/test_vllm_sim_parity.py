"""The vLLM sim honours the sim-only flags the SGLang sim has, with the same meaning, end to end.

Each sim runs the argv of an example profile (examples/vllm-sim-*.toml: `--engine vllm serve MODEL
--speculative-config {...}`, cut to 2 TP ranks) plus one sim-only flag; the built-in benchmark runs
through `specdebug bench` over the real loopback sshd, as a user would.  Ratios, not milliseconds.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from specdebug.core.journal import Journal
from specdebug.sim.box import local as sim_local
from specdebug.sim.server.common.costmodel import launch_noise
from tests.pace import CpuWatch, rate_ok
from tests.security.boxkit import run, unique, write_profile

pytestmark = pytest.mark.slow
NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BENCH = {"requests": 4, "concurrency": 1, "input_len": 32, "output_len": 64}


def example_args(example: str, *extra: str) -> list[str]:
    """The sim flags of an example vLLM profile (after `python3 -m specdebug.sim`), 2 TP ranks, with
    host, port and time scale left to start_local_sim."""
    argv = tomllib.loads((EXAMPLES / example).read_text())["server"]["argv"]
    args = argv[argv.index("specdebug.sim") + 1 :]
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--host", "--port", "--time-scale", "--tensor-parallel-size", "-tp"):
            skip = True
            if arg in ("--tensor-parallel-size", "-tp"):
                out += [arg, "2"]
            continue
        out.append(arg)
    assert out[:3] == ["--engine", "vllm", "serve"], argv
    return [*out, *extra]


def start(tmp: Path, name: str, example: str, *extra: str) -> tuple[sim_local.LocalSim, Path]:
    """A vLLM sim from an example's argv plus `extra`, and a profile that benchmarks it over ssh."""
    log = tmp / f"{name}.log"
    sim = sim_local.start_local_sim(
        example_args(example, *extra), log_file=log, time_scale=0.02, extra_env=NCCL
    )
    profile = write_profile(
        tmp / f"{name}.toml",
        unique(name),
        {"argv": ["sim"], "port": sim.port, "log_file": str(log), "kind": "vllm"},
        bench=BENCH,
    )
    return sim, profile


def bench(sshd, profile: Path, session: Path) -> tuple[int, dict]:
    r = run(sshd, "bench", "gpubox", "-c", str(profile), "--session", str(session), "--json")
    lines = r.stdout.decode().strip().splitlines()
    return r.returncode, json.loads(lines[-1]) if lines else {}


def test_decode_scale_makes_the_vllm_sim_faster(sshd, tmp_path: Path) -> None:
    sims = []
    try:
        fast, fast_p = start(tmp_path, "fast", "vllm-sim-eagle3.toml", "--decode-scale", "0.25")
        slow, slow_p = start(tmp_path, "slow", "vllm-sim-eagle3.toml", "--decode-scale", "1.0")
        sims += [fast, slow]
        fast_model = fast.wait_ready(120)["model"]
        slow_model = slow.wait_ready(120)["model"]
        assert fast_model["decode_scale"] == 0.25 and slow_model["decode_scale"] == 1.0
        assert fast_model["step_ms"] == pytest.approx(slow_model["step_ms"] * 0.25)
        rc_fast, res_fast = bench(sshd, fast_p, tmp_path / "session")
        with CpuWatch() as cpu:
            rc_slow, res_slow = bench(sshd, slow_p, tmp_path / "session")
        assert rc_fast == 0 and rc_slow == 0, (res_fast, res_slow)
        assert res_fast["successful_requests"] == res_slow["successful_requests"] == BENCH["requests"]
        ratio = res_fast["decode_tok_s"] / res_slow["decode_tok_s"]
        print(
            f"decode-scale 0.25 vs 1.0: {res_fast['decode_tok_s']:.1f} / {res_slow['decode_tok_s']:.1f} tok/s"
        )
        assert ratio > 1.5, (res_fast["decode_tok_s"], res_slow["decode_tok_s"])
        # the unscaled run is the cost model's rate (the scaled one may be held back by the client)
        slow_rate, modelled = res_slow["decode_tok_s"], slow_model["expected_single_stream_tok_s"]
        assert rate_ok(slow_rate, modelled, 0.15, cpu), (slow_rate, modelled, cpu.describe())
    finally:
        for sim in sims:
            sim.stop()


def test_fail_requests_makes_a_vllm_bench_a_failed_run(sshd, tmp_path: Path) -> None:
    session = tmp_path / "session"
    sim, profile = start(tmp_path, "broken", "vllm-sim-baseline.toml", "--fail-requests", "0.5")
    try:
        sim.wait_ready(120)
        r = run(sshd, "bench", "gpubox", "-c", str(profile), "--session", str(session))
        assert r.returncode == 1, r.stdout + r.stderr
        text = r.stdout.decode()
        assert "benchmark FAILED: " in text and f"of {BENCH['requests']} requests failed" in text, text
    finally:
        sim.stop()
    recorded = Journal(session).events({"bench_result"})
    assert [e["status"] for e in recorded] == ["failed"]
    assert recorded[0]["failed_requests"] == BENCH["requests"] // 2
    assert "requests failed" in recorded[0]["failure_reason"]
    listing = run(sshd, "history", "--session", str(session), "--json")
    assert json.loads(listing.stdout)["results"][0]["status"] == "failed"


def seeds_far_apart(noise: float) -> tuple[int, int]:
    """Two --noise-seed values whose launch factors differ by more than 25 % (found, not hard-coded)."""
    factors = {s: launch_noise(noise, s) for s in range(50)}
    lo, hi = min(factors, key=factors.get), max(factors, key=factors.get)
    assert factors[hi] / factors[lo] > 1.25
    return lo, hi


def test_noise_varies_the_vllm_sim_across_launches(sshd, tmp_path: Path) -> None:
    lo, hi = seeds_far_apart(0.2)
    sims, results, factors = [], [], []
    try:
        for seed in (lo, hi):
            sim, profile = start(
                tmp_path, f"noisy{seed}", "vllm-sim-eagle3.toml", "--noise", "0.2", "--noise-seed", str(seed)
            )
            sims.append(sim)
            factors.append(sim.wait_ready(120)["model"]["noise_factor"])
            rc, res = bench(sshd, profile, tmp_path / "session")
            assert rc == 0, res
            results.append(res["decode_tok_s"])
            sim.stop()
        # unseeded: a fresh draw (never exactly the noiseless 1.0)
        sim, _ = start(tmp_path, "fresh", "vllm-sim-baseline.toml", "--noise", "0.2")
        sims.append(sim)
        assert sim.wait_ready(120)["model"]["noise_factor"] != 1.0
    finally:
        for sim in sims:
            sim.stop()
    assert factors == [launch_noise(0.2, lo), launch_noise(0.2, hi)]
    print(f"noise 0.2 seeds {lo},{hi}: factors {factors}, tok/s {results}")
    # a larger step-cost factor is a slower server: tok/s moves by the factors' ratio
    assert results[0] / results[1] == pytest.approx(factors[1] / factors[0], rel=0.15), (results, factors)
    assert results[0] / results[1] > 1.15


def test_bad_shared_flag_values_are_usage_errors_on_vllm() -> None:
    import subprocess

    for flag, value in (("--decode-scale", "-1"), ("--fail-requests", "1.5"), ("--noise", "2")):
        r = subprocess.run(
            [sys.executable, "-m", "specdebug.sim", "--engine", "vllm", "serve", "m", flag, value],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2 and flag in r.stderr and "Traceback" not in r.stderr, r.stderr
