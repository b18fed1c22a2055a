"""A server log that cannot be followed ends the startup watch with a reason naming the log, at once
(not a timeout minutes later): the real sshd, the Follower's agent on the box (this machine)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from specdebug.core.control.events import LogProblem, Verdict
from specdebug.core.control.records import ServerRecord
from specdebug.core.control.watch import watch
from tests.simprofiles import sim_profile

pytestmark = pytest.mark.slow


@pytest.fixture
def group():
    """A process group of our own that stays alive (so the verdict is about the log, not an exit)."""
    proc = subprocess.Popen(["sleep", "900"], start_new_session=True)
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(5)


def record(profile, proc, log_file: str) -> ServerRecord:
    return ServerRecord(
        profile=profile.name,
        pid=proc.pid,
        pgid=proc.pid,
        port=profile.server.port,
        log_file=log_file,
        log_offset=0,
        started_at=time.time(),
    )


async def verdict_for(remote, profile, rec) -> tuple[Verdict, list]:
    events = [ev async for ev in watch(remote, rec, profile, timeout_s=600)]
    verdict = events[-1]
    assert isinstance(verdict, Verdict)
    return verdict, events


@pytest.mark.parametrize("where", ["missing-dir", "directory"])
async def test_unreadable_log_is_the_reason(remote, tmp_path: Path, group, where: str) -> None:
    profile = sim_profile(tmp_path, f"logproblem-{where}")
    if where == "missing-dir":
        log = str(tmp_path / "no-such-dir" / "server.log")
    else:
        log = str(tmp_path / "a-directory")
        os.mkdir(log)
    # named at once, not at the 600 s ready timeout: within a 180 s deadline (no clock read)
    verdict, events = await asyncio.wait_for(verdict_for(remote, profile, record(profile, group, log)), 180)
    assert verdict.verdict == "failed" and verdict.error_kind == "log_unreadable"
    assert log in (verdict.reason or "")
    assert ("no such file" if where == "missing-dir" else "not a regular file") in (verdict.reason or "")
    problems = [ev for ev in events if isinstance(ev, LogProblem)]
    assert problems and problems[0].path == log
