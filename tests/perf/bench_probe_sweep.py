"""Worker env probe on a busy box: specdebug's env probe vs `ssh box cat /proc/PID/environ ...`.

    python tests/perf/bench_probe_sweep.py [--levels 100,1000,3000] [-n N]

For each level the box (this machine, behind its own loopback sshd) is filled with sleeping
processes with set titles (argv[0], posix_spawn) up to that many processes in all, in one process group of
our own that is killed afterwards.  8 of them are "workers" (title benchworker-TAG, NCCL_* env).
Measured in the same run, per level:
  env probe      specdebug's check_env (worker pattern): filtered process listing + one read of the
                 8 workers' environ/cmdline/status + the report
  full listing   the same check_env with the whole process table listed (what the probe did before)
  listing        the env probe's filtered process listing alone (one round trip)
  box helper     the helper's listing code alone in this process (no SSH): filtered vs whole table
  ControlMaster  `ssh box cat /proc/PID/environ ... (8 workers)` over a warm ControlMaster
Processes are measured after they are 10 s old (younger ones may still change their title, so the
box helper re-reads them).  Last lines:
    RESULT procs=P env_probe_ms=X full_listing_ms=Y controlmaster_ms=Z cm_over_probe=R
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.box.proclist import ProcCache  # noqa: E402
from specdebug.core.env.model import EnvQuery
from specdebug.core.env.probe import check_env
from specdebug.remote.client import BoxClient  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402

SETTLE_S = 11.0
WORKERS = 8


def count_procs() -> int:
    return sum(1 for n in os.listdir("/proc") if n.isdigit())


SPAWNER = """
import os, shutil, sys, time
tag, extra, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sleep = shutil.which("sleep") or "/bin/sleep"
env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_IB_DISABLE="1")
# the sleepers must not hold this process's stdout (the caller reads it to its end)
quiet = [(os.POSIX_SPAWN_OPEN, fd, "/dev/null", os.O_RDWR, 0) for fd in (0, 1, 2)]
first = os.posix_spawn(sleep, ["benchworker-%s-0" % tag, "3600"], env, setpgroup=0, file_actions=quiet)
for i in range(1, workers):
    os.posix_spawn(sleep, ["benchworker-%s-%d" % (tag, i), "3600"], env, setpgroup=first, file_actions=quiet)
for i in range(max(0, extra)):
    os.posix_spawn(sleep, ["benchfill-%s-%d" % (tag, i), "3600"], env, setpgroup=first, file_actions=quiet)
print(first, flush=True)
"""


class Group:
    """Sleeping processes with set titles (argv[0]), all in one process group of our own, owned by the
    box user (a clean one when this runs as root), so that its env probe and its `cat` may read them."""

    def __init__(self, tag: str, extra: int, user: str | None) -> None:
        drop, python = [], sys.executable
        if user:  # this interpreter may sit in root's home: the box's own python3 runs the spawner
            pw = pwd.getpwnam(user)
            drop = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]
            python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
        out = subprocess.run(
            [*drop, python, "-I", "-c", SPAWNER, tag, str(extra), str(WORKERS)],
            capture_output=True,
            text=True,
            check=True,
        )
        self.pgid = int(out.stdout.strip())

    def kill(self) -> None:
        os.killpg(self.pgid, signal.SIGKILL)


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


class Unfiltered:
    """The remote as the probe used it before: every listing is the whole process table."""

    def __init__(self, remote: BoxClient) -> None:
        self._remote = remote

    async def processes(self, **_filter: object):
        return await self._remote.processes()

    def __getattr__(self, name: str):
        return getattr(self._remote, name)


def helper_side(tag: str, n: int) -> tuple[float, float]:
    """The box helper's own cost (in this process, no SSH): filtered listing vs the whole table."""
    cache = ProcCache()
    cache.listing(match=f"^benchworker-{tag}-")
    out = []
    for kw in ({"match": f"^benchworker-{tag}-"}, {}):
        t0 = time.perf_counter()
        for _ in range(n):
            cache.listing(**kw)
        out.append((time.perf_counter() - t0) / n)
    return out[0], out[1]


