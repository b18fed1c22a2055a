"""A slow reader of a fast log stays bounded: the follow agent waits for acknowledgements.

Before: the agent wrote as fast as it read the file and SSH's window was the only brake, but
asyncssh re-grants a paused channel's whole window each time it hands the reader one block, so a
reader keeping up at a fraction of the rate buffered without bound (the Logs pane soak: RSS
292 -> 530 MB in 2 minutes at 20k lines/s, the backlog in the channel's buffer).  Now the agent
keeps at most ACK_WINDOW bytes out unacknowledged (core/logs/agent.py, box/follow.py): the rest
waits in the file, every line still arrives once, in order, and closing the follower ends the agent
(its stdin is the channel's; no watchdog around it).  Real sshd, the box is this machine.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.agent import ACK_WINDOW
from specdebug.core.logs.follow import Follower, RawLine

LINE = b"[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 16, accept len: 2.50, " + b"x" * 120


def agent_pid(path: Path) -> int | None:
    """The follow agent reading `path` (its argv names the file; the path is this test's own)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:1] and argv[0].endswith(b"python3") and str(path).encode() in argv:
            return int(pid)
    return None


def read_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


async def test_slow_reader_leaves_the_backlog_in_the_file(remote, tmp_path: Path) -> None:
    log = tmp_path / "fast.log"
    total = (160 << 20) // (len(LINE) + 1)  # 160 MB: far more than any buffer on the way
    with log.open("wb") as f:
        for _ in range(total // 10_000):
            f.write((LINE + b"\n") * 10_000)
    total = total // 10_000 * 10_000
    follower = Follower(remote, str(log), prefilter=["Decode batch"], offset=0)
    batches = follower.batches()
    got = 0
    next_at = 0
    pid = None
    base: tuple[int, int] | None = None
    in_flight: list[int] = []
    try:
        t0 = time.monotonic()
        async for batch in batches:
            for item in batch:
                if isinstance(item, RawLine):
                    assert item.offset == next_at, f"line {got}: at {item.offset}, expected {next_at}"
                    next_at += len(item.data) + 1
                    got += 1
            if pid is None:
                pid = agent_pid(log)
                assert pid is not None, "the agent is not running on the box"
                base = (read_bytes(pid), follower.offset or 0)
            slow = time.monotonic() - t0 < 12
            if slow and base is not None:
                # what the agent read from the file beyond what we have taken: in flight somewhere
                in_flight.append((read_bytes(pid) - base[0]) - ((follower.offset or 0) - base[1]))
                await asyncio.sleep(0.02)  # a reader at a fraction of the agent's pace
            if got >= total:
                break
        assert got == total  # every line once, in order (checked above), none lost to the brake
        bound = ACK_WINDOW + 2 * MAX_LINE + (4 << 20)  # the window, one block each way, the pipe and slack
        assert max(in_flight) < bound, f"{max(in_flight)} bytes in flight (bound {bound}): {in_flight[-5:]}"
    finally:
        await batches.aclose()
    assert pid is not None
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), "the agent outlived the follower (stdin EOF must end it)"
