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
import re
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
    Row = list[Any]  # [pid, ppid, pgid, sid, uid, state, start_ticks, comm, argv]

_out_lock = threading.Lock()
_children: set[subprocess.Popen[bytes]] = set()
_last_request = [time.monotonic()]
# The client pings every few seconds.  After a silent network drop sshd may keep this session
# for hours (until its TCP keepalive fires); so with no request for this long, leave on our own.
IDLE_EXIT_S = float(os.environ.get("SPECDEBUG_HELPER_IDLE_S", "60"))


def _send(obj: dict[str, Any]) -> None:
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
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
    timed_out = False
    try:
        out, err = p.communicate(stdin, timeout=req.get("timeout"))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
    finally:
        _children.discard(p)
    return {
        "rc": None if timed_out else p.returncode,
        "out": _b64(out),
        "err": _b64(err),
        "timed_out": timed_out,
    }


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
    limit = int(req.get("max") or (1 << 20))
    return {"files": [_read_one(p, offset, limit) for p in req["paths"]]}


# --- process listing ------------------------------------------------------------------------
# A busy GPU box has thousands of processes; reading stat+cmdline+uid of each on every request
# grows with the box.  Facts that cannot change while a process lives (start time, uid, and the
# cmdline once the process has settled: titles are set right after start) are cached per PID and
# keyed by start time, so a reused PID is read afresh.  A filtered request ("match"/"pgid"/"root"/
# "pids") decides membership from the cache, validated by the /proc/PID inode number that the
# directory listing gives for free (a new process behind the same PID is a new inode), and then
# reads stat again only for what it returns.

SETTLE_S = 10.0  # younger processes may still change their title (setproctitle) or group
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read_bytes(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _uid_of(path: str) -> int:
    return os.stat(path).st_uid


class ProcCache:
    """Per-PID cache of the process table (root, listdir and read are injectable for tests).

    entries: pid -> [inode, start_ticks, row, settled, cmdline text, {regex: matched}]."""

    def __init__(
        self,
        root: str = "/proc",
        listdir: Callable[[], list[tuple[int, int]]] | None = None,
        read: Callable[[str], bytes] | None = None,
        owner: Callable[[str], int] | None = None,
    ) -> None:
        self.root = root
        self._listdir = listdir or self._scan
        self._read = read or _read_bytes
        self._owner = owner or _uid_of
        self.entries: dict[int, list[Any]] = {}
        self.reads = 0  # files read (for tests and the benchmark)
        self._lock = threading.Lock()

    def _scan(self) -> list[tuple[int, int]]:
        return [(int(e.name), e.inode()) for e in os.scandir(self.root) if e.name.isdigit()]

    def _uptime(self) -> float:
        try:
            return float(self._read(self.root + "/uptime").split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0

    def _load(self, pid: int, ino: int, uptime: float) -> Row | None:
        """Read stat (always) and cmdline/uid (unless cached for the same start time); None: gone."""
        base = f"{self.root}/{pid}"
        try:
            stat = self._read(base + "/stat").decode("utf-8", "replace")
        except OSError:
            self.entries.pop(pid, None)
            return None
        self.reads += 1
        lp, rp = stat.find("("), stat.rfind(")")
        fields = stat[rp + 2 :].split()
        start = int(fields[19])
        old = self.entries.get(pid)
        args: list[str]
        if old is not None and old[1] == start and old[3]:
            args, uid = old[2][8], old[2][4]
        else:
            try:
                cmdline = self._read(base + "/cmdline")
                uid = self._owner(base)
            except OSError:
                self.entries.pop(pid, None)
                return None
            self.reads += 1
            args = [a.decode("utf-8", "replace") for a in cmdline.split(b"\0")]
            while args and args[-1] == "":
                args.pop()
        row: Row = [
            pid,
            int(fields[1]),
            int(fields[2]),
            int(fields[3]),
            uid,
            fields[0],
            start,
            stat[lp + 1 : rp],
            args,
        ]
        settled = uptime - start / float(_CLK_TCK) >= SETTLE_S
        text = " ".join(a for a in args if a)
        self.entries[pid] = [ino, start, row, settled, text, {}]  # {}: regex -> matched (memo)
        return row

    def listing(
        self,
        match: str | None = None,
        pgid: int | None = None,
        root: int | None = None,
        pids: list[int] | None = None,
    ) -> list[Row]:
        """Rows of the whole table, or (any filter given) of the matching processes and their ancestors."""
        with self._lock:
            listed = self._listdir()
            uptime = self._uptime()
            if match is None and pgid is None and root is None and not pids:
                loaded = [self._load(pid, ino, uptime) for pid, ino in listed]
                self._forget(listed)
                return [r for r in loaded if r is not None]
            alive = dict(listed)
            table = {}
            for pid, ino in listed:
                e = self.entries.get(pid)
                # cached: same inode (same process), settled, and its parent still there (no reparenting)
                if e is not None and e[0] == ino and e[3] and (e[2][1] in alive or e[2][1] == 0):
                    table[pid] = e
                elif self._load(pid, ino, uptime) is not None:
                    table[pid] = self.entries[pid]
            self._forget(listed)
            chosen = _choose(table, match, pgid, root, pids)
            rows = []
            for pid in sorted(chosen):
                row = self._load(pid, alive[pid], uptime)  # fresh state/ppid for what is returned
                if row is not None:
                    rows.append(row)
            return rows

    def _forget(self, listed: list[tuple[int, int]]) -> None:
        if len(self.entries) > len(listed):
            alive = set(pid for pid, _ in listed)
            for pid in [p for p in self.entries if p not in alive]:
                del self.entries[pid]


def _choose(
    table: dict[int, list[Any]],
    match: str | None,
    pgid: int | None,
    root: int | None,
    pids: list[int] | None,
) -> set[int]:
    """PIDs matching any given filter, with every ancestor (the client finds launchers from them).

    table: pid -> cache entry [ino, start, row, settled, cmdline text, regex memo].
    """
    chosen: set[int] = set()
    if match is not None:
        rx = re.compile(match)
        for pid, e in table.items():
            hit = e[5].get(match)
            if hit is None:
                hit = e[5][match] = bool(e[4]) and rx.search(e[4]) is not None
            if hit:
                chosen.add(pid)
    if pgid is not None:
        chosen.update(pid for pid, e in table.items() if e[2][2] == pgid)
    if root is not None and root in table:
        children: dict[int, list[int]] = {}
        for pid, e in table.items():
            children.setdefault(e[2][1], []).append(pid)
        stack = [root]
        chosen.add(root)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in chosen:
                    chosen.add(child)
                    stack.append(child)
    chosen.update(pid for pid in (pids or ()) if pid in table)
    for pid in list(chosen):
        seen = 0
        cur = table[pid][2][1]
        while cur in table and cur not in chosen and seen < 4096:
            chosen.add(cur)
            cur = table[cur][2][1]
            seen += 1
    return chosen


_PROCS = ProcCache()


def _op_ps(req: Request) -> dict[str, Any]:
    return {
        "procs": _PROCS.listing(
            match=req.get("match"), pgid=req.get("pgid"), root=req.get("root"), pids=req.get("pids")
        )
    }


_OPS: dict[str, Op] = {"ping": _op_ping, "run": _op_run, "read": _op_read, "ps": _op_ps}
_BUILTIN = tuple(_OPS)  # the helper's own ops: not reachable through run_once


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
