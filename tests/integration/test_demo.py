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
        deadline = time.monotonic() + 60
        while any(alive(g) for g in groups) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [g for g in groups if alive(g)] == []
        tmux.wait_screen("demo", lambda s: "simbox" not in s, 60)  # the app has left the screen
        # its box folder and its sshd's (throwaway keys) go with it: each demo left two in /tmp
        deadline = time.monotonic() + 60
        while list(box_tmp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(box_tmp.iterdir()) == []
    finally:
        tmux.kill()


@pytest.mark.parametrize("quit_first", [True, False])
def test_a_hangup_during_the_demo_cleanup_still_stops_its_server(tmp_path, quit_first):
    """The pane closes (tmux killed) while the demo runs or, after `q`, while it stops its server:
    the harness's kill sent TERM and KILL to the demo's group as soon as the pane's shell had
    ended, cutting the cleanup short, and the whole sim ran on (issue 26, after
    test_demo_hosts_pane_shows_8_gpus_and_the_throttled_one).  A second signal during the cleanup
    must not cut it short either."""
    box_tmp = tmp_path / "tmp"
    box_tmp.mkdir()
    tmux = Tmux("specdebug-test-demo-hup")
    tmux.kill()
    tmux.new_session(
        "demo",
        f"env TMPDIR={box_tmp} {sys.executable} -m specdebug.cli demo --time-scale 0.02 --session {tmp_path / 'session'}; sleep 30",
    )
    groups: set[int] = set()
    try:
        tmux.wait_screen("demo", lambda s: "READY after" in s, 90)
        groups = demo_groups(box_tmp)
        assert groups and any(alive(g) for g in groups)
        if quit_first:
            tmux("send-keys", "-t", "demo", "q")
            tmux.wait_screen("demo", lambda s: "simbox" not in s, 30)  # the app left; its cleanup runs
    finally:
        # SIGHUP (and the kernel's SIGCONT) to the demo, in the middle of stopping its server
        forced = tmux.kill(check=False)  # checked below, once its server is known to be stopped
    deadline = time.monotonic() + 30
    while any(alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [g for g in groups if alive(g)]
    for g in left:  # never leave it behind, even when the check fails
        os.killpg(g, 9)
    assert left == []
    # and it ended by itself: the hangup's SIGCONT used to restart Textual's input thread on the
    # dead terminal, which spun at 100% CPU and kept the demo from exiting until the harness's TERM
    assert forced == [], "the demo outlived its terminal"
