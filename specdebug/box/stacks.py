"""Python stacks of a server's workers, taken ON THE BOX with py-spy as the box user.

Why py-spy: it reads a running interpreter's frames from outside (ptrace), with no change to the
server and no import into it.  All workers are sampled at once (one py-spy per PID, in parallel),
so a dump of 8 ranks shows one moment, and a record of S seconds covers the same S seconds on each.
Run as a script: `python3 -c SOURCE ARGS_JSON` (remote.boxcode.python_argv); one JSON line out.
Stdlib only, Python >= 3.7.

Args JSON: {"pids": [..], "mode": "dump" | "record", "duration": s, "rate": hz, "py_spy": path}
Out: {"py_spy": path | null, "hint": how to get it, "pids": {pid: {"threads": [...]} | {"error"}}}
for a dump; for a record each pid has {"total", "functions": {label: samples}, "self": {...}}
counted over the samples of its main thread (idle samples included: a rank waiting is the point).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

MAX_THREADS = 32
MAX_FRAMES = 80
MAX_FUNCS = 300
MAX_ERR = 300
HINT = (
    "py-spy is not installed on the box: `python3 -m pip install --user py-spy` (a binary wheel, "
    "no compiler needed) or give its path with --py-spy; it needs ptrace rights over the server "
    "(the same user, and kernel.yama.ptrace_scope 0 or root)"
)


def find_py_spy(given: str) -> str | None:
    if given:
        return given if os.access(given, os.X_OK) else None
    for path in (
        shutil.which("py-spy"),
        os.path.join(os.path.dirname(sys.executable), "py-spy"),
        os.path.expanduser("~/.local/bin/py-spy"),
    ):
        if path and os.access(path, os.X_OK):
            return path
    return None


def _frame(f: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": str(f.get("name"))[:200],
        "file": str(f.get("short_filename") or f.get("filename"))[:200],
        "line": f.get("line"),
    }


def _threads(text: str, pid: int) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        return {"error": text.strip()[-MAX_ERR:] or "no output"}
    threads = []
    for t in data[:MAX_THREADS] if isinstance(data, list) else []:
        frames = [_frame(f) for f in (t.get("frames") or [])[:MAX_FRAMES] if isinstance(f, dict)]
        threads.append(
            {
                "thread_id": t.get("os_thread_id") or t.get("thread_id"),
                "name": t.get("thread_name"),
                "main": t.get("os_thread_id") == pid,
                "active": bool(t.get("active")),
                "frames": frames,
            }
        )
    return {"threads": threads}


def _label(raw: str) -> tuple[str, str]:
    """'name (file:line)' -> (name, file); py-spy's raw format, line numbers off."""
    raw = raw.strip()
    if raw.endswith(")") and " (" in raw:
        name, _, rest = raw.rpartition(" (")
        return name, rest[:-1].rsplit(":", 1)[0]
    return raw, ""


def record_counts(path: str, pid: int) -> dict[str, Any]:
    """Inclusive and self samples per function over the main thread's stacks (py-spy raw with -t:
    `thread (TID): NAME;root frame;...;leaf frame COUNT`)."""
    funcs: dict[str, int] = {}
    selfs: dict[str, int] = {}
    total = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = stack.split(";")
            head = frames[0]
            if head.startswith("thread ("):
                tid = head[len("thread (") :].split(")", 1)[0]
                if tid != str(pid) and "MainThread" not in head:
                    continue  # another thread (a watcher, a pool): not where the rank spends its time
                frames = frames[1:]
            labels = ["{} ({})".format(*_label(x)) for x in frames if x]
            if not labels:
                continue
            n = int(count)
            total += n
            for lab in set(labels):
                funcs[lab] = funcs.get(lab, 0) + n
            selfs[labels[-1]] = selfs.get(labels[-1], 0) + n
    top = dict(sorted(funcs.items(), key=lambda kv: -kv[1])[:MAX_FUNCS])
    return {"total": total, "functions": top, "self": dict(sorted(selfs.items(), key=lambda kv: -kv[1])[:50])}


def run(req: dict[str, Any]) -> dict[str, Any]:
    spy = find_py_spy(str(req.get("py_spy") or ""))
    pids = [int(p) for p in req.get("pids") or []]
    out: dict[str, Any] = {"py_spy": spy, "pids": {}}
    if spy is None:
        out["hint"] = HINT
        return out
    mode = req.get("mode") or "dump"
    duration = max(1, int(req.get("duration") or 1))
    rate = int(req.get("rate") or 97)
    tmp = tempfile.mkdtemp(prefix="specdebug-stacks-")
    procs = {}
    try:
        for pid in pids:
            if mode == "record":
                path = os.path.join(tmp, f"{pid}.txt")
                argv = [spy, "record", "--pid", str(pid), "--duration", str(duration), "--rate", str(rate)]
                argv += ["--format", "raw", "--nolineno", "--idle", "--threads", "--nonblocking", "-o", path]
            else:
                argv = [spy, "dump", "--json", "--pid", str(pid)]
            procs[pid] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        limit = duration + 30 if mode == "record" else 30
        for pid, p in procs.items():
            try:
                so, se = p.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                out["pids"][str(pid)] = {"error": "py-spy timed out"}
                continue
            text = so.decode("utf-8", "replace")
            if p.returncode != 0:
                why = (se.decode("utf-8", "replace") or text).strip().splitlines()
                out["pids"][str(pid)] = {"error": (why[0] if why else f"exit {p.returncode}")[:MAX_ERR]}
            elif mode == "record":
                out["pids"][str(pid)] = record_counts(os.path.join(tmp, f"{pid}.txt"), pid)
            else:
                out["pids"][str(pid)] = _threads(text, pid)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    req = json.loads(argv[1]) if len(argv) > 1 else {}
    sys.stdout.write(json.dumps(run(req if isinstance(req, dict) else {})) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
