"""The first screen comes before the heavy imports: the hosts show as connecting, then as connected.

`specdebug HOST` in tmux, with an import gate of the test's own (a sitecustomize on PYTHONPATH): any
import of asyncssh or pydantic waits until the test opens the gate.  While it is shut, the screen must
already show the app (its header, the host connecting, the keys); once it opens, the host connects.
An app that imports them before its first paint shows nothing until the gate opens.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.tmux_harness import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

GATE = """\
import os, sys, time

class ImportGate:
    '''Holds the imports of the heavy modules until the gate file exists (the test opens it).'''

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("asyncssh", "pydantic"):
            while not os.path.exists(os.environ["SPECDEBUG_TEST_GATE"]):
                time.sleep(0.05)
        return None

sys.meta_path.insert(0, ImportGate())
"""


def _behind_the_gate(sshd, tmp_path, name: str) -> tuple[Tmux, Path]:
    """`specdebug -F CONFIG gpubox` in a tmux session of its own, its heavy imports held by the gate
    (a sitecustomize on PYTHONPATH) until the test touches the returned path."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GATE)
    gate = tmp_path / "gate-open"
    home = tmp_path / "home"
    home.mkdir()
    tmux = Tmux(name)
    tmux.kill()
    tmux.new_session(
        "tui",
        f"env HOME={home} PYTHONPATH={site} SPECDEBUG_TEST_GATE={gate} {sys.executable} -m specdebug.cli "
        f"-F {sshd.config_path} gpubox --session {tmp_path / 'session'}",
        150,
        40,
    )
    return tmux, gate


def test_the_hosts_show_connecting_before_asyncssh_and_pydantic_are_imported(sshd, tmp_path):
    tmux, gate = _behind_the_gate(sshd, tmp_path, "specdebug-test-first-screen")
    try:
        # the gate is shut: no asyncssh, no pydantic, and yet the app is on the screen
        screen = tmux.wait_screen("tui", lambda s: "connecting…" in s and "q Quit" in s, 60)
        assert "specdebug" in screen and "gpubox" in screen
        assert not gate.exists()
        gate.touch()
        tmux.wait_screen("tui", lambda s: "gpubox connected" in s and "NVIDIA H200" in s, 60)
        tmux("send-keys", "-t", "tui", "q")
        tmux.wait_screen("tui", lambda s: "q Quit" not in s, 20)
    finally:
        tmux.kill()


def test_a_tab_key_on_the_first_screen_shows_that_pane_with_its_content(sshd, tmp_path):
    """`2` pressed while the panes are still importing: once they are there, the Startup pane is shown
    with its content.  A guard: the race it stands beside (a key while the body mounted switched a
    TabbedContent that had not started: the tab marked, the body blank) showed only in the real tier's
    TUI test (`2` as soon as the host connected, 2 of 2 runs on the loaded machine; passes after)."""
    tmux, gate = _behind_the_gate(sshd, tmp_path, "specdebug-test-first-screen-tab")
    try:
        tmux.wait_screen("tui", lambda s: "connecting…" in s and "q Quit" in s, 60)
        tmux("send-keys", "-t", "tui", "2")
        gate.touch()
        screen = tmux.wait_screen("tui", lambda s: "no profile: start specdebug with -c PROFILE" in s, 60)
        assert "NVIDIA H200" not in screen  # the Startup pane, not the Hosts pane
        tmux("send-keys", "-t", "tui", "q")
        tmux.wait_screen("tui", lambda s: "q Quit" not in s, 20)
    finally:
        tmux.kill()


def test_keys_typed_on_the_first_screen_reach_the_panes_in_order(sshd, tmp_path):
    """`3 / ctrl+u verifyaccept Enter` typed while the panes are still importing: once they are there,
    the Logs pane shows that filter.  Before, the letters had nothing to take them and Enter reached
    the hosts table ("acting on gpubox"; CI: the busy-loops keys test typed at "connected")."""
    tmux, gate = _behind_the_gate(sshd, tmp_path, "specdebug-test-first-screen-keys")
    try:
        tmux.wait_screen("tui", lambda s: "connecting…" in s and "q Quit" in s, 60)
        # a `q` inside the word is a letter once a key is held, not Quit
        tmux("send-keys", "-t", "tui", "3", "/", "C-u")
        tmux("send-keys", "-t", "tui", "-l", "verifyacceptq")
        tmux("send-keys", "-t", "tui", "Enter")
        gate.touch()
        screen = tmux.wait_screen("tui", lambda s: "filter /verifyacceptq/" in s, 60)
        assert "acting on gpubox" not in screen
        tmux("send-keys", "-t", "tui", "q")
        tmux.wait_screen("tui", lambda s: "q Quit" not in s, 20)
    finally:
        tmux.kill()
