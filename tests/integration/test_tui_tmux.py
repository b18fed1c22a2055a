"""The real TUI in tmux against the real sshd: read the screen as a user would."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import struct
import sys
import termios
from pathlib import Path

import pytest

from tests.pair_harness import wait_for
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
        tmux.wait_screen("tui", lambda s: "NVIDIA" not in s, 60)
    finally:
        tmux.kill()


def _app_pid(tmux: Tmux, name: str) -> int:
    """The TUI's PID: the pane's process or its descendant running specdebug.cli (only our own pane's tree)."""
    pid = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").stdout.split()[0])
    todo = [pid]
    while todo:
        pid = todo.pop()
        if b"specdebug.cli" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):  # not `sh -c "..."`
            return pid
        todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    raise AssertionError("the TUI is not running in the pane")


def _tty_size(pid: int) -> tuple[int, int]:
    """The size the kernel holds for the app's terminal: what tmux has told it (TIOCGWINSZ)."""
    fd = os.open(os.readlink(f"/proc/{pid}/fd/0"), os.O_RDONLY | os.O_NOCTTY)
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)))
    finally:
        os.close(fd)
    return cols, rows


def test_a_resize_and_back_while_the_app_is_busy_repaints_the_whole_screen(sshd):
    """tmux cuts the rows below the cursor when a pane shrinks and adds blank ones when it grows back.
    An app too busy to run its SIGWINCH handler between the two (a loaded box, a zoom toggled twice)
    gets one signal and finds its old size: Textual drops a resize to the same size, so the footer and
    the bottom rows stayed blank until something else redrew them (a CI failure: 30 s without footer)."""
    tmux = Tmux("specdebug-test-tui-resize")
    tmux.kill()
    # `; sleep`: the app is the shell's child, not the pane's process, which tmux would SIGCONT at once
    tmux.new_session(
        "tui", f"{sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox; sleep 20", 150, 40
    )
    try:
        tmux.wait_screen("tui", lambda s: "connected" in s and "q Quit" in s, 30)
        # a pane that is not redrawn by itself (the Hosts pane's load and RTT redraw it every few seconds)
        tmux("send-keys", "-t", "tui", "6")
        tmux.wait_screen("tui", lambda s: "a Start (auto)" in s, 60)
        pid = _app_pid(tmux, "tui")
        os.kill(pid, signal.SIGSTOP)  # busy: the two SIGWINCHs coalesce into one
        try:
            tmux("resize-window", "-t", "tui", "-x", "120", "-y", "30")
            wait_for(lambda: _tty_size(pid) == (120, 30), 60, 0.05, "the shrunk size")
            assert "q Quit" not in tmux.screen("tui")  # the footer row is gone
            tmux("resize-window", "-t", "tui", "-x", "150", "-y", "40")
            wait_for(lambda: _tty_size(pid) == (150, 40), 60, 0.05, "the size back")
        finally:
            os.kill(pid, signal.SIGCONT)
        screen = tmux.wait_screen("tui", lambda s: "q Quit" in s, 60)
        assert "connected" in screen
    finally:
        tmux.kill()


def test_a_tui_that_gets_no_sighup_still_leaves_when_its_terminal_goes(sshd, tmp_path: Path):
    """A hangup reaches the terminal's session leader, and the foreground group only when that
    leader exits: a TUI whose shell ended first, or run under nohup, sees its terminal vanish with
    no signal.  It used to spin at 100% CPU (input thread reading EOF) or hang on a full output queue,
    for good; it now notices the dead terminal and leaves as `q` would, with a hangup's status."""
    tmux = Tmux("specdebug-test-tui-nohup")
    tmux.kill()
    rc = tmp_path / "rc"
    app = f"{sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox"
    tmux.new_session("tui", f"env --ignore-signal=HUP sh -c '{app}; echo $? > {rc}'", 150, 40)
    tmux.wait_screen("tui", lambda s: "connected" in s and "q Quit" in s, 30)
    tmux("send-keys", "-t", "tui", "3")  # a pane that keeps drawing: output is under way at the hangup
    assert tmux.kill(check=False) == [], "the TUI outlived its terminal (its group had to be killed)"
    assert rc.read_text().strip() == "129"  # 128 + SIGHUP, as a shell reports a hangup
