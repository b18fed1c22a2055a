"""What a drift snapshot and a stack dump cost on the box, with 1000 other processes on it.

    python tests/perf/bench_drift_stacks.py [-n N] [--procs 1000]

The box is this machine behind its own loopback sshd; the script starts its own sim (8 TP ranks),
its own --procs sleeping processes (one process group, killed at the end) and a fresh hash cache.
Measured (median of N, after the first call where said):
  drift cold     first snapshot: every installed file of this interpreter hashed once
  drift warm     later snapshots: the cache answers for files whose size and mtime did not change
  stacks         the 8 ranks found (process tree of the launcher) and dumped with py-spy, once
                 without and once with the --procs extra processes on the box
Last line:
    RESULT drift_cold_s=A drift_warm_s=B warm/cold=R stacks_s=C stacks_1000_s=D with/without=Q
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.core.drift.snapshot import take_snapshot  # noqa: E402
from specdebug.core.profiles import Profile  # noqa: E402
from specdebug.core.stacks.collect import run_box_module  # noqa: E402
from specdebug.core.stacks.group import Worker, group_workers, main_frames  # noqa: E402
from specdebug.remote.client import BoxClient  # noqa: E402
from specdebug.sim.box.local import start_local_sim  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402
from tests.leakcheck import group_members  # noqa: E402
from tests.sshd_harness import start_sshd  # noqa: E402


async def stacks_once(remote: BoxClient, launcher: int) -> int:
    """The verb's path without a launch record: the tree under the launcher, then one py-spy per rank."""
    procs = await remote.processes(root_pid=launcher)
    ranks = [p for p in procs if any("scheduler_TP" in a for a in p.cmdline)]
    data = await run_box_module(remote, {"pids": [p.pid for p in ranks], "mode": "dump"}, 60)
    workers = [
        Worker(p.pid, i, "", main_frames((data["pids"] or {}).get(str(p.pid)) or {}))
        for i, p in enumerate(ranks)
    ]
    group_workers(workers)
    return len(ranks)


async def timed(coro_fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await coro_fn()
        out.append(time.perf_counter() - t0)
    return out


def spawn_sleepers(count: int) -> subprocess.Popen:
    """`count` sleeping processes in one new process group (a shell that forks them, then waits)."""
    script = f"for i in $(seq {count}); do sleep 600 & done; wait"
    return subprocess.Popen(["sh", "-c", script], start_new_session=True)


async def main(n: int, count: int) -> None:
    if shutil.which("py-spy") is None:
        sys.exit("py-spy not on PATH: pip install py-spy")
    tmp = Path(tempfile.mkdtemp(prefix="bench-drift-stacks-"))
    box = start_sshd(tmp / "sshd")
    sim = start_local_sim(["--model-path", "m", "--tp", "8"], log_file=tmp / "sim.log")
    sleepers = None
    try:
        sim.wait_ready(90)
        remote = ssh_box(box.alias, ssh_config=box.config_path, state_dir=str(tmp / "state" / "servers"))
        await remote.wait_connected(15)
        profile = Profile.model_validate({"name": "perf", "server": {"argv": [sys.executable, "-m", "x"]}})
        t0 = time.perf_counter()
        snap = await take_snapshot(remote, profile)
        cold = time.perf_counter() - t0
        warm = statistics.median(await timed(lambda: take_snapshot(remote, profile), n))
        print(
            f"drift: {snap['checked_files']} files checked, {snap['hashed_bytes'] / 1e6:.0f} MB hashed cold"
        )
        print(f"drift cold {cold:.3f} s, warm {warm:.3f} s (box side {snap['took_s']} s cold)")
        ranks = await stacks_once(remote, sim.pid)
        plain = statistics.median(await timed(lambda: stacks_once(remote, sim.pid), n))
        sleepers = spawn_sleepers(count)
        while len(group_members(sleepers.pid)) < count + 1:  # the shell forks them in a moment
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        loaded = statistics.median(await timed(lambda: stacks_once(remote, sim.pid), n))
        warm_loaded = statistics.median(await timed(lambda: take_snapshot(remote, profile), n))
        print(f"stacks of {ranks} ranks: {plain:.3f} s; with {count} more processes {loaded:.3f} s")
        print(f"drift warm with {count} more processes: {warm_loaded:.3f} s")
        await remote.close()
        print(
            f"RESULT drift_cold_s={cold:.3f} drift_warm_s={warm:.3f} warm/cold={warm / cold:.2f} "
            f"stacks_s={plain:.3f} stacks_{count}_s={loaded:.3f} with/without={loaded / plain:.2f}"
        )
    finally:
        if sleepers is not None:
            os.killpg(sleepers.pid, signal.SIGKILL)
            sleepers.wait()
        sim.stop()
        box.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--procs", type=int, default=1000)
    a = ap.parse_args()
    asyncio.run(main(a.n, a.procs))
