"""The simulated box's GPUs are one resource: does a new server's KV cache fit beside the others?

Every sim on the box writes its load file (nvidia_smi.LoadWriter: its GPUs, the memory it holds
once up, when it started).  A scheduler reaching kv_cache asks here; when sims that started before
it already hold its GPUs' memory it fails with SGLang's memory-pool error, as a second server on a
real GPU does (the earlier server keeps its memory: the later one is the one that fails).
"""

from __future__ import annotations

import os
import time

from specdebug.sim.box.nvidia_smi import ENV_DIR, MEM_TOTAL_MIB, read_loads, visible_gpus


def sim_memory_mib(mem_fraction: float) -> float:
    """GPU memory a sim holds once up (per GPU): --mem-fraction-static of the total."""
    return mem_fraction * MEM_TOTAL_MIB


def kv_cache_room(
    directory: str | None, gpus: list[int], need_mib: float, *, own_pid: int, now: float
) -> tuple[int, float] | None:
    """None when `need_mib` fits on each of `gpus` beside the sims that started before this one
    (they hold theirs first: the later server is the one that fails); else (first GPU that is too
    full, its free GiB).  `own_pid`: this sim's launcher, whose own file is not counted."""
    every = read_loads(directory, now)
    loads = [x for x in every if int(x.get("pid", 0)) != own_pid]
    mine = next((x for x in every if int(x.get("pid", 0)) == own_pid), {"started_at": now})
    key = (float(mine.get("started_at", now)), own_pid)
    for gpu in gpus:
        held = sum(
            float(x.get("mem_final_mib", x.get("mem_mib", 0.0)))
            for x in loads
            if gpu in x.get("gpus", []) and (float(x.get("started_at", 0.0)), int(x.get("pid", 0))) < key
        )
        if held + need_mib > MEM_TOTAL_MIB:
            return gpu, max(0.0, MEM_TOTAL_MIB - held) / 1024
    return None


def no_kv_cache_room(tp_size: int, mem_fraction: float) -> bool:
    """In a scheduler (a child of the sim launcher) on the simulated box: do this server's GPUs
    lack the memory its KV cache needs, earlier servers holding it?  Off the box (no load dir): no."""
    directory = os.environ.get(ENV_DIR)
    if not directory:
        return False
    gpus = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), tp_size)
    need = sim_memory_mib(mem_fraction)
    return kv_cache_room(directory, gpus, need, own_pid=os.getppid(), now=time.time()) is not None
