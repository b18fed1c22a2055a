"""The Startup pane beside another specdebug session on the same box (issue 41), over the loopback
sshd on the sim:

* `specdebug stop` from another terminal stops the server the pane watches: the pane says
  "stopped by another specdebug session (specdebug stop, who, when)", never "died (killed or
  crashed)", and `status` says the same from the record's stop mark;
* `specdebug launch` from another terminal relaunches it: the pane follows the new PID from its
  launch (its phases, then READY) and says who relaunched it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from specdebug.core.control.events import ServerState
from specdebug.core.control.records import forget_record, group_members, load_record
from specdebug.core.profiles import Profile
from specdebug.tui.context import AppContext
from specdebug.tui.panes.startup import StartupPane
from tests import clifork
from tests.simprofiles import sim_profile
from tests.tui.pilotwait import until

pytestmark = pytest.mark.slow


class LiveApp(App):
    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx

    def compose(self) -> ComposeResult:
        yield StartupPane(self.ctx)


def profile_file(profile: Profile, folder: Path) -> Path:
    """The profile as a file another specdebug process (the CLI) reads with -c."""
    server = profile.server
    path = folder / f"{profile.name}.toml"
    path.write_text(
        "\n".join(
            [
                f"name = {json.dumps(profile.name)}",
                "[server]",
                f"kind = {json.dumps(server.kind)}",
                f"argv = {json.dumps(server.argv)}",
                f"log_file = {json.dumps(server.log_file)}",
                "[ready]",
                f"timeout_s = {profile.ready.timeout_s}",
            ]
        )
        + "\n"
    )
    return path


def other_session(sshd, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`specdebug VERB -F CONFIG gpubox ARGS...`: another specdebug process, as from another terminal."""
    cmd = [sys.executable, "-m", "specdebug.cli", args[0], "-F", str(sshd.config_path), "gpubox", *args[1:]]
    return clifork.run(cmd, capture_output=True, text=True, timeout=timeout)


async def test_a_stop_and_relaunch_by_another_session_are_told_and_followed(
    box_state_dir, sshd, remote, tmp_path: Path
) -> None:
    profile = sim_profile(tmp_path, f"other-{uuid.uuid4().hex[:6]}")
    path = profile_file(profile, tmp_path)
    ctx = AppContext(remotes={remote.name: remote}, selected=remote.name, profile=profile)
    app = LiveApp(ctx)
    try:
        async with app.run_test(size=(130, 40)) as pilot:
            pane = app.query_one(StartupPane)
            pane.focus()
            await pilot.press("l")
            assert await until(pilot, lambda: pane.state in ("ready", "failed"), 60), pane.message
            assert pane.state == "ready", pane.verdict
            first = pane.record
            assert first is not None

            stopped = await asyncio.to_thread(other_session, sshd, "stop", "-c", str(path))
            assert stopped.returncode == 0, stopped.stderr[-2000:]
            assert await until(pilot, lambda: pane.state is not ServerState.READY, 30)
            assert pane.state is ServerState.STOPPED, (pane.state, pane.message)
            assert "stopped by another specdebug session (specdebug stop" in pane.message, pane.message
            assert "died" not in pane.message and "crashed" not in pane.message
            await pilot.pause(0.1)
            shown = pane.verdict_text().plain + pane.head_text().plain
            assert "stopped by another specdebug session" in shown and "STOPPED" in shown

            status = await asyncio.to_thread(other_session, sshd, "status", "-c", str(path), "--json")
            got = json.loads(status.stdout)
            assert got["state"] == "stopped" and got["record"]["pid"] == first.pid  # the keys it had
            assert got["reason"].startswith("stopped by another specdebug session (specdebug stop"), got
            assert got["stopped_by"]["what"] == "specdebug stop"
            said = await asyncio.to_thread(other_session, sshd, "status", "-c", str(path))
            assert f"{profile.name}: stopped by another specdebug session (specdebug stop" in said.stdout, (
                said.stdout
            )

            launched = await asyncio.to_thread(other_session, sshd, "launch", "-c", str(path), "--json")
            assert launched.returncode == 0, launched.stderr[-2000:]
            new_pid = json.loads(launched.stdout)["pid"]
            assert new_pid != first.pid
            assert await until(pilot, lambda: pane.record is not None and pane.record.pid == new_pid, 30), (
                pane.state,
                pane.message,
            )
            assert "relaunched by another specdebug session (specdebug launch" in pane.message
            assert await until(pilot, lambda: pane.state in ("ready", "failed"), 60), pane.message
            assert pane.state == "ready", pane.verdict
            assert any(p.name == "cuda_graph" for p in pane.phases)  # its phases, from its launch
            await pilot.pause(0.1)
            assert f"PID {new_pid}" in pane.head_text().plain
            assert "launched by another specdebug session (specdebug launch" in pane.verdict_text().plain
    finally:
        record = await load_record(remote, profile.name)
        if record is not None and group_members(await remote.processes(), record):
            await remote.run(["kill", "-KILL", "--", f"-{record.pgid}"])
        await forget_record(remote, profile.name)


