"""The sim's fault switches and process lifecycle: crashes, hangs, signals, dead children, no orphans."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from specdebug.sim import PHASE_LINES
from specdebug.sim.box.local import LocalSim, pid_alive, start_local_sim
from specdebug.sim.server.sglang.launcher import READY_LINE, SIGQUIT_LINE

TIME_SCALE = 0.01
TRACEBACK_HEAD = "Scheduler hit an exception: Traceback (most recent call last):"


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SPT_NOENV"))}


def start(tmp_path: Path, *args: str) -> LocalSim:
    return start_local_sim(
        ["--tp", "2", *args], log_file=tmp_path / "sim.log", time_scale=TIME_SCALE, env=env()
    )


def recorded_pids(sim: LocalSim) -> list[int]:
    side = sim.sidecar()
    return [
        *map(int, side.get("workers", {}).values()),
        *([side["detokenizer_pid"]] if side.get("detokenizer_pid") else []),
    ]


def wait_gone(pids: list[int], timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if pid_alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if pid_alive(p)]


@pytest.mark.parametrize(
    ("args", "phase_line", "last_line"),
    [
        (
            ["--fail-at", "load_weights"],
            "Load weight begin.",
            "safetensors_rust.SafetensorError: Error while deserializing header",
        ),
        (
            ["--fail-at", "kv_cache"],
            "Load weight end.",  # 0.5.23 prints nothing as the KV pool setup starts
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        ),
        (
            ["--fail-at", "cuda_graph"],
            PHASE_LINES["cuda_graph"],
            "Exception: Capture cuda graph failed: CUDA error: an illegal memory access",
        ),
        (
            ["--oom"],
            PHASE_LINES["cuda_graph"],
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate",
        ),
        (
            ["--fail-at", "warmup"],
            PHASE_LINES["warmup"] + ' HTTP/1.1" 200',
            "torch.AcceleratorError: CUDA error: an illegal memory access",
        ),
    ],
    ids=["load_weights", "kv_cache", "cuda_graph", "oom", "warmup"],
)
def test_fail_switches(tmp_path: Path, args: list[str], phase_line: str, last_line: str) -> None:
    with start(tmp_path, *args) as sim:
        sim.wait_for(lambda: sim.sidecar().get("workers"), 30)
        pids = recorded_pids(sim)
        code = sim.wait_exit(30)
        text = sim.log_text()
    assert code != 0  # SGLang's kill_process_tree SIGKILLs the launcher itself
    assert phase_line in text
    head = re.search(r"^\[[\d\- :]+ TP1\] " + re.escape(TRACEBACK_HEAD) + "$", text, re.M)
    assert head, text[-2000:]
    tail = text[head.start() :]
    assert last_line in tail
    assert re.search(r"^\[[\d\- :]+\] " + re.escape(SIGQUIT_LINE) + "$", tail, re.M)
    assert tail.index(last_line) < tail.index(SIGQUIT_LINE)
    if args == ["--oom"]:
        assert "torch.OutOfMemoryError: CUDA out of memory." in tail
        assert (
            "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" in tail
        )
    assert READY_LINE not in text
    assert sim.sidecar()["state"] == "failed"
    assert wait_gone(pids) == [], "workers outlived the failed launcher"


def test_hang_then_launcher_sigkill_leaves_no_orphans(tmp_path: Path) -> None:
    with start(tmp_path, "--hang-at", "load_weights") as sim:
        sim.wait_for(lambda: sim.log_text().count("Load weight begin.") >= 2, 30)
        time.sleep(1.5)  # the whole load would take ~0.75 s at this time scale
        assert sim.proc.poll() is None
        assert "Load weight end." not in sim.log_text()
        side = sim.sidecar()
        assert side["state"] == "hung" and side["hung_at"]["phase"] == "load_weights"
        pids = recorded_pids(sim)
        assert len(pids) == 3 and all(pid_alive(p) for p in pids)
        os.kill(sim.pid, signal.SIGKILL)  # only the launcher, not its group
        sim.wait_exit(60)
        assert wait_gone(pids) == [], "children outlived a SIGKILLed launcher"


def test_hang_at_warmup_keeps_health_503(tmp_path: Path) -> None:
    with start(tmp_path, "--hang-at", "warmup") as sim:
        sim.wait_for(lambda: sim.sidecar().get("state") == "hung", 30)
        time.sleep(0.3)
        assert httpx.get(sim.url + "/health", timeout=5).status_code == 503
        assert sim.proc.poll() is None
        text = sim.log_text()
        assert "Prefill batch, #new-seq: 1, #new-token: 7" in text and READY_LINE not in text


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_everything_quickly(tmp_path: Path, sig: int) -> None:
    with start(tmp_path, "--skip-server-warmup") as sim:
        sim.wait_ready(30)
        assert httpx.get(sim.url + "/health").status_code == 200  # ready without the warmup
        assert READY_LINE not in sim.log_text() and sim.sidecar()["ready_line"] is False
        pids = recorded_pids(sim)
        t0 = time.monotonic()
        sim.signal(sig)
        code = sim.wait_exit(60)
        took = time.monotonic() - t0
        assert wait_gone(pids) == []
    print(f"stopped in {took:.2f} s")
    assert code == (0 if sig == signal.SIGTERM else 130)
    assert sim.sidecar()["state"] == "stopped"


def test_signal_during_startup(tmp_path: Path) -> None:
    with start(tmp_path, "--hang-at", "cuda_graph") as sim:
        sim.wait_for(lambda: sim.sidecar().get("state") == "hung", 30)
        pids = recorded_pids(sim)
        sim.signal(signal.SIGTERM)
        assert sim.wait_exit(60) == 0
        assert wait_gone(pids) == []
        assert SIGQUIT_LINE not in sim.log_text()


def test_dead_child_takes_the_server_down(tmp_path: Path) -> None:
    with start(tmp_path) as sim:
        sim.wait_ready(30)
        pids = recorded_pids(sim)
        os.kill(int(sim.sidecar()["workers"]["1"]), signal.SIGKILL)
        code = sim.wait_exit(60)
        assert code != 0
        assert SIGQUIT_LINE in sim.log_text()
        assert sim.sidecar()["state"] == "failed"
        assert wait_gone(pids) == []


def test_a_second_server_on_the_same_gpus_fails_at_kv_cache(tmp_path: Path) -> None:
    """Two or three servers came up READY on the same 8 simulated GPUs (issue 26): the GPUs are
    one resource; the later server fails at kv_cache with SGLang's memory-pool error, and one on
    other GPUs still fits."""
    from specdebug.sim.box import nvidia_smi

    box = {nvidia_smi.ENV_DIR: str(tmp_path / "gpus")}

    def sim(name: str, **extra: str) -> LocalSim:
        return start_local_sim(
            ["--tp", "4"], log_file=tmp_path / f"{name}.log", time_scale=TIME_SCALE, env=env(),
            extra_env={**box, **extra},
        )  # fmt: skip

    with sim("first") as first:
        first.wait_ready(60)
        with sim("second") as second:
            assert second.wait_exit(60) != 0
            log = second.log_text()
            assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in log
            assert "KV Cache is allocated" not in log
        assert first.proc.poll() is None  # the first one is untouched
        with sim("third", CUDA_VISIBLE_DEVICES="4,5,6,7") as third:
            third.wait_ready(60)
            gpus = nvidia_smi.gpu_table(
                nvidia_smi.read_loads(box[nvidia_smi.ENV_DIR], time.time()), time.time()
            )
            assert not any(g.over_total for g in gpus)
