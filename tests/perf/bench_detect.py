"""How soon a killed server is reported: specdebug's liveness watch vs a hand loop over ssh.

    python tests/perf/bench_detect.py [--runs 3] [--tp 8]

Per run a sim (TP workers as real child processes) is launched on a loopback sshd and watched to READY;
then its main process gets SIGKILL (the children live on for a while, as SGLang's TP workers do) and
we time, from the kill:
  specdebug   DeploymentMonitor + watch_deployment_liveness, as the Startup pane runs it after ready
              (listing every 0.5 s, and the main PID watched by the box helper's pidfd): the node turns
              EXITED naming the main process and the children still exiting (goal <= 0.5 s)
  core watch  ServerMonitor + watch_liveness (core/control/monitor.py), the same with one box
  group gone  when the last process of the group is gone (what the watch used to wait for)
  hand loop   `while ssh boxcm kill -0 PID; do sleep 1; done` through a warm ControlMaster
The box user is the one running this script (the sim needs this Python and its packages); its shell
start-up is part of every hand-loop ssh, so the hand loop's figure is an upper bound for a clean shell.
Last line: RESULT detect specdebug_ms=.. group_gone_ms=.. hand_loop_ms=.. ratio=..
Connects only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.core.control.actions import liveness  # noqa: E402
from specdebug.core.control.events import ServerState, Verdict  # noqa: E402
from specdebug.core.control.monitor import ServerMonitor, watch_liveness  # noqa: E402
from specdebug.core.control.records import forget_record, load_record  # noqa: E402
from specdebug.core.control.watch import launch_and_watch  # noqa: E402
from specdebug.core.deployment import place  # noqa: E402
from specdebug.core.deployment.monitor import DeploymentMonitor, watch_deployment_liveness  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402
from tests.leakcheck import group_members  # noqa: E402
from tests.simprofiles import sim_profile  # noqa: E402
from tests.sshd_harness import start_sshd  # noqa: E402

PANE_S = 0.5  # tui/panes/startup.py MONITOR_S: the Startup pane's listing interval after ready


def _group_alive(pgid: int) -> bool:
    """Any live (not zombie) process in our own group: a container's PID 1 may reap zombies late."""
    return bool(group_members(pgid))


async def _ready(remote, profile) -> None:
    async for ev in launch_and_watch(remote, profile):
        if isinstance(ev, Verdict) and ev.verdict != "ready":
            raise SystemExit(f"{profile.name} did not start: {ev.reason}")


async def ours(remote, profile, pane: bool) -> tuple[float, float, str]:
    await _ready(remote, profile)
    record = await load_record(remote, profile.name)
    assert record is not None
    if pane:  # what the Startup pane runs after ready: the target's watch, its listing every 0.5 s
        dmon = DeploymentMonitor(place(profile, remote.name))
        dmon.launched({remote.name: record})
        mon = dmon.nodes[remote.name]
        dmon.state = mon.state = ServerState.READY
        watch = watch_deployment_liveness(dmon, {remote.name: remote}, liveness=liveness, interval=PANE_S)
    else:
        mon = ServerMonitor()
        mon.record, mon.state = record, ServerState.READY
        watch = watch_liveness(mon, remote, record, profile, liveness=liveness)
    exited_at: list[float] = []

    async def consume() -> None:  # watching before the kill, as the Startup pane is
        async for _ in watch:
            if mon.state is ServerState.EXITED:
                exited_at.append(time.monotonic())
                return

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(1.0)
    t0 = time.monotonic()
    os.kill(record.pid, signal.SIGKILL)
    await asyncio.wait_for(consumer, 60)
    seen = exited_at[0] - t0 if exited_at else None
    while _group_alive(record.pgid):
        await asyncio.sleep(0.05)
    gone = time.monotonic() - t0
    return seen or float("nan"), gone, mon.message


async def hand(remote, profile, cfg: Path) -> float:
    await _ready(remote, profile)
    record = await load_record(remote, profile.name)
    assert record is not None
    loop = f"while ssh -F {cfg} boxcm kill -0 {record.pid} 2>/dev/null; do sleep 1; done"
    proc = await asyncio.create_subprocess_shell(loop)
    await asyncio.sleep(1.5)
    t0 = time.monotonic()
    os.kill(record.pid, signal.SIGKILL)
    await proc.wait()
    took = time.monotonic() - t0
    while _group_alive(record.pgid):
        await asyncio.sleep(0.05)
    return took


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tp", default="8")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-detect-"))
    sshd = start_sshd(work / "sshd")
    cfg = work / "ssh_config"
    sshd.write_client_config(
        cfg,
        sshd.known_hosts,
        alias="boxcm",
        ControlMaster="auto",
        ControlPath=f"{work}/cm-%p",
        ControlPersist="60",
    )
    remote = ssh_box(
        sshd.alias, ssh_config=sshd.config_path, connect_timeout=5.0, state_dir=str(work / "servers")
    )
    names: list[str] = []

    def profile(tag: str):
        names.append(f"detect-{tag}")
        p = sim_profile(work, names[-1], time_scale="0.02", timeout_s=120)
        argv = list(p.server.argv)
        argv[argv.index("--tp") + 1] = args.tp
        return p.model_copy(update={"server": p.server.model_copy(update={"argv": argv})})

    a, g, h, c = [], [], [], []
    try:
        await remote.start()
        await remote.wait_connected(15)
        for i in range(args.runs):
            seen, gone, message = await ours(remote, profile(f"ours{i}"), pane=True)
            a.append(seen)
            g.append(gone)
            print(
                f"run {i}: specdebug (Startup pane's watch) EXITED after {seen * 1000:.0f} ms, group gone after "
                f"{gone * 1000:.0f} ms: {message}",
                flush=True,
            )
            seen, gone, message = await ours(remote, profile(f"core{i}"), pane=False)
            c.append(seen)
            print(f"run {i}: core watch_liveness EXITED after {seen * 1000:.0f} ms: {message}", flush=True)
            took = await hand(remote, profile(f"hand{i}"), cfg)
            h.append(took)
            print(f"run {i}: hand loop noticed after {took * 1000:.0f} ms", flush=True)
    finally:
        for name in names:
            await forget_record(remote, name)
        await remote.close()
        subprocess.run(["ssh", "-F", str(cfg), "-O", "exit", "boxcm"], capture_output=True)
        sshd.stop()
    ma, mg, mh, mc = (statistics.median(x) for x in (a, g, h, c))
    print(
        f"RESULT detect runs={args.runs} tp={args.tp} load={Path('/proc/loadavg').read_text().split()[0]} "
        f"specdebug_ms={ma * 1000:.0f} max_ms={max(a) * 1000:.0f} core_watch_ms={mc * 1000:.0f} "
        f"group_gone_ms={mg * 1000:.0f} hand_loop_ms={mh * 1000:.0f} ratio={mh / ma:.1f}x goal_ms=500 "
        f"met={'yes' if max(a) <= 0.5 else 'no'}"
    )


if __name__ == "__main__":
    asyncio.run(main())
