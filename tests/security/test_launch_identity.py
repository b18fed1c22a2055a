"""The recorded PID/PGID/start time are the server's own, reported by the server side of the launch.

The old launch read the group from a process snapshot taken after the launch script returned; when
the snapshot came before the child's setsid(), the record named the launching shell's group.  Here
a short-lived command (`cat /proc/self/stat`, which prints the server's own identity into its log)
is launched many times through the real launch script over the real sshd while a busy-loop process
group we started ourselves loads the CPUs; every record must name exactly what the server printed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from specdebug.core.control.launch import launch, parse_launch_report, start_detached
from specdebug.core.control.records import load_record
from specdebug.core.profiles import Profile
from specdebug.remote.api import RemoteError
from tests.sshd_harness import free_port

pytestmark = pytest.mark.slow
LAUNCHES = 200


@pytest.fixture
def cpu_load():
    """Busy loops in one process group of our own (killed by that group at the end, nothing else)."""
    hog = subprocess.Popen(
        ["sh", "-c", "for i in 1 2; do (while :; do :; done) & done; wait"], start_new_session=True
    )
    try:
        yield hog
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait(10)


def stat_profile(tmp_path: Path, name: str, i: int) -> Profile:
    return Profile.model_validate(
        {
            "name": name,
            "server": {
                "argv": ["cat", "/proc/self/stat"],  # exec'd in place: /proc/self is the server itself
                "log_file": str(tmp_path / f"launch-{i}.log"),
                "port": free_port(),
                "kind": "custom",
                "spt_noenv": False,
            },
        }
    )


def own_identity(line: str) -> tuple[int, int, int, int]:
    """(pid, pgid, sid, start ticks) from a /proc/PID/stat line."""
    fields = line[line.rfind(")") + 2 :].split()
    return int(line.split()[0]), int(fields[2]), int(fields[3]), int(fields[19])


async def wait_line(path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        if text.endswith("\n"):
            return text.strip()
        assert time.monotonic() < deadline, f"{path} never got the server's line"
        await asyncio.sleep(0.05)


# not `exclusive`: it judges identities, not timing, so other tests running beside its busy loops only
# add to the load it wants; run alone, it made every other worker wait for it
async def test_short_lived_servers_under_load_record_their_own_group(remote, tmp_path, cpu_load) -> None:
    name = f"idtest-{uuid.uuid4().hex[:6]}"
    started = []
    t0 = time.monotonic()
    for i in range(LAUNCHES):
        profile = stat_profile(tmp_path, name, i)
        started.append((profile, await start_detached(remote, profile, uuid.uuid4().hex)))
    elapsed = time.monotonic() - t0
    print(f"{LAUNCHES} launches under load in {elapsed:.1f} s ({elapsed / LAUNCHES * 1000:.0f} ms each)")
    wrong = []
    for profile, got in started:
        pid, pgid, sid, start = own_identity(await wait_line(Path(profile.server.log_file)))
        if (got.pid, got.pgid, got.sid, got.start_ticks) != (pid, pgid, sid, start) or pid != pgid:
            wrong.append((got, (pid, pgid, sid, start)))
    assert not wrong, f"{len(wrong)} of {LAUNCHES} launches recorded another identity: {wrong[:3]}"
    assert len({got.pid for _, got in started}) == LAUNCHES


async def test_full_launch_records_what_the_server_reported(
    remote, tmp_path, cpu_load, box_state_dir
) -> None:
    """The record written on the box (state folder of this test) carries the reported identity."""
    name = f"idrec-{uuid.uuid4().hex[:6]}"
    for i in range(10):
        profile = stat_profile(tmp_path, name, i)
        record = await launch(remote, profile, check=False)
        pid, pgid, _, start = own_identity(await wait_line(Path(profile.server.log_file)))
        assert (record.pid, record.pgid, record.start_ticks, record.pid_start_ticks) == (
            pid,
            pgid,
            start,
            start,
        )
        assert await load_record(remote, name) == record
    assert (box_state_dir / f"{name}.json").is_file()
    assert not (Path.home() / ".specdebug" / "servers" / f"{name}.json").exists()


def test_launch_report_is_parsed_strictly() -> None:
    stat = "4242 (sh) S 4200 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 1 2"
    got = parse_launch_report(f"size 10\nlog /tmp/x.log\nserver {stat}\n")
    assert (got.pid, got.pgid, got.sid, got.start_ticks, got.log_offset) == (4242, 4242, 4242, 777, 10)
    with pytest.raises(RemoteError, match="own process group"):
        parse_launch_report(f"size 0\nlog /x\nnotleader {stat}\n")
    with pytest.raises(RemoteError, match="did not report"):
        parse_launch_report("size 0\nlog /x\n")  # never a guess from a process snapshot
    other = stat.replace("4200 4242 4242", "4200 4100 4100")
    with pytest.raises(RemoteError, match="refused"):
        parse_launch_report(f"size 0\nlog /x\nserver {other}\n")
