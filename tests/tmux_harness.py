"""Drive the real TUI in a private tmux server and read its screen as a user would."""

from __future__ import annotations

import os
import subprocess
import time


class Tmux:
    """One tmux server on its own socket (-L), with no user config (-f /dev/null)."""

    def __init__(self, socket: str) -> None:
        self.socket = f"{socket}-{os.getpid()}"  # two test runs on one machine never share a server

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True
        )

    def new_session(self, name: str, cmd: str, width: int = 150, height: int = 45) -> None:
        """Start `cmd` in a fixed-size window; COLUMNS/LINES from pytest must not shrink the app."""
        r = self(
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            str(width),
            "-y",
            str(height),
            f"env -u COLUMNS -u LINES {cmd}",
        )
        assert r.returncode == 0, r.stderr
        self("resize-window", "-t", name, "-x", str(width), "-y", str(height))

    def screen(self, name: str) -> str:
        return self("capture-pane", "-p", "-t", name).stdout

    def wait_screen(self, name: str, predicate, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(name)
            if predicate(screen):
                return screen
            time.sleep(0.3)
        raise AssertionError(f"screen never matched; last screen:\n{screen}")

    def kill(self) -> None:
        self("kill-server")
