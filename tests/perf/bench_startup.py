"""Ready/failed detection: specdebug's watcher vs the hand-made 15-second `ssh host curl` loop.

For each run the sim starts on the loopback sshd; the sim records when it really became ready
(`<log-file>.sim.json` ready_at).  specdebug's lag = its verdict's ready_at - that time.  The hand
loop is the one from the story: `for i in $(seq 22); do sleep 15; ssh host curl -sf .../health && break;
done`, each attempt a fresh ssh process; its lag = the time the curl first succeeded - ready_at.
A crash run (--fail-at cuda_graph) measures how long specdebug takes to say "failed"; the hand loop
cannot tell a crash from a slow start and only gives up after 22 attempts (330 s), so that figure
is by construction, not measured.

    python tests/perf/bench_startup.py [--runs 3] [--time-scale 0.05]

Prints per-run figures and one RESULT line.  Connects only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.core.control import actions as server_control
from specdebug.core.control.events import Verdict
from specdebug.core.control.launch import launch
from specdebug.core.control.records import forget_record  # noqa: E402
from specdebug.core.control.watch import launch_and_watch
from specdebug.core.profiles import Profile  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402
from tests.simprofiles import sim_profile as make_sim_profile  # noqa: E402
from tests.simprofiles import sim_record  # noqa: E402
from tests.sshd_harness import start_sshd  # noqa: E402

POLL_S = 15.0
ATTEMPTS = 22


NAMES: list[str] = []


def sim_profile(work: Path, name: str, time_scale: str, *extra: str) -> Profile:
    name = f"bench-{work.name[-6:]}-{name}"  # unique names for the journal and the logs
    NAMES.append(name)
    return make_sim_profile(work, name, *extra, time_scale=time_scale, timeout_s=300)


async def specdebug_run(remote, profile: Profile) -> tuple[float, Verdict]:
    verdict = None
    async for ev in launch_and_watch(remote, profile):
        if isinstance(ev, Verdict):
            verdict = ev
    assert verdict is not None
    sim = sim_record(profile)
    if verdict.verdict == "failed" and not sim.get("failed_at"):
        raise SystemExit(f"unexpected verdict for {profile.name}: {verdict.summary()}")
    ref = sim["ready_at"] if verdict.verdict == "ready" else sim.get("failed_at")
    at = verdict.ready_at if verdict.verdict == "ready" else verdict.at
    await server_control.stop(remote, profile, grace_s=5)
    return at - ref, verdict


async def manual_run(remote, profile: Profile, ssh_config: Path) -> tuple[float, int]:
    """Launch, then the hand loop: sleep 15; fresh `ssh -F cfg gpubox curl -sf URL` until it succeeds."""
    await launch(remote, profile)
    url = f"http://127.0.0.1:{profile.server.port}/health"
    detected, attempts = None, 0
    for attempts in range(1, ATTEMPTS + 1):  # noqa: B007
        await asyncio.sleep(POLL_S)
        proc = await asyncio.create_subprocess_exec(
            "ssh",
            "-F",
            str(ssh_config),
            "-o",
            "BatchMode=yes",
            "gpubox",
            "curl",
            "-sf",
            url,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if await proc.wait() == 0:
            detected = time.time()
            break
    await server_control.stop(remote, profile, grace_s=5)
    assert detected is not None, "the hand loop never saw the server ready"
    return detected - sim_record(profile)["ready_at"], attempts


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-scale", default="0.05")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    sshd = start_sshd(work / "sshd")
    remote = ssh_box(
        sshd.alias,
        ssh_config=sshd.config_path,
        keepalive_interval=1.0,
        connect_timeout=5.0,
        state_dir=str(work / "servers"),  # server records of this run only, not in the box user's home
    )
    try:
        await remote.start()
        await remote.wait_connected(15)
        ours, theirs, startups = [], [], []
        for i in range(args.runs):
            lag, verdict = await specdebug_run(remote, sim_profile(work, f"ours{i}", args.time_scale))
            ours.append(lag)
            startups.append(verdict.elapsed_s)
            print(
                f"run {i}: specdebug ready after {verdict.elapsed_s:.1f}s, lag {lag * 1000:.0f} ms",
                flush=True,
            )
            lag, attempts = await manual_run(
                remote, sim_profile(work, f"hand{i}", args.time_scale), sshd.config_path
            )
            theirs.append(lag)
            print(
                f"run {i}: ssh+curl loop saw ready at attempt {attempts}, lag {lag * 1000:.0f} ms", flush=True
            )
        fail_lag, verdict = await specdebug_run(
            remote, sim_profile(work, "crash", args.time_scale, "--fail-at", "cuda_graph")
        )
        print(f"crash: specdebug said failed {fail_lag * 1000:.0f} ms after the crash: {verdict.reason}")
        mean_ours, mean_theirs = statistics.mean(ours), statistics.mean(theirs)
        print(
            f"RESULT startup_ready_lag runs={args.runs} startup_s={statistics.mean(startups):.1f} "
            f"specdebug_mean_ms={mean_ours * 1000:.0f} specdebug_max_ms={max(ours) * 1000:.0f} "
            f"ssh_curl_loop_mean_ms={mean_theirs * 1000:.0f} ratio={mean_theirs / max(mean_ours, 1e-3):.0f}x "
            f"crash_detect_ms={fail_lag * 1000:.0f} ssh_curl_loop_crash_detect_s={POLL_S * ATTEMPTS:.0f}"
        )
    finally:
        for name in NAMES:
            await forget_record(remote, name)
        await remote.close()
        sshd.stop()


if __name__ == "__main__":
    asyncio.run(main())
