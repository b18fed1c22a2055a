"""Resident probe helper: runs ON THE BOX (python3 -c), speaks JSON lines on stdin/stdout.

Why: a new SSH exec channel costs ~160 ms against OpenSSH; a request on this open channel
costs well under a millisecond, and /proc is read here without forking.  Every response is a
single JSON object on one line with the request id, and all payload bytes are base64, so
command output can never be confused with framing.  Requests run in threads, so they overlap
and a hung one (killed at its timeout) never blocks the others.  Stdlib only, Python >= 3.7.

Requests:  {"id": N, "op": "ping"}
           {"id": N, "op": "run", "argv": [...], "stdin": b64|null, "env": {..}|null, "cwd": str|null,
            "timeout": float|null}
           {"id": N, "op": "read", "paths": [...], "offset": int, "max": int}
           {"id": N, "op": "ps", "match": regex|null, "pgid": int|null, "root": int|null, "pids": [..]|null}
                                                  (proclist.py, served as the helper's own op)
           {"id": N, "op": NAME, "args": {...}}   an op of a box module shipped with the helper
                                                  (procctl: check, signal, inspect, *_state; ports:
                                                  port_holder; health: health) -> {"result": {...}}
Responses: {"id": N, "ok": true, ...} or {"id": N, "ok": false, "error": "..."}

The client (specdebug.remote.boxcode) ships this file together with the op modules and calls
`serve(ops)`; where no helper can stay resident, `run_once(ops, name)` answers one request read
from stdin, so both paths run the same op code.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: never evaluated by the box's python3
    from collections.abc import Callable, Iterable

    Request = dict[str, Any]
    Op = Callable[[Request], dict[str, Any]]

_out_lock = threading.Lock()
_children: set[subprocess.Popen[bytes]] = set()
_last_request = [time.monotonic()]
# The client pings every few seconds.  After a silent network drop sshd may keep this session
# for hours (until its TCP keepalive fires); so with no request for this long, leave on our own.
IDLE_EXIT_S = float(os.environ.get("SPECDEBUG_HELPER_IDLE_S", "60"))
RUN_OUTPUT_MAX = 8 << 20  # bytes kept of each of a command's stdout and stderr
READ_TOTAL_MAX = 64 << 20  # bytes one read request answers in all (its files together)
# Every line the helper writes starts with FRAME: what a login script or a python3 wrapper prints
# on the same stdout (a banner, an echo in ~/.bashrc) is told apart and skipped by the client.
FRAME = "@@specdebug@@"


def _send(obj: dict[str, Any]) -> None:
    data = (FRAME + json.dumps(obj, separators=(",", ":")) + "\n").encode()
    with _out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _op_ping(req: Request) -> dict[str, Any]:
    return {"pid": os.getpid()}


def _op_run(req: Request) -> dict[str, Any]:
    env = None
    if req.get("env"):
        env = dict(os.environ)
        env.update(req["env"])
    cwd = req.get("cwd")
    if cwd:
        cwd = os.path.expanduser(cwd)
    stdin = base64.b64decode(req["stdin"]) if req.get("stdin") is not None else None
    argv: list[str] = req["argv"]
    try:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return {"rc": 127, "out": "", "err": _b64(f"{argv[0]}: {exc.strerror}\n".encode())}
    _children.add(p)
    try:
        return _collect(p, stdin, req.get("timeout"), int(req.get("max_out") or RUN_OUTPUT_MAX))
    finally:
        _children.discard(p)


def _drain(fd: int, cap: int, keep: list[bytes], over: threading.Event, changed: threading.Event) -> None:
    """Read a pipe to its end keeping at most `cap` bytes; past that, stop and say so (the command
    is then ended)."""
    kept = 0
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            if kept + len(chunk) > cap:
                keep.append(chunk[: cap - kept])
                over.set()
                return
            keep.append(chunk)
            kept += len(chunk)
    finally:
        changed.set()


def _collect(
    p: subprocess.Popen[bytes], stdin: bytes | None, timeout: float | None, cap: int
) -> dict[str, Any]:
    """Output of a started command, each stream bounded to `cap` bytes: a command that prints more
    (100 MB of nvidia-smi) is ended and its answer marked truncated, never held whole."""
    over, changed = threading.Event(), threading.Event()
    out: list[bytes] = []
    err: list[bytes] = []
    pipes = [
        threading.Thread(target=_drain, args=(f.fileno(), cap, keep, over, changed), daemon=True)
        for f, keep in ((p.stdout, out), (p.stderr, err))
        if f is not None
    ]
    threads = list(pipes)
    if stdin is not None and p.stdin is not None:
        threads.append(threading.Thread(target=_feed, args=(p.stdin, stdin), daemon=True))
    for t in threads:
        t.start()
    deadline = None if timeout is None else time.monotonic() + float(timeout)

    def left() -> float | None:
        return None if deadline is None else deadline - time.monotonic()

    timed_out = False
    while not over.is_set() and any(t.is_alive() for t in pipes):
        wait = left()
        if wait is not None and wait <= 0:
            timed_out = True
            break
        changed.wait(0.5 if wait is None else min(wait, 0.5))
        changed.clear()
    if not over.is_set() and not timed_out:
        try:
            p.wait(left())
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out or over.is_set() or p.poll() is None:  # the group, which may outlive its leader
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
    end = time.monotonic() + 5.0
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    return {
        "rc": None if timed_out or over.is_set() else p.returncode,
        "out": _b64(b"".join(out)),
        "err": _b64(b"".join(err)),
        "timed_out": timed_out,
        "truncated": over.is_set(),
    }


def _feed(pipe: Any, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except OSError:
        pass


_ERRNAMES = {2: "ENOENT", 3: "ESRCH", 13: "EACCES", 1: "EPERM", 21: "EISDIR", 20: "ENOTDIR"}
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _read_one(path: str, offset: int, limit: int) -> dict[str, Any]:
    # O_NONBLOCK + fstat: a FIFO must not block this thread forever, /dev/zero must not fill it
    try:
        fd = os.open(os.path.expanduser(path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return {"path": path, "error": _ERRNAMES.get(exc.errno or 0, f"E{exc.errno or 0}")}
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            return {"path": path, "error": f"ENOTREG: {path} is {kind}, not a regular file"}
        chunks = []
        left = limit
        pos = offset or 0
        while left > 0:
            chunk = os.pread(fd, min(left, 1 << 16), pos)  # /proc files report size 0: read until EOF
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
            pos += len(chunk)
        return {"path": path, "data": _b64(b"".join(chunks))}
    except OSError as exc:
        return {"path": path, "error": _ERRNAMES.get(exc.errno or 0, f"E{exc.errno or 0}")}
    finally:
        os.close(fd)


def _op_read(req: Request) -> dict[str, Any]:
    offset = int(req.get("offset") or 0)
    limit = min(int(req.get("max") or (1 << 20)), READ_TOTAL_MAX)
    files, left = [], READ_TOTAL_MAX  # the answer is one line: bounded whatever was asked
    for path in req["paths"]:
        if left <= 0:
            files.append({"path": path, "error": f"EFBIG: over {READ_TOTAL_MAX} bytes in one request"})
            continue
        f = _read_one(path, offset, min(limit, left))
        left -= len(f.get("data", "")) * 3 // 4
        files.append(f)
    return {"files": files}


_OPS: dict[str, Op] = {"ping": _op_ping, "run": _op_run, "read": _op_read}
_BUILTIN = set(_OPS)  # the helper's own ops: not reachable through run_once


def add_raw_ops(table: dict[str, Op]) -> None:
    """Ops of a shipped module that take the request whole, like run and read (proclist's ps)."""
    _OPS.update(table)
    _BUILTIN.update(table)


def _module_op(fn: Op) -> Op:
    """A box module's op: its arguments come under "args" and its answer goes back under "result",
    so no field of either can collide with the framing (id, op, ok, error)."""

    def call(req: Request) -> dict[str, Any]:
        return {"result": fn(req.get("args") or {})}

    return call


def add_ops(tables: Iterable[dict[str, Op]]) -> None:
    """Serve the ops of the box modules shipped with the helper (a name never replaces a built-in)."""
    for table in tables:
        for name, fn in table.items():
            if name not in _OPS:
                _OPS[name] = _module_op(fn)


def _handle(req: Request) -> None:
    rid = req.get("id")
    try:
        resp = _OPS[req["op"]](req)
        resp["id"] = rid
        resp["ok"] = True
    except Exception as exc:  # report, never die: one bad request must not kill the channel
        resp = {"id": rid, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    _send(resp)


def _kill_children() -> None:
    for p in list(_children):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def _idle_watch() -> None:
    while True:
        time.sleep(min(5.0, IDLE_EXIT_S))
        if time.monotonic() - _last_request[0] > IDLE_EXIT_S:
            _kill_children()
            os._exit(0)


def main() -> None:
    from concurrent.futures import ThreadPoolExecutor  # here: run_once never needs it

    pool = ThreadPoolExecutor(max_workers=32)
    threading.Thread(target=_idle_watch, daemon=True).start()
    hello = {"hello": "specdebug-helper", "pid": os.getpid(), "python": sys.version.split()[0]}
    _send({"id": 0, "ok": True, **hello})
    for raw in sys.stdin.buffer:
        _last_request[0] = time.monotonic()
        line = raw.strip()
        if not line:
            continue
        try:
            req = json.loads(line.decode("utf-8"))
        except ValueError:
            _send({"id": None, "ok": False, "error": "bad request line"})
            continue
        if req.get("op") == "ping":
            _handle(req)  # inline: the RTT figure should not include a thread hop
        else:
            pool.submit(_handle, req)
    _kill_children()  # channel closed: leave nothing running
    os._exit(0)


def serve(tables: Iterable[dict[str, Op]]) -> None:
    """The resident helper with the ops of the shipped box modules."""
    add_ops(tables)
    main()


def run_once(tables: Iterable[dict[str, Op]], name: str) -> None:
    """One op without a resident helper (`python3 -c BUNDLE NAME`, its args as JSON on stdin): the
    answer is one line shaped like the helper's, {"ok": true, "result": ...} or {"ok": false, ...}."""
    add_ops(tables)
    try:
        args = json.loads(sys.stdin.read() or "{}")
        if name not in _OPS or name in _BUILTIN:
            raise KeyError(name)
        resp = _OPS[name]({"args": args})
        resp["ok"] = True
    except Exception as exc:  # one clear line for the client, never a traceback
        resp = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    _send(resp)


if __name__ == "__main__":
    main()
