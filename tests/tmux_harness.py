"""Drive the real TUI in a private tmux server and read its screen as a user would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from tests.leakcheck import group_members, living_groups


class Tmux:
    """One tmux server on its own socket (-L), with no user config (-f /dev/null)."""

    def __init__(self, socket: str) -> None:
        self.socket = f"{socket}-{os.getpid()}"  # two test runs on one machine never share a server

    def socket_path(self) -> str:
        """Where tmux puts a -L socket (tmux(1): $TMUX_TMPDIR or /tmp, then tmux-UID)."""
        return os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}", self.socket)

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

    def kill(self, *, check: bool = True) -> list[int]:
        """Stop the server, then what ran in its panes: an app that ignores the SIGHUP of kill-server
        (seen under load: a demo left running for minutes) gets SIGTERM, then SIGKILL, by its group
        (tmux starts each pane in its own session: the pane's PID is its group's ID).  The whole
        group is waited for, not the pane's shell alone: the shell ends at once on SIGHUP while the
        app it ran may still be stopping its own server (a KILL then left that server running).

        An app must end by itself when its terminal goes away: a pane group that had to be ended so
        fails the test (unless it failed already, or `check` is off: the groups are returned)."""
        panes = [int(p) for p in self("list-panes", "-a", "-F", "#{pane_pid}").stdout.split()]
        self("kill-server")
        with contextlib.suppress(FileNotFoundError):  # tmux 3.3 leaves it: ~10 files in /tmp a run
            os.unlink(self.socket_path())
        forced: list[int] = []
        for sig, wait_s in ((signal.SIGTERM, HANGUP_GRACE_S), (signal.SIGKILL, 5.0)):
            deadline = time.monotonic() + wait_s
            while living_groups(panes) and time.monotonic() < deadline:
                time.sleep(0.1)
            for pgid in living_groups(panes):  # also what the pane's process left behind in its group
                if sig == signal.SIGTERM:
                    say_where(pgid)  # before it is ended: what kept it (a failure names its place)
                forced.append(pgid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, sig)
        if check and forced and sys.exc_info()[0] is None:  # a failed test keeps its own error
            raise AssertionError(f"what ran in the panes outlived its terminal (groups {forced} were killed)")
        return sorted(set(forced))


HANGUP_GRACE_S = 45.0  # the demo's own cleanup (stop its server, then kill its group) is bounded by ~20 s;
# the margin is for a loaded machine: waiting costs nothing when the panes end at once


def say_where(pgid: int) -> None:
    """On stderr: each process of a group that outlived its terminal, its state and (py-spy, where
    installed) its Python stacks."""
    import shutil

    spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    for proc in group_members(pgid):
        try:
            with open(f"/proc/{proc.pid}/stat") as stat:
                state = stat.read().rsplit(")", 1)[-1].split()[0]
        except OSError:
            state = "?"
        print(f"outlived its terminal: pid {proc.pid} state {state}: {proc.cmdline[:200]}", file=sys.stderr)
        if spy and "python" in proc.cmdline:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                got = subprocess.run(
                    [spy, "dump", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=20
                )
                print(got.stdout + got.stderr, file=sys.stderr)
