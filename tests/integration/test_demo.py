"""`specdebug demo` in tmux: shows the simulated host connected and leaves no process on exit."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.tmux_harness import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


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


@pytest.mark.parametrize("quit_key", ["q", "C-c"])
def test_demo_runs_and_quits_clean(quit_key, tmp_path):
    before = sim_pids()
    tmux = Tmux("specdebug-test-demo")
    tmux.kill()
    tmux.new_session(
        "demo",
        f"{sys.executable} -m specdebug.cli demo --time-scale 0.02 --session {tmp_path / 'session'}; sleep 30",
    )
    try:
        tmux.wait_screen("demo", lambda s: "simbox connected" in s, 30)
        # the sim comes up through the startup pane and reaches ready
        tmux.wait_screen("demo", lambda s: "READY after" in s, 90)
        assert sim_pids() - before, "the demo should have started a simulated server"
        tmux("send-keys", "-t", "demo", quit_key)
        deadline = time.monotonic() + 20
        while (sim_pids() - before) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sim_pids() - before == set()
        tmux.wait_screen("demo", lambda s: "simbox" not in s, 10)  # the app has left the screen
    finally:
        tmux.kill()
