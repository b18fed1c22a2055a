"""The CLI as a test runs it, without paying for its imports each time (issue 26: the suite's time).

Why: the suite runs `python -m specdebug.cli ...` about 500 times, and each run spent about 0.3
CPU-s importing asyncssh, pydantic, httpx and specdebug before doing anything, on a machine the
suite keeps CPU-bound.  `run` is `subprocess.run` for such a command: a fork server per test
process (started on first use, its own session, ended with that process) has imported them once;
each run is a fork of it that becomes the command: fds 0-2 are the caller's, all others closed,
its own session (as `start_new_session`), the caller's environment and cwd, `sys.argv` as `-m`
sets it, and `specdebug.cli` run as `__main__` by runpy, as `-m` does.  Exit status, signals and
output are the process's own: the caller gets a `CompletedProcess` or `TimeoutExpired` as from
`subprocess.run` (the child's process group is killed on the timeout).

What stays a real `python -m` process: any call this cannot serve the same way (a Popen, a tty,
`input=`, a pass-through stdout, a `python -X` or `-c` wrapper), the tests of import cost and the wheel, and
every run when `SPECDEBUG_TEST_CLI_FORK=0` (to check that a result does not depend on this).
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.leakcheck import TAG_VAR

CLI = "specdebug.cli"
ENABLED = os.environ.get("SPECDEBUG_TEST_CLI_FORK", "1") != "0"
_HEADER = struct.Struct("!I")
_KILL_DRAIN_S = 5.0  # after a timeout's kill: how long output still held by a grandchild is read

# the server's own environment (its children's /proc environ): as this process had it at import,
# before any test changed os.environ; each run gets the caller's environment of the moment
_SERVER_ENV = dict(os.environ)
_lock = threading.Lock()
_server: _Server | None = None
_unavailable = False


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, **kw)`, served by the fork server when `cmd` is `python -m specdebug.cli`
    with its output captured; any other call goes to `subprocess.run` unchanged."""
    if not _servable(cmd, kw):
        return subprocess.run(cmd, **kw)
    server = _get_server()
    if server is None:
        return subprocess.run(cmd, **kw)
    return server.run(cmd, **kw)


def close() -> None:
    """End this process's fork server (at the session's end, before the check for leftovers)."""
    global _server
    with _lock:
        if _server is not None:
            _server.close()
            _server = None


def _servable(cmd: list[str], kw: dict[str, Any]) -> bool:
    if not ENABLED or list(cmd[:3]) != [sys.executable, "-m", CLI]:
        return False
    known = {"capture_output", "text", "timeout", "env", "cwd", "check", "stdin", "stdout", "stderr"}
    if set(kw) - known:
        return False
    captured = kw.get("capture_output") or (
        kw.get("stdout") == subprocess.PIPE and kw.get("stderr") in (subprocess.PIPE, subprocess.STDOUT)
    )
    return bool(captured) and kw.get("stdin") in (None, subprocess.DEVNULL)


def _get_server() -> _Server | None:
    """This process's server, started on first use; None (and never tried again) where it cannot
    start, so every run is a real `python -m` there."""
    global _server, _unavailable
    with _lock:
        if not _unavailable and (_server is None or not _server.alive()):
            try:
                _server = _Server.start()
            except (OSError, RuntimeError):
                _server, _unavailable = None, True
        return _server


class _Server:
    """The client's end of one fork server."""

    def __init__(self, proc: subprocess.Popen, path: str, folder: str) -> None:
        self.proc, self.path, self.folder = proc, path, folder

    @classmethod
    def start(cls) -> _Server:
        folder = tempfile.mkdtemp(prefix="specdebug-clifork-")
        path = os.path.join(folder, "sock")
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(_SERVER_ENV)
        if TAG_VAR in os.environ:  # the run's tag (tests/leakcheck.py), set after this module's import
            env[TAG_VAR] = os.environ[TAG_VAR]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.clifork", path],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,  # its end of life: EOF here when this process is gone
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "ready" once the imports are done
        if line.strip() != b"ready":
            proc.kill()
            proc.wait()
            raise RuntimeError("the CLI fork server did not start")
        server = cls(proc, path, folder)
        atexit.register(server.close)
        return server

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def run(self, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
        timeout = kw.get("timeout")
        deadline = None if timeout is None else time.monotonic() + timeout
        merged = kw.get("stderr") == subprocess.STDOUT
        out_r, out_w = os.pipe()
        err_r, err_w = (out_r, out_w) if merged else os.pipe()
        in_r = os.open(os.devnull, os.O_RDONLY) if kw.get("stdin") == subprocess.DEVNULL else 0
        env = kw.get("env")
        request = {
            "args": list(cmd[3:]),
            "env": dict(os.environ if env is None else env),
            "cwd": os.fspath(kw.get("cwd") or os.getcwd()),
        }
        payload = json.dumps(request).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [_HEADER.pack(len(payload))], [in_r, out_w, err_w])
            conn.sendall(payload)
        finally:
            for fd in {out_w, err_w} | ({in_r} - {0}):
                os.close(fd)
        reply = conn.makefile("rb")
        pid = int(json.loads(reply.readline())["pid"])
        try:
            outputs, timed_out = _collect(pid, out_r, err_r, deadline)
            status = _status(reply, pid, timed_out)
        except BaseException:  # the test ended meanwhile (its timeout, ^C): so does the command
            _kill(pid)
            raise
        finally:
            conn.close()
        out, err = outputs[out_r], (b"" if merged else outputs[err_r])
        if kw.get("text"):
            out, err = _text(out), _text(err)
        if timed_out:
            raise subprocess.TimeoutExpired(cmd, timeout or 0, output=out, stderr=err)
        result = subprocess.CompletedProcess(cmd, os.waitstatus_to_exitcode(status), out, err)
        if kw.get("check"):
            result.check_returncode()
        return result


