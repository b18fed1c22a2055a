"""The liveness watch after ready (what the Startup pane runs: watch_deployment_liveness) sees a
kill -9 of the server's main process through the box helper's pidfd on that process, not at the
next group listing (issue 43: "crash at 0.5 s"; the listing came every 0.5 s).  Here the listing
interval is far longer than the deadline, so only the main-PID watch can name the exit in time.
This machine is the box (LocalTransport with its resident helper); the "server" is a real process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import pytest

from specdebug.core.control.actions import ServerStatus
from specdebug.core.control.events import ServerState
from specdebug.core.control.records import ServerRecord
from specdebug.core.deployment import place
from specdebug.core.deployment.monitor import DeploymentMonitor, watch_deployment_liveness
from specdebug.core.deployment.status import DeploymentStatus
from specdebug.core.deployment.tracker import NodeSummary
from specdebug.core.profiles import load_profile
from tests.boxes import local_box
from tests.leakcheck import group_members

PROFILE = """name = "pidwatch"
[server]
kind = "sglang"
argv = ["python", "-m", "sglang.launch_server", "--port", "30000"]
port = 30000
"""


def start_ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def group_alive(pgid: int) -> list[int]:
    """Live (not zombie) processes of the group: the listing the watch asks for."""
    return sorted(p.pid for p in group_members(pgid))


def pidfd_held_on(pid: int) -> bool:
    """Some process of ours holds a pidfd of `pid` (the helper watching it)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            for fd in (d / "fd").iterdir():
                if (
                    os.readlink(fd) == "anon_inode:[pidfd]"
                    and f"Pid:\t{pid}\n" in (d / "fdinfo" / fd.name).read_text()
                ):
                    return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this Python/kernel")
async def test_kill_9_of_the_main_process_is_named_before_the_next_listing(tmp_path: Path) -> None:
    path = tmp_path / "pidwatch.toml"
    path.write_text(PROFILE)
    profile = load_profile(path)
    server = subprocess.Popen(["sleep", "300"], start_new_session=True)
    box = local_box("local", state_dir=str(tmp_path / "state"))
    watch = None
    try:
        await box.start()
        await box.wait_connected(30)
        rec = ServerRecord(
            profile=profile.name,
            host="local",
            pid=server.pid,
            pgid=server.pid,
            start_ticks=start_ticks(server.pid),
            port=30000,
            log_file=str(tmp_path / "server.log"),
        )
        mon = DeploymentMonitor(place(profile, "local"))
        found = ServerStatus(
            profile=profile.name, state="running", record=rec, pids=[server.pid], health=200, port=30000
        )
        mon.apply_status(
            DeploymentStatus(
                profile=profile.name,
                state="running",
                nodes=[NodeSummary(host="local", rank=0, state="running")],
                node_status=[found],
                health=200,
            )
        )
        assert mon.state is ServerState.READY

        async def listed(remote, record, prof):  # noqa: ANN001, ANN202 (the Liveness signature)
            return group_alive(record.pgid), 200

        watch = watch_deployment_liveness(mon, {"local": box}, liveness=listed, interval=300.0)

        async def consume() -> None:
            async for _ in watch:
                if mon.state is not ServerState.READY:
                    return

        consumer = asyncio.create_task(consume())
        deadline = asyncio.get_running_loop().time() + 30
        while not pidfd_held_on(server.pid):  # the helper watches the main process
            assert asyncio.get_running_loop().time() < deadline, "the box never watched the main PID"
            await asyncio.sleep(0.05)
        os.kill(server.pid, signal.SIGKILL)
        await asyncio.wait({consumer}, timeout=30)  # the listing alone would come after 300 s
        assert consumer.done(), "the exit was not seen before the next listing"
        consumer.result()
        # its one node's run ended: the target fails, naming why
        assert mon.nodes["local"].state is ServerState.EXITED, mon.nodes["local"].message
        assert mon.state is ServerState.FAILED and "gone" in mon.message
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
        if watch is not None:
            await watch.aclose()
        await box.close()
