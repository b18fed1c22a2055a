"""The real TUI in tmux against the real sshd: read the screen as a user would."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.tmux_harness import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def test_tui_shows_connected_host_with_hostname_and_gpus(sshd):
    hostname = open("/proc/sys/kernel/hostname").read().strip()
    tmux = Tmux("specdebug-test-tui")
    tmux.kill()
    tmux.new_session(
        "tui", f"{sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox; sleep 20", 150, 40
    )
    try:
        screen = tmux.wait_screen(
            "tui", lambda s: "connected" in s and hostname in s and s.count("NVIDIA H200") == 4, 30
        )
        assert "gpubox" in screen
        assert "sw_thermal_slowdown" in screen  # the throttled GPU is shown plainly
        tmux("send-keys", "-t", "tui", "q")
        tmux.wait_screen("tui", lambda s: "NVIDIA" not in s, 10)
    finally:
        tmux.kill()
