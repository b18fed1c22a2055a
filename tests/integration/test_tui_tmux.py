"""The real TUI in tmux against the real sshd: read the screen as a user would."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
SOCKET = "specdebug-test-tui"


def tmux(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", SOCKET, "-f", "/dev/null", *args], capture_output=True, text=True)


def new_session(name: str, cmd: str, width: int = 150, height: int = 45) -> None:
    r = tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), cmd)
    assert r.returncode == 0, r.stderr
    tmux("resize-window", "-t", name, "-x", str(width), "-y", str(height))


def test_tui_shows_connected_host_with_hostname_and_gpus(sshd):
    hostname = open("/proc/sys/kernel/hostname").read().strip()
    cmd = f"env -u COLUMNS -u LINES {sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox; sleep 20"
    tmux("kill-server")
    new_session("tui", cmd, 150, 40)
    try:
        deadline = time.monotonic() + 30
        screen = ""
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "tui").stdout
            if "connected" in screen and hostname in screen and "NVIDIA H200" in screen:
                break
            time.sleep(0.3)
        assert "gpubox" in screen and "connected" in screen, screen
        assert hostname in screen and screen.count("NVIDIA H200") == 4, screen
        assert "sw_thermal_slowdown" in screen  # the throttled GPU is shown plainly
        tmux("send-keys", "-t", "tui", "q")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "NVIDIA" in tmux("capture-pane", "-p", "-t", "tui").stdout:
            time.sleep(0.2)
        assert "NVIDIA" not in tmux("capture-pane", "-p", "-t", "tui").stdout
    finally:
        tmux("kill-server")