def _collect(pid: int, out_r: int, err_r: int, deadline: float | None) -> tuple[dict[int, bytes], bool]:
    """Read the child's output to EOF, as `communicate` does; on the deadline kill its process group
    and read what is left for a short while.  (output by fd, whether the deadline passed)"""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    sel = selectors.DefaultSelector()
    for fd in {out_r, err_r}:
        sel.register(fd, selectors.EVENT_READ)
    timed_out = False
    try:
        while sel.get_map():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if timed_out:
                    break  # a grandchild still holds the pipes: what came is kept
                timed_out = True
                _kill(pid)
                deadline = now + _KILL_DRAIN_S
            for key, _ in sel.select(None if deadline is None else max(0.0, deadline - now)):
                block = os.read(key.fd, 65536)
                if block:
                    chunks[key.fd].append(block)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        for fd in {out_r, err_r}:
            os.close(fd)
    return {fd: b"".join(parts) for fd, parts in chunks.items()}, timed_out


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # not yet its own group leader (just forked), or gone
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _status(reply: Any, pid: int, timed_out: bool) -> int:
    line = reply.readline()
    if not line:  # the server went away first: the child cannot be waited for here
        _kill(pid)
        return signal.SIGKILL if timed_out else 255 << 8
    return int(json.loads(line)["status"])


def _text(raw: bytes) -> str:
    """As `text=True` decodes: the locale's encoding (UTF-8 here), newlines translated."""
    return raw.decode().replace("\r\n", "\n").replace("\r", "\n")


# ---- the server ---------------------------------------------------------------------------------


def _preload() -> None:
    """What a CLI run imports, imported once: the verbs' modules (the TUI's are not) and the
    libraries they reach for lazily."""
    import importlib

    import specdebug.cli  # noqa: F401
    from specdebug.verbs.table import VERBS

    for module in sorted({verb.module for verb in VERBS}):
        importlib.import_module(f"specdebug.verbs.{module}")
    for name in ("asyncssh", "httpx", "pydantic", "specdebug.remote.factory", "specdebug.core.journal"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _serve(path: str) -> None:
    os.close(os.pidfd_open(os.getpid()))  # needs Linux 5.3: else no "ready", and the caller runs `python -m`
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(0, selectors.EVENT_READ, "parent")
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, its client)
    try:
        while True:
            for key, _ in sel.select():
                if key.data == "parent":
                    if not os.read(0, 4096):
                        return
                elif key.data == "accept":
                    conn, _ = listener.accept()
                    started = _start_child(conn)
                    if started is not None:
                        pid, pidfd = started
                        children[pidfd] = (pid, conn)
                        sel.register(pidfd, selectors.EVENT_READ, "child")
                    else:
                        conn.close()
                else:
                    pid, conn = children.pop(key.fd)
                    sel.unregister(key.fd)
                    os.close(key.fd)
                    _, status = os.waitpid(pid, 0)
                    try:
                        conn.sendall(json.dumps({"status": status}).encode() + b"\n")
                    except OSError:
                        pass
                    conn.close()
    finally:
        for pid, _ in children.values():
            _kill(pid)


def _start_child(conn: socket.socket) -> tuple[int, int] | None:
    try:
        head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
        (size,) = _HEADER.unpack(head)
        payload = b""
        while len(payload) < size:
            block = conn.recv(size - len(payload))
            if not block:
                raise OSError("short request")
            payload += block
        request = json.loads(payload)
    except (OSError, ValueError, struct.error):
        return None
    pid = os.fork()
    if pid == 0:
        _become_the_command(request, fds)  # never returns
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid, pidfd


def _become_the_command(request: dict[str, Any], fds: list[int]) -> None:
    code = 1
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 20)  # as `close_fds`: only 0-2 are the command's
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # found again from this environment's TMPDIR
        code = _run_cli(request["args"], request["cwd"])
    finally:
        os._exit(code)


def _run_cli(args: list[str], cwd: str) -> int:
    import atexit as child_atexit
    import runpy
    import traceback

    import specdebug.cli

    sys.argv = [specdebug.cli.__file__, *args]
    del sys.modules[CLI]  # run afresh as __main__, as `-m` runs it (its imports stay loaded)
    sys.path[0] = cwd
    code = 0
    try:
        runpy.run_module(CLI, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT  # the interpreter ends itself by SIGINT then (below)
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does at exit
    child_atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


if __name__ == "__main__":
    _serve(sys.argv[1])
