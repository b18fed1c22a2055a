"""The real TUI in tmux on a deployment over two loopback sshd hosts (node0 = 127.0.0.2, node1 =
127.0.0.3): `specdebug -c PROFILE` with no HOST opens on both nodes, the hosts pane groups them, the
Startup pane launches both and shows each node's phase row reach ready, the Env pane has a node row
and the transport verdict (socket: NCCL_IB_DISABLE=1 on node1), the Logs pane a node column, node1
killed after ready fails the deployment naming it, and stop leaves nothing on either node.  Read off the screen as a user would."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from tests import clifork
from tests.cluster_harness import Cluster, cluster_fixture, kill_recorded
from tests.deployprofiles import dep_profile
from tests.tmux_harness import Tmux

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]


cluster = cluster_fixture()


def _rows(screen: str, *starts: str) -> list[str]:
    return [line for line in screen.splitlines() if line.strip(" ✓▶✗·").startswith(starts)]


def _press(tmux: Tmux, *keys: str) -> None:
    for key in keys:  # at a person's pace: the confirmation's second x is a second press
        tmux("send-keys", "-t", "tui", key)
        time.sleep(0.3)


def test_tui_launches_a_deployment_on_two_nodes_and_shows_every_node(
    cluster: Cluster, tmp_path: Path, box_state_dir: Path
) -> None:
    prof = dep_profile(tmp_path, "tui", env={"NCCL_DEBUG": "INFO"}, node1_env={"NCCL_IB_DISABLE": "1"})
    tmux = Tmux("specdebug-test-tui-dep")
    tmux.kill()
    cmd = f"{sys.executable} -m specdebug.cli -F {cluster.config_path} -c {prof} --session {tmp_path / 's'}"
    tmux.new_session("tui", f"{cmd}; sleep 30", 160, 45)
    try:
        screen = tmux.wait_screen(
            "tui", lambda s: "├ node0 leader    connected" in s and "└ node1 rank 1    connected" in s, 60
        )
        assert "▾ dep-tui-" in screen and "2/2 connected" in screen

        _press(tmux, "2")
        tmux.wait_screen("tui", lambda s: "deployment of 2 nodes  IDLE" in s, 30)
        _press(tmux, "l")
        screen = tmux.wait_screen("tui", lambda s: "READY as one after" in s, 120)
        rows = _rows(screen, "node0 leader", "node1 #1")
        assert len(rows) == 2 and all(" ready " in r for r in rows), screen

        _press(tmux, "4")  # the READY news made the Env pane check every node
        screen = tmux.wait_screen("tui", lambda s: "transport: socket" in s and "node1: OK" in s, 60)
        node_row = _rows(screen, "node ")
        assert node_row and "node0" in node_row[0] and "node1" in node_row[0], screen
        assert "node0: OK" in screen

        _press(tmux, "3")
        screen = tmux.wait_screen("tui", lambda s: "node0 │" in s and "node1 │" in s, 30)
        assert "2 nodes' logs (node0, node1)" in screen

        # a worker node dying after ready fails the deployment naming it, while the leader still serves
        node1 = json.loads(next(box_state_dir.glob("dep-tui-*.node1.json")).read_text())
        os.killpg(node1["pgid"], signal.SIGKILL)
        _press(tmux, "2")
        screen = tmux.wait_screen("tui", lambda s: re.search(r"FAILED after [0-9.]+s: node1\b", s), 30)
        assert "node0 still running" in screen and _rows(screen, "node1 #1")[0].split()[3] == "exited"

        _press(tmux, "x", "x")
        screen = tmux.wait_screen("tui", lambda s: " stopped " in "".join(_rows(s, "node0 leader")), 60)
    finally:
        tmux.kill()
    assert kill_recorded(box_state_dir, "dep-tui-") == 0  # nothing left running on either node


def test_tui_finds_a_deployment_launched_headless_and_names_the_stop_command_at_quit(
    cluster: Cluster, tmp_path: Path, box_state_dir: Path
) -> None:
    """The headless twin first (`launch -c PROFILE --wait`), then the TUI at 80x24: the Startup pane
    recognises the running deployment on both nodes; quitting leaves it running and says how to stop it."""
    prof = dep_profile(tmp_path, "tuifound")
    base = [sys.executable, "-m", "specdebug.cli"]
    run = clifork.run(
        [*base, "launch", "-F", str(cluster.config_path), "-c", str(prof), "--wait"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    tmux = Tmux("specdebug-test-tui-dep-found")
    tmux.kill()
    cmd = f"{sys.executable} -m specdebug.cli -F {cluster.config_path} -c {prof} --session {tmp_path / 's'}"
    tmux.new_session("tui", f"{cmd}; sleep 30", 80, 24)
    try:
        _press(tmux, "2")
        screen = tmux.wait_screen("tui", lambda s: "found running" in s and "READY" in s, 60)
        rows = _rows(screen, "node0 leader", "node1 #1")
        assert len(rows) == 2 and all(" ready " in r for r in rows), screen
        _press(tmux, "q")
        screen = tmux.wait_screen("tui", lambda s: "stop it with:" in s, 30)
        note = "".join(screen.split())  # the line wraps at 80 columns, inside words too
        assert f"{prof.stem}isstillrunningonnode0" in note, screen
        assert f"stopitwith:specdebugstop-F{cluster.config_path}node0-c{prof}" in note, screen
    finally:
        tmux.kill()
    stop = clifork.run(
        [*base, "stop", "-F", str(cluster.config_path), "node0", "-c", str(prof)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stop.returncode == 0, stop.stderr  # the note's command: the leader's HOST stops every node
    assert kill_recorded(box_state_dir, "dep-tuifound-") == 0