async def test_a_launch_onto_gpus_another_server_or_a_bisection_holds_asks_first(
    box_state_dir, sshd, remote, tmp_path: Path
) -> None:
    from specdebug.core.bisect.boxlock import hold_box

    other = sim_profile(tmp_path, f"holder-{uuid.uuid4().hex[:6]}")
    profile = sim_profile(tmp_path, f"second-{uuid.uuid4().hex[:6]}")
    ctx = AppContext(remotes={remote.name: remote}, selected=remote.name, profile=profile)
    app = LiveApp(ctx)
    try:
        launched = await asyncio.to_thread(
            other_session, sshd, "launch", "-c", str(profile_file(other, tmp_path)), "--json"
        )
        assert launched.returncode == 0, launched.stderr[-2000:]
        other_pid = json.loads(launched.stdout)["pid"]
        warnings: list[str] = []
        async with hold_box(remote, "gpubox", "b1s3c7", "good-prof", "bad-prof", warnings):
            assert not warnings, warnings
            async with app.run_test(size=(130, 40)) as pilot:
                pane = app.query_one(StartupPane)
                assert await until(pilot, lambda: pane.state is ServerState.IDLE, 30)
                pane.focus()
                await pilot.press("l")
                assert await until(pilot, lambda: "again within" in pane.launch_warning, 30), pane.message
                warning = pane.launch_warning
                assert f"{other.name} (PID {other_pid}" in warning, warning  # named
                assert "specdebug launch" in warning  # who launched it
                assert "another bisection runs on gpubox" in warning and "good-prof vs bad-prof" in warning
                assert pane.state is ServerState.IDLE and await load_record(remote, profile.name) is None
                await pilot.pause(0.1)
                assert other.name in pane.head_text().plain  # on the screen, not only in a toast

                await pilot.press("l")  # the second press launches anyway
                assert await until(pilot, lambda: pane.state in ("ready", "failed"), 60), pane.message
                assert pane.record is not None and pane.record.pid != other_pid
                assert pane.launch_warning == ""
    finally:
        for name in (other.name, profile.name):
            record = await load_record(remote, name)
            if record is not None and group_members(await remote.processes(), record):
                await remote.run(["kill", "-KILL", "--", f"-{record.pgid}"])
            await forget_record(remote, name)


async def test_a_stop_by_another_session_while_starting_is_no_crash(
    box_state_dir, sshd, remote, tmp_path: Path
) -> None:
    profile = sim_profile(tmp_path, f"early-{uuid.uuid4().hex[:6]}", time_scale="0.3")
    path = profile_file(profile, tmp_path)
    ctx = AppContext(remotes={remote.name: remote}, selected=remote.name, profile=profile)
    app = LiveApp(ctx)
    try:
        async with app.run_test(size=(130, 40)) as pilot:
            pane = app.query_one(StartupPane)
            assert await until(pilot, lambda: pane.state is ServerState.IDLE, 30)
            pane.focus()
            await pilot.press("l")
            assert await until(pilot, lambda: len(pane.phases) >= 2, 60), (pane.state, pane.message)
            assert pane.state is ServerState.STARTING
            stopped = await asyncio.to_thread(other_session, sshd, "stop", "-c", str(path))
            assert stopped.returncode == 0, stopped.stderr[-2000:]
            assert await until(pilot, lambda: pane.verdict is not None, 30), (pane.state, pane.message)
            assert pane.verdict is not None and pane.verdict.error_kind == "stopped", pane.verdict
            reason = pane.verdict.reason or ""
            assert reason.startswith("stopped by another specdebug session (specdebug stop"), reason
            assert "died" not in reason
    finally:
        record = await load_record(remote, profile.name)
        if record is not None and group_members(await remote.processes(), record):
            await remote.run(["kill", "-KILL", "--", f"-{record.pgid}"])
        await forget_record(remote, profile.name)
