"""Single-stream rates of the three calibrated sim configs (the user's story), measured by a client.

The three sims start together to save time; each is measured alone.  Also covers what differs
between them: setproctitle clobbering the workers' environ without SPT_NOENV, and NCCL tuning vars
set in the launching shell but dropped before the workers (--drop-env NCCL_).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specdebug.sim.box.local import LocalSim, start_local_sim, stream_completion_rate
from tests.pace import CpuWatch, rate_ok

TIME_SCALE = 0.01
NCCL_TUNING = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
CONFIGS = {
    # name: (args, extra env, target tok/s)
    "baseline": (["--tp", "2"], {}, 89.0),
    "eagle3-2step-nccl": (
        ["--tp", "2", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"],
        {"SPT_NOENV": "1", **NCCL_TUNING},
        94.0,
    ),
    "eagle3-3step": (
        ["--tp", "2", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "6", "--drop-env", "NCCL_"],
        {"SPT_NOENV": "1", **NCCL_TUNING},  # set at launch, but they never reach the workers
        60.0,
    ),
}  # fmt: skip


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SPT_NOENV", "EAGLE3_"))}


@pytest.fixture(scope="module")
def sims(tmp_path_factory) -> dict[str, LocalSim]:
    root = tmp_path_factory.mktemp("simrates")
    started: dict[str, LocalSim] = {}
    try:
        for name, (args, env, _) in CONFIGS.items():
            started[name] = start_local_sim(
                args, log_file=root / f"{name}.log", time_scale=TIME_SCALE, env=base_env() | env
            )
        for sim in started.values():
            sim.wait_ready(60)
        yield started
    finally:
        for sim in started.values():
            sim.stop()


def test_calibrated_single_stream_rates(sims: dict[str, LocalSim]) -> None:
    measured = {}
    with CpuWatch() as cpu:
        for name, sim in sims.items():
            rate, tokens, _ = stream_completion_rate(sim.url, 128)
            assert tokens == 128
            model = sim.sidecar()["model"]
            measured[name] = (rate, model["expected_single_stream_tok_s"], model["verify_ms"])
    for name, (rate, expected, verify) in measured.items():
        target = CONFIGS[name][2]
        print(
            f"{name:20s} measured {rate:6.1f} tok/s  model {expected:6.1f}  target {target:5.1f}  verify {verify:.1f} ms"
        )
    for name, (rate, expected, _) in measured.items():
        assert expected == pytest.approx(CONFIGS[name][2], rel=0.10), name  # the model is the story's box
        assert rate_ok(rate, expected, 0.05, cpu), (name, rate, expected, cpu.describe())
    assert measured["eagle3-3step"][2] == pytest.approx(30.0, rel=0.02)
    assert measured["eagle3-2step-nccl"][2] == pytest.approx(16.0, rel=0.02)


def test_environ_unreadable_without_spt_noenv(sims: dict[str, LocalSim]) -> None:
    side = sims["baseline"].sidecar()
    for pid in [*side["workers"].values(), side["detokenizer_pid"]]:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        pairs = [e for e in environ.split(b"\0") if b"=" in e]
        assert pairs == [], f"worker {pid} environ still readable: {pairs[:3]}"
    # the launcher never calls setproctitle: its environ stays intact
    assert b"PATH=" in Path(f"/proc/{side['pid']}/environ").read_bytes()


def test_drop_env_keeps_tuning_vars_from_the_workers(sims: dict[str, LocalSim]) -> None:
    side = sims["eagle3-3step"].sidecar()
    assert side["nccl_tuning_missing"] == 3
    for pid in side["workers"].values():
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"SPT_NOENV=1" in environ and not any(e.startswith(b"NCCL_") for e in environ)
    launcher = Path(f"/proc/{side['pid']}/environ").read_bytes().split(b"\0")
    assert b"NCCL_PROTO=LL" in launcher
    assert sims["eagle3-2step-nccl"].sidecar()["nccl_tuning_missing"] == 0
