"""A Slurm client command whose caller is cancelled ends with it (issue 26: no "Event loop is closed").

`slurm_command` waits for scontrol/sinfo output; cancelled meanwhile (a pane's poll as the app
leaves), the command ran on and its pipes stayed open, so its transport outlived the loop and said
"Event loop is closed" when collected.  A plain shell stands in for the Slurm client: what is tested
is how the command is ended, not what Slurm answers.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from specdebug.transport.slurm.job import slurm_command
from tests.unit.test_local_transport import _group_alive, run_collecting_unraisable


def test_a_cancelled_slurm_command_is_ended_with_its_pipes(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    pids: list[int] = []

    async def cancel_midway() -> None:
        # its own session (setsid): _group_alive looks at the group it leads
        script = f"echo $$ > {pidfile}; exec sleep 600"
        task = asyncio.ensure_future(slurm_command(["setsid", "sh", "-c", script], timeout=60))
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < deadline, "the command never started"
            await asyncio.sleep(0.02)
        pids.append(int(pidfile.read_text()))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert run_collecting_unraisable(cancel_midway()) == []
    deadline = time.monotonic() + 60
    while _group_alive(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(pids[0]), "the command outlived its cancelled caller"
