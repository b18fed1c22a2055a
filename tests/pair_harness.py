"""Real Unix users and real terminals for the pairing tests.

Users are created by the test (`sdpair_<random>`), removed after; each seat is a tmux client
running as its user in its own pty (drained by a thread, or tmux would block writing to it).
Everything started here is killed by its own process group; nothing is looked up by name.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests import clifork


def can_make_users() -> str | None:
    """None when this run may create users; else why not (the skip reason)."""
    if os.geteuid() != 0:
        return "pairing tests create Unix users: run as root (CI does)"
    for tool in ("useradd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} not found: pairing tests need real users"
    if shutil.which("tmux") is None:
        return "tmux not installed"
    return None


def _users_db(argv: list[str]) -> subprocess.CompletedProcess:
    """useradd/userdel, retried while another test (a parallel worker) holds /etc/passwd's lock (exit 10)."""
    deadline = time.monotonic() + 60
    while True:
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 10 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


@contextlib.contextmanager
def unix_users(n: int) -> Iterator[list[str]]:
    tag = secrets.token_hex(3)
    names = [f"sdpair_{tag}{i}" for i in range(n)]
    made = []
    try:
        for name in names:
            _users_db(["useradd", "-M", "-N", "-s", "/bin/sh", name]).check_returncode()
            made.append(name)
        yield names
    finally:
        for name in made:
            _users_db(["userdel", name])


@contextlib.contextmanager
def shared_root() -> Iterator[Path]:
    """A folder every test user can pass through (0711) to reach the pairing folders in it."""
    root = Path(tempfile.mkdtemp(prefix="sdpair-root-", dir="/tmp"))
    os.chmod(root, 0o711)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Terminal:
    """A process in its own pty of a given size, as `user` (runuser) or as us."""

    def __init__(
        self, argv: list[str], *, user: str | None = None, size=(120, 40), env: dict | None = None
    ) -> None:
        self.master, slave = os.openpty()
        cols, rows = size
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        base = os.environ if env is None else env
        env = {k: v for k, v in base.items() if k not in ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, close_fds=True
        )
        os.close(slave)
        self.output = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output.extend(data)

    def type(self, keys: str | bytes) -> None:
        os.write(self.master, keys.encode() if isinstance(keys, str) else keys)

    def text(self) -> str:
        return bytes(self.output).decode("utf-8", "replace")

    def wait_exit(self, timeout: float) -> int | None:
        """The exit status, once the process ended AND its last output was read (the reader thread
        may still be behind when the process is gone, on a loaded machine)."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(5)  # ends at EOF/EIO: every writer of the pty has closed it
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        with contextlib.suppress(OSError):
            os.close(self.master)


def tmux(sock: str, *args: str, user: str | None = None) -> subprocess.CompletedProcess:
    argv = ["tmux", "-S", sock, *args]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20)


def pair_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`specdebug pair ARGS` with the pair registry in `root`, outside any tmux the suite runs in."""
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")}
    env["SPECDEBUG_PAIR_DIR"] = str(root)
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", "pair", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not reached in {timeout} s (last: {last!r})")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rfind(")") + 2 :].split()[0]
