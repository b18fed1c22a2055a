"""`specdebug demo` in tmux: shows the simulated host connected and leaves no process on exit."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

SOCKET = "specdebug-test-demo"


def tmux(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", SOCKET, "-f", "/dev/null", *args], capture_output=True, text=True)


def new_session(name: str, cmd: str, width: int = 150, height: int = 45) -> None:
    r = tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), cmd)
    assert r.returncode == 0, r.stderr
    tmux("resize-window", "-t", name, "-x", str(width), "-y", str(height))


def sim_pids() -> set[int]:
    """Processes of simulated boxes: launchers (`-m specdebug.sim`) and their titled workers."""
    pids = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"specdebug.sim" in cmd or cmd.startswith(b"sglang::"):
            pids.add(int(d.name))
    return pids


def wait_screen(predicate, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", "demo").stdout
        if predicate(screen):
            return screen
        time.sleep(0.3)
    raise AssertionError(f"screen never matched; last screen:\n{screen}")


@pytest.mark.parametrize("quit_key", ["q", "C-c"])
def test_demo_runs_and_quits_clean(quit_key, tmp_path):
    before = sim_pids()
    cmd = f"env -u COLUMNS -u LINES {sys.executable} -m specdebug.cli demo --time-scale 0.02 --session {tmp_path / 'session'}; sleep 30"
    tmux("kill-server")
    new_session("demo", cmd)
    try:
        wait_screen(lambda s: "simbox connected" in s, 30)
        # the sim comes up through the startup pane and reaches ready
        wait_screen(lambda s: "READY after" in s, 90)
        assert sim_pids() - before, "the demo should have started a simulated server"
        tmux("send-keys", "-t", "demo", quit_key)
        deadline = time.monotonic() + 20
        while (sim_pids() - before) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sim_pids() - before == set()
        wait_screen(lambda s: "specdebug" not in s.splitlines()[0] if s.strip() else True, 10)
    finally:
        tmux("kill-server")
