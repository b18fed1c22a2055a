"""A new user's first hour with the TUI, read off the screen in tmux (issue 11, section 2).

Real TUI, real OpenSSH sshd on loopback, the simulated box: reopening while the server runs shows
it READY without a key and without writing anything on the box (read-only seat), pane keys
survive Tab and resizes, read-only keys say so, quitting names the server left running with
the command that stops it, and the demo exits without asyncio noise.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from specdebug.core.control.events import Verdict
from specdebug.core.control.records import forget_record, group_members, load_record, state_dir_of
from specdebug.core.control.watch import launch_and_watch
from specdebug.core.profiles import load_profile
from tests.boxes import ssh_box
from tests.sshd_harness import free_port
from tests.tmux_harness import Tmux

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
    # not `exclusive`: keys are sent once and each waits for its effect on screen (no key is lost
    # under load: tests/tui/test_keys_under_load.py); a run alone made every other worker wait
]


def press_until(tmux: Tmux, name: str, keys: list[str], predicate, *, each: float = 30) -> str:
    """Send `keys` once and wait for the screen to show their effect: a key that does not take is
    a failure (every key is decided as it arrives: specdebug/tui/pane.py), never sent again."""
    for key in keys:
        tmux("send-keys", "-t", name, key)
    return tmux.wait_screen(name, predicate, each)


def write_profile(folder: Path, name: str) -> Path:
    """A tp-2 sim profile as a TOML file (the TUI loads it with -c, as a user would)."""
    port = free_port()
    argv = [sys.executable, "-m", "specdebug.sim", "--tp", "2", "--port", str(port), "--time-scale", "0.02"]
    path = folder / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\n\n[server]\nargv = {json.dumps(argv)}\n'
        f'log_file = "{folder / (name + ".log")}"\nport = {port}\nkind = "sglang"\n\n'
        '[ready]\ntimeout_s = 60\n\n[workers]\nmatch = "sglang::scheduler"\n'
    )
    return path


async def _launch_ready(sshd, path: Path):
    profile = load_profile(path)
    remote = ssh_box(sshd.alias, ssh_config=sshd.config_path)
    await remote.start()
    try:
        await remote.wait_connected(15)
        verdict = None
        async for ev in launch_and_watch(remote, profile):
            if isinstance(ev, Verdict):
                verdict = ev
        assert verdict is not None and verdict.verdict == "ready", verdict
        return await load_record(remote, profile.name)
    finally:
        await remote.close()


async def _state_text(sshd, name: str) -> str:
    remote = ssh_box(sshd.alias, ssh_config=sshd.config_path)
    await remote.start()
    try:
        await remote.wait_connected(15)
        # the test's own box-side state folder (tests/conftest.py sets SPECDEBUG_STATE_DIR per test)
        res = await remote.run(["cat", "--", f"{state_dir_of(remote)}/{name}.json"])
        return res.out
    finally:
        await remote.close()


async def _cleanup(sshd, name: str) -> None:
    remote = ssh_box(sshd.alias, ssh_config=sshd.config_path)
    await remote.start()
    try:
        await remote.wait_connected(15)
        record = await load_record(remote, name)
        if record is not None and group_members(await remote.processes(), record):
            await remote.run(["kill", "-KILL", "--", f"-{record.pgid}"])
        await forget_record(remote, name)
    finally:
        await remote.close()


def flat(screen: str) -> str:
    """The screen as one line (long printed lines wrap at the window's width)."""
    return "".join(line.rstrip("\n") for line in screen.splitlines())


def footer(screen: str) -> str:
    lines = [line for line in screen.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def test_reopen_readonly_shows_running_server_and_keys_behave(sshd, tmp_path: Path) -> None:
    name = f"firsthour-{uuid.uuid4().hex[:6]}"
    path = write_profile(tmp_path, name)
    session = tmp_path / "session"
    tmux = Tmux("specdebug-test-firsthour")
    tmux.kill()
    try:
        record = asyncio.run(_launch_ready(sshd, path))
        state_before = asyncio.run(_state_text(sshd, name))
        assert f'"pid": {record.pid}' in state_before
        tmux.new_session(
            "tui",
            f"{sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox -c {path} "
            f"--readonly --session {session}; sleep 30",
            150,
            45,
        )
        tmux.wait_screen("tui", lambda s: "gpubox connected" in s, 30)
        # no `a` pressed: the pane recognises the profile's running server by itself
        screen = press_until(
            tmux,
            "tui",
            ["2"],
            # the footer takes the pane's keys a frame after the pane shows: a loaded machine
            # can capture the screen in between, so the wait covers the footer too
            lambda s: (
                "READY" in s
                and "found running" in s
                and "found already running" in s
                and "Attach" in footer(s)
            ),
        )
        assert f"PID {record.pid}" in screen and "health 200" in screen
        # read-only: mutating keys are not offered, and pressing one says why
        assert "Launch" not in footer(screen)
        press_until(tmux, "tui", ["x"], lambda s: "read-only seat: Stop would change the box" in flat(s))
        # Tab inside the pane and a resize keep the pane's keys in the footer (and working); waits of 30 s:
        # 10 s was too short on a loaded machine (parallel workers)
        for _ in range(3):
            tmux("send-keys", "-t", "tui", "Tab")
        tmux("resize-window", "-t", "tui", "-x", "120", "-y", "40")
        tmux("resize-window", "-t", "tui", "-x", "150", "-y", "45")
        tmux.wait_screen("tui", lambda s: "a Attach" in footer(s), 30)
        press_until(tmux, "tui", ["3", "Tab", "Tab"], lambda s: "f Follow log" in footer(s))
        # q leaves the server running (right on a real box) and says how to stop it
        tmux("send-keys", "-t", "tui", "q")
        screen = tmux.wait_screen("tui", lambda s: "still running" in s, 60)
        text = flat(screen)
        assert f"{name} is still running on gpubox (PID {record.pid}" in text
        assert f"specdebug stop -F {sshd.config_path} gpubox -c {path}" in text
        # the read-only seat wrote nothing: same state file on the box, no journal events
        assert asyncio.run(_state_text(sshd, name)) == state_before
        events = session / "events.jsonl"
        assert not events.exists() or events.read_text() == ""
    finally:
        tmux.kill()
        asyncio.run(_cleanup(sshd, name))


def test_demo_exit_is_quiet(tmp_path: Path) -> None:
    tmux = Tmux("specdebug-test-firsthour-demo")
    tmux.kill()
    tmux.new_session(
        "demo",
        f"{sys.executable} -m specdebug.cli demo --time-scale 0.02 --session {tmp_path / 'session'}; "
        "echo DEMO-EXITED; sleep 30",
    )
    try:
        tmux.wait_screen("demo", lambda s: "READY after" in s, 90)
        # the env check and the log follower hold sessions
        press_until(tmux, "demo", ["4"], lambda s: "TP0" in s)
        press_until(tmux, "demo", ["3"], lambda s: "following" in s)
        tmux("send-keys", "-t", "demo", "q")
        screen = tmux.wait_screen("demo", lambda s: "DEMO-EXITED" in s, 30)
        noise = screen  # the app draws on stderr, so its noise after exit lands on the screen
        assert "Task was destroyed" not in noise
        assert "Event loop is closed" not in noise
        assert "Traceback" not in noise
    finally:
        tmux.kill()
