"""`specdebug demo --check`: the demo's whole path without a screen, for CI and a fresh install.

Starts the demo box (loopback SSH server + simulated nvidia-smi), probes it, launches the default
profile, waits for ready, runs one short benchmark, stops the server, and prints each step with
what it saw.  Exit 0 only when every step worked: a wheel missing its examples, a sim that
cannot be imported or a broken forward all end in 1 with the step that failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from specdebug.core.profiles import Profile
from specdebug.errors import SpecdebugError
from specdebug.sim.box.loopback_sshd import LoopbackSSHServer

CHECK_TIME_SCALE = 0.02  # startup in a few seconds
READY_TIMEOUT_S = 120.0


class CheckFailed(SpecdebugError):
    pass


def say(text: str) -> None:
    print(text, flush=True)


async def _check(server: LoopbackSSHServer, profile: Profile, session: Path) -> None:
    from specdebug.core.bench.runner import BenchRequest, run_benchmark
    from specdebug.core.control import actions as server_control
    from specdebug.core.control.events import Verdict
    from specdebug.core.control.launch import launch
    from specdebug.core.control.records import forget_record
    from specdebug.core.control.watch import watch
    from specdebug.core.hosts import gather_host_info
    from specdebug.core.journal import Journal
    from specdebug.remote.factory import ConnectOptions, SSHOptions, connect_host

    journal = Journal(session)
    remote = connect_host(server.alias, ConnectOptions(ssh=SSHOptions(ssh_config=server.config_path)))
    try:
        t0 = time.monotonic()
        await remote.wait_connected(20)
        info = await gather_host_info(remote)
        say(f"ok   connected to the demo box {info.hostname} ({time.monotonic() - t0:.1f} s)")
        if info.gpu_error or len(info.gpus) != 8:
            raise CheckFailed(f"expected 8 simulated GPUs, got {len(info.gpus)} ({info.gpu_error})")
        say(f"ok   {len(info.gpus)} GPUs: {info.gpus[0].name}, {info.gpus[0].memory_total_mib:.0f} MiB each")

        record = await launch(remote, profile, journal=journal)
        say(f"ok   launched {profile.name}: PID {record.pid}, log {record.log_file}")
        try:
            verdict = None
            async for ev in watch(remote, record, profile, timeout_s=READY_TIMEOUT_S, journal=journal):
                if isinstance(ev, Verdict):
                    verdict = ev
            if verdict is None or verdict.verdict != "ready":
                reason = verdict.reason if verdict else "no verdict"
                raise CheckFailed(f"server not ready: {reason}")
            phases = " -> ".join(p.name for p in verdict.phases)
            say(f"ok   ready after {verdict.elapsed_s:.1f} s ({phases})")

            request = BenchRequest(
                requests=4, concurrency=1, input_len=64, output_len=48, label="demo --check"
            )
            result = await run_benchmark(remote, profile, request, journal=journal, host=server.alias)
            if result.status != "done" or not result.successful_requests:
                raise CheckFailed(f"benchmark {result.status}: {'; '.join(result.errors[:2])}")
            head = result.headline()
            say(
                f"ok   benchmark: {result.successful_requests} requests, {head:.1f} tok/s"
                f" (accept length {result.server.accept_len if result.server else None})"
            )
            for g in result.gpu_after[:1]:
                say(
                    f"ok   GPU {g.index} after the run: {g.utilization_pct:.0f} %, {g.memory_used_mib:.0f} MiB,"
                    f" {g.temperature_c:.0f} C, {g.power_draw_w:.0f} W, SM {g.clocks_sm_mhz:.0f} MHz"
                )
            for warning in result.warnings:
                say(f"     warning: {warning}")
        finally:
            stopped = await server_control.stop(remote, profile, grace_s=3.0, journal=journal)
            if not stopped.stopped:
                raise CheckFailed(f"stop failed: {stopped.message}")
            say(f"ok   stopped: {stopped.message}")
            await forget_record(remote, profile.name)
    finally:
        await remote.close()


def run_check(
    profile_name: str,
    *,
    time_scale: float | None = None,
    session: str | None = None,
    sim_args: list[str] | None = None,
) -> int:
    from specdebug.core.profiles import ProfileError
    from specdebug.demo.run import demo_profile, demo_session, find_example

    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="specdebug-demo-check-"))
    try:
        path = find_example(profile_name)
        profile = demo_profile(path, workdir, time_scale or CHECK_TIME_SCALE, sim_args=sim_args)
        # its own name: a demo running beside the check (same box user) keeps its server
        profile = profile.model_copy(update={"name": f"{profile.name}-check{os.getpid()}"})
    except (FileNotFoundError, ProfileError) as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        say(f"FAIL {exc}")
        return 1
    say(f"ok   profile {path}")
    server = LoopbackSSHServer(alias="simbox")
    session_dir = demo_session(session)
    try:
        server.start()
        asyncio.run(_check(server, profile, session_dir))
    except CheckFailed as exc:
        say(f"FAIL {exc}")
        return 1
    except Exception as exc:
        say(f"FAIL {type(exc).__name__}: {exc}")
        return 1
    finally:
        server.stop()
        for d in (workdir, server.dir):
            with contextlib.suppress(OSError):
                shutil.rmtree(d)
    say(f"demo check passed in {time.monotonic() - started:.1f} s; journal in {session_dir}")
    return 0