async def measure(
    cfg: str, host: str, tag: str, n: int
) -> tuple[list[float], list[float], list[int], list[float]]:
    remote = ssh_box(host, ssh_config=cfg)
    await remote.wait_connected(15)
    query = EnvQuery(match=f"^benchworker-{tag}-")
    probe, full = [], []
    report = None
    for i in range(n + 5):
        t0 = time.perf_counter()
        report = await check_env(remote, query)
        if i >= 5:
            probe.append(time.perf_counter() - t0)
    pids = [w.pid for w in report.workers]
    listing = []
    for _ in range(n):  # the filtered listing's round trip alone (the rest of the probe is the report)
        t0 = time.perf_counter()
        await remote.processes(match=query.match)
        listing.append(time.perf_counter() - t0)
    unfiltered = Unfiltered(remote)
    for i in range(n + 2):
        t0 = time.perf_counter()
        await check_env(unfiltered, query)
        if i >= 2:
            full.append(time.perf_counter() - t0)
    await remote.close()
    return probe, full, pids, listing


def cm_samples(base: list[str], command: list[str], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run([*base, *command], capture_output=True)
        out.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="100,1000,3000")
    ap.add_argument("-n", type=int, default=40)
    args = ap.parse_args()
    from tests.perf.cleanbox import clean_box, describe

    box_ctx = clean_box()
    box = box_ctx.__enter__()
    cfg, host = str(box.config), box.cm_alias
    control = ["ssh", "-F", cfg, host]
    print(describe(box))
    print(f"load average: {os.getloadavg()}")
    results = []
    try:
        subprocess.run([*control, "true"], capture_output=True)
        for level in [int(x) for x in args.levels.split(",")]:
            tag = f"{os.getpid()}x{level}"
            group = Group(tag, level - count_procs() - WORKERS, box.user if box.clean_shell else None)
            try:
                time.sleep(SETTLE_S)
                procs = count_procs()
                probe, full, pids, listing = asyncio.run(measure(cfg, host, tag, args.n))
                assert len(pids) == WORKERS, pids
                known = ["cat", *[f"/proc/{pid}/environ" for pid in pids]]
                cm = cm_samples(control, known, max(10, args.n // 2))
                find = f"cat $(pgrep -f '^benchworker-{tag}-' | sed 's|.*|/proc/&/environ|')"
                cmfind = cm_samples(control, ["sh", "-c", shlex.quote(find)], max(10, args.n // 2))
                hf, hfull = helper_side(tag, 10)
            finally:
                group.kill()
            p, f, c, lst, cf = ms(probe), ms(full), ms(cm), ms(listing), ms(cmfind)
            print(
                f"{procs:5d} processes: box helper alone: filtered listing {hf * 1000:.2f} ms, "
                f"whole table {hfull * 1000:.2f} ms ({hfull / hf:.1f}x); filtered listing round trip {lst:.2f} ms"
            )
            print(
                f"{procs:5d} processes: env probe {p:7.2f} ms  full listing {f:7.2f} ms  "
                f"ControlMaster cat environ (PIDs known) {c:7.2f} ms, pgrep + cat {cf:7.2f} ms  "
                f"(ControlMaster/probe {c / p:.1f}x and {cf / p:.1f}x, full/probe {f / p:.1f}x)"
            )
            results.append((procs, p, f, c, hf * 1000, hfull * 1000, lst, cf))
    finally:
        box_ctx.__exit__(None, None, None)
    print(f"load average: {os.getloadavg()}")
    for procs, p, f, c, hf, hfull, lst, cf in results:
        print(
            f"RESULT procs={procs} env_probe_ms={p:.2f} full_listing_ms={f:.2f} controlmaster_ms={c:.2f} "
            f"cm_pgrep_ms={cf:.2f} cm_over_probe={c / p:.1f} cm_pgrep_over_probe={cf / p:.1f} "
            f"full_over_probe={f / p:.1f} helper_filtered_ms={hf:.2f} "
            f"helper_whole_ms={hfull:.2f} listing_rtt_ms={lst:.2f}"
        )


if __name__ == "__main__":
    main()
