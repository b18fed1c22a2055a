"""The sim tells the truth about the box (issue 26): its GPUs are one resource shared by the servers
on the simulated box, and a throttled GPU slows the server that runs on it, not only nvidia-smi."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from specdebug.sim.box import gpushare, nvidia_smi
from specdebug.sim.server.common import costmodel
from specdebug.sim.server.common.costmodel import SpecConfig, Throttle
from specdebug.sim.server.common.engine import Engine

FULL = gpushare.sim_memory_mib(0.88)


def write_load(folder: Path, pid: int, gpus: list[int], started_at: float, mem: float = FULL) -> None:
    now = time.time()
    load = {
        "pid": pid,
        "t": now,
        "started_at": started_at,
        "gpus": gpus,
        "mem_mib": mem,
        "mem_final_mib": mem,
    }
    (folder / f"sim-{pid}.json").write_text(json.dumps(load))


def test_a_later_server_on_held_gpus_has_no_kv_cache_room(tmp_path: Path) -> None:
    me, other = os.getpid(), os.getppid()  # two live PIDs (read_loads drops files of dead ones)
    write_load(tmp_path, other, list(range(8)), started_at=100.0)
    write_load(tmp_path, me, [0, 1, 2, 3], started_at=200.0)
    hit = gpushare.kv_cache_room(str(tmp_path), [0, 1, 2, 3], FULL, own_pid=me, now=time.time())
    assert hit is not None and hit[0] == 0 and hit[1] < 140 * 0.2  # GPU 0, about 12% free
    # the earlier one is not pushed out by a later one: the later server is the one that fails
    assert gpushare.kv_cache_room(str(tmp_path), list(range(8)), FULL, own_pid=other, now=time.time()) is None
    # other GPUs, or a small enough share, fit
    write_load(tmp_path, other, [4, 5, 6, 7], started_at=100.0)
    assert gpushare.kv_cache_room(str(tmp_path), [0, 1, 2, 3], FULL, own_pid=me, now=time.time()) is None
    write_load(tmp_path, other, list(range(8)), started_at=100.0, mem=gpushare.sim_memory_mib(0.4))
    small = gpushare.sim_memory_mib(0.5)
    assert gpushare.kv_cache_room(str(tmp_path), [0], small, own_pid=me, now=time.time()) is None


def test_memory_above_the_total_is_flagged() -> None:
    loads = [
        {"pid": 1, "gpus": [0, 1], "mem_mib": FULL, "util": 0.0},
        {"pid": 2, "gpus": [1], "mem_mib": FULL},
    ]
    gpus = nvidia_smi.gpu_table(loads, time.time())
    assert not gpus[0].over_total and gpus[1].over_total
    table = nvidia_smi.summary_table(gpus, time.time())
    assert table.count("OVER ") == 1 and {len(x) for x in table.splitlines()[1:] if x} == {91}


def test_a_throttled_gpu_slows_its_server_by_the_clock_ratio() -> None:
    """TP 8 waits for the slowest rank at every all-reduce: the story's fresh baseline 82."""
    plain = SpecConfig()
    base = costmodel.expected_rate(plain)
    throttle = Throttle(gpu=3, at=1000.0, gpus=tuple(range(8)))
    assert throttle.slowdown(999.0) == 1.0  # not yet throttling
    ratio = throttle.slowdown(1000.0)
    assert ratio == costmodel.MAX_SM_MHZ / costmodel.THROTTLED_SM_MHZ
    assert round(costmodel.expected_rate(plain, scale=ratio)) == 82 and round(base) == 89
    assert Throttle(gpu=3, at=0.0, gpus=(4, 5, 6, 7)).slowdown(10.0) == 1.0  # not one of its GPUs
    engine = Engine(plain, log=lambda _: None, seed=1, max_total_tokens=1000, max_running=4,
                    decode_log_interval=40, cuda_graph=True)  # fmt: skip
    before = engine.step_cost(1).total_ms
    engine.slowdown = lambda: ratio  # what the launcher wires to its Throttle
    assert engine.step_cost(1).total_ms == before * ratio


def test_the_launcher_wires_its_throttle_into_the_cost_model() -> None:
    from specdebug.sim.server.sglang.launcher import Launcher
    from specdebug.sim.server.sglang.options import parse_args

    cfg = parse_args(["--model-path", "m", "--tp", "8", "--throttle-gpu", "3", "--throttle-after", "0"])
    launcher = Launcher(cfg)
    assert launcher.throttle.gpu == 3 and launcher.throttle.gpus == tuple(range(8))
    assert launcher.throttle.slowdown(time.time() + 1) > 1.0
