"""Resident probe helper: runs ON THE BOX (python3 -c), speaks JSON lines on stdin/stdout.

Why: a new SSH exec channel costs ~160 ms against OpenSSH; a request on this open channel
costs well under a millisecond, and /proc is read here without forking.  Every response is a
single JSON object on one line with the request id, and all payload bytes are base64, so
command output can never be confused with framing.  Requests run in threads, so they overlap
and a hung one (killed at its timeout) never blocks the others.  Stdlib only, Python >= 3.6.

Requests:  {"id": N, "op": "ping"}
           {"id": N, "op": "run", "argv": [...], "stdin": b64|null, "env": {..}|null, "cwd": str|null,
            "timeout": float|null}
           {"id": N, "op": "read", "paths": [...], "offset": int, "max": int}
           {"id": N, "op": "ps"}
Responses: {"id": N, "ok": true, ...} or {"id": N, "ok": false, "error": "..."}
"""

import base64
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

_out_lock = threading.Lock()
_children = set()  # type: set[subprocess.Popen[bytes]]
_last_request = [time.monotonic()]
# The client pings every few seconds.  After a silent network drop sshd may keep this session
# for hours (until its TCP keepalive fires); so with no request for this long, leave on our own.
IDLE_EXIT_S = float(os.environ.get("SPECDEBUG_HELPER_IDLE_S", "60"))


def _send(obj):
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    with _out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def _op_ping(req):
    return {"pid": os.getpid()}


def _op_run(req):
    env = None
    if req.get("env"):
        env = dict(os.environ)
        env.update(req["env"])
    cwd = req.get("cwd")
    if cwd:
        cwd = os.path.expanduser(cwd)
    stdin = base64.b64decode(req["stdin"]) if req.get("stdin") is not None else None
    try:
        p = subprocess.Popen(
            req["argv"],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return {"rc": 127, "out": "", "err": _b64(("{}: {}\n".format(req["argv"][0], exc.strerror)).encode())}
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


def _read_one(path, offset, limit):
    # O_NONBLOCK + fstat: a FIFO must not block this thread forever, /dev/zero must not fill it
    try:
        fd = os.open(os.path.expanduser(path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return {"path": path, "error": _ERRNAMES.get(exc.errno, f"E{exc.errno or 0}")}
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
        return {"path": path, "error": _ERRNAMES.get(exc.errno, f"E{exc.errno or 0}")}
    finally:
        os.close(fd)


def _op_read(req):
    offset = int(req.get("offset") or 0)
    limit = int(req.get("max") or (1 << 20))
    return {"files": [_read_one(p, offset, limit) for p in req["paths"]]}


def _op_ps(req):
    procs = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            uid = os.stat(f"/proc/{name}").st_uid
        except OSError:
            continue
        lp, rp = stat.find("("), stat.rfind(")")
        fields = stat[rp + 2 :].split()
        args = [a.decode("utf-8", "replace") for a in cmdline.split(b"\0")]
        while args and args[-1] == "":
            args.pop()
        procs.append(
            [
                int(name),
                int(fields[1]),
                int(fields[2]),
                int(fields[3]),
                uid,
                fields[0],
                int(fields[19]),
                stat[lp + 1 : rp],
                args,
            ]
        )
    return {"procs": procs}


_OPS = {"ping": _op_ping, "run": _op_run, "read": _op_read, "ps": _op_ps}


def _handle(req):
    rid = req.get("id")
    try:
        resp = _OPS[req["op"]](req)
        resp["id"] = rid
        resp["ok"] = True
    except Exception as exc:  # report, never die: one bad request must not kill the channel
        resp = {"id": rid, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    _send(resp)


def _kill_children():
    for p in list(_children):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def _idle_watch():
    while True:
        time.sleep(min(5.0, IDLE_EXIT_S))
        if time.monotonic() - _last_request[0] > IDLE_EXIT_S:
            _kill_children()
            os._exit(0)


def main():
    pool = ThreadPoolExecutor(max_workers=32)
    threading.Thread(target=_idle_watch, daemon=True).start()
    _send(
        {
            "id": 0,
            "ok": True,
            "hello": "specdebug-helper",
            "pid": os.getpid(),
            "python": sys.version.split()[0],
        }
    )
    for line in sys.stdin.buffer:
        _last_request[0] = time.monotonic()
        line = line.strip()
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


if __name__ == "__main__":
    main()
