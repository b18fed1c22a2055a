"""`specdebug demo` in tmux: shows the simulated host connected and leaves no process on exit.

Only the demo's own servers are checked (their process groups, from the demo box's state folder):
other suites and demos may run sims beside this test."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.tmux_harness import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def demo_groups(box_tmp: Path) -> set[int]:
    """Process groups of the servers this test's demo launched: read from the demo box's own state
    folder (the demo makes its box folder under TMPDIR, which the test points at its tmp_path)."""
    groups = set()
    for record in box_tmp.glob("specdebug-demo-box-*/servers/*.json"):
        try:
            groups.add(int(json.loads(record.read_text())["pgid"]))
        except (OSError, ValueError, KeyError):
            continue
    return groups


def alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.mark.parametrize("quit_key", ["q", "C-c"])
def test_demo_runs_and_quits_clean(quit_key, tmp_path):
    box_tmp = tmp_path / "tmp"
    box_tmp.mkdir()
    tmux = Tmux("specdebug-test-demo")
    tmux.kill()
    tmux.new_session(
        "demo",
        f"env TMPDIR={box_tmp} {sys.executable} -m specdebug.cli demo --time-scale 0.02 --session {tmp_path / 'session'}; sleep 30",
    )
    try:
        tmux.wait_screen("demo", lambda s: "simbox connected" in s, 30)
        # the sim comes up through the startup pane and reaches ready
        tmux.wait_screen("demo", lambda s: "READY after" in s, 90)
        groups = demo_groups(box_tmp)
        assert groups and any(alive(g) for g in groups), "the demo should have started a simulated server"
        tmux("send-keys", "-t", "demo", quit_key)
        deadline = time.monotonic() + 20
        while any(alive(g) for g in groups) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [g for g in groups if alive(g)] == []
        tmux.wait_screen("demo", lambda s: "simbox" not in s, 10)  # the app has left the screen
    finally:
        tmux.kill()
