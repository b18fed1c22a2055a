"""Server process control ON THE BOX: prove a process group is the recorded server's, then signal it.

Ops of the resident helper (helper.py serves OPS below; without a helper, one `python3 -c` process
answers one request the same way).  Stdlib only, Python >= 3.7.  Why a box-side step: the identity
checks (leader PID + start time, owner, not this login's own session) and the `killpg` happen in one
process on the box, so nothing can change between what was checked and what is signalled beyond
the microseconds between reading /proc and the signal.  Server records on the box are untrusted
files: owner, mode and type are checked here.

Ops:  check   {pgid, start_ticks, pid, pid_start_ticks, launch_id, require_token} -> {state, reason, members}
      signal  the same + {sig: "TERM"|"KILL"}                       -> the same + {signalled}
      inspect {pid}            -> the identity to record when attaching (or state "refused")
      wait_exit {pid, start_ticks, timeout_s} -> {seen, gone, how}: returns when that process ends
                                  (a pidfd where the kernel has one, else /proc read every 20 ms)
      read_state {dir, name}   -> {state: "ok"|"missing"|"refused", path, data}
      write_state {dir, name, data}, forget_state {dir, name}
States of a group: running (proven to be the recorded one), gone, mismatch (the PGID was reused),
unproven (cannot be proven: never signalled), refused (never signalled, whatever the record says).
"""

from __future__ import annotations

import os
import re
import select
import signal
import stat
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: never evaluated by the box's python3
    from collections.abc import Callable, Collection

    Proc = dict[str, Any]  # pid, ppid, pgid, sid, state, start, comm, uid
    Table = dict[int, Proc]
    Request = dict[str, Any]

# the resident probe helper's boot line (specdebug.remote.boxcode): never signal its group
HELPER_MARK = "exec(zlib.decompress(base64.b64decode("
SSHD_COMMS = ("sshd", "sshd-session", "sshd-auth")
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
MAX_STATE = 1 << 20
LAUNCH_VAR = "SPECDEBUG_LAUNCH_ID"
SETTLE_S = 2.0  # how long a leaderless, unproven group is given to finish exiting (_judge_now)
WAIT_EXIT_MAX_S = 30.0  # one wait_exit request blocks a helper thread at most this long
WAIT_POLL_S = 0.02  # /proc re-read interval where there is no pidfd (Linux < 5.3, Python < 3.9)


def proc_stat(pid: int) -> Proc | None:
    """One process as /proc shows it (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    lp, rp = raw.find("("), raw.rfind(")")
    f = raw[rp + 2 :].split()
    return {
        "pid": pid,
        "ppid": int(f[1]),
        "pgid": int(f[2]),
        "sid": int(f[3]),
        "state": f[0],
        "start": int(f[19]),
        "comm": raw[lp + 1 : rp],
        "uid": uid,
    }


def proc_table() -> Table:
    table: Table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            p = proc_stat(int(name))
            if p is not None:
                table[p["pid"]] = p
    return table


def _read_nul(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in data.split(b"\0") if a]


def cmdline(pid: int) -> list[str]:
    return _read_nul(f"/proc/{pid}/cmdline")


def environ_entries(pid: int) -> list[str]:
    return _read_nul(f"/proc/{pid}/environ")


def environ_has(pid: int, entry: str) -> bool:
    return entry in environ_entries(pid)


def own_groups(table: Table) -> set[int]:
    """Process groups and sessions of this process and its ancestors: the login's sshd, its shell and
    the probe helper that started us.  None of them is ever a server's group."""
    groups: set[int] = set()
    pid, seen = os.getpid(), set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        p = table.get(pid) or proc_stat(pid)
        if p is None:
            break
        groups.update((pid, p["pgid"], p["sid"]))
        pid = p["ppid"]
    return groups


def refusal(
    pgid: int,
    members: list[Proc],
    own: Collection[int],
    uid: int,
    cmdlines: Callable[[int], list[str]] = cmdline,
) -> str | None:
    """Why a group must never be signalled whatever a record says (None: no such reason)."""
    if pgid <= 1:
        return f"process group {pgid} means every process (init or the whole box): refused"
    if pgid in own:
        return f"process group {pgid} is this login's own session (sshd, shell or the specdebug helper)"
    for p in members:
        if p["uid"] != uid:
            return f"process group {pgid} has a process of another user (PID {p['pid']}, uid {p['uid']})"
        if p["comm"] in SSHD_COMMS:
            return f"process group {pgid} holds sshd (PID {p['pid']})"
        if HELPER_MARK in " ".join(cmdlines(p["pid"])):
            return f"process group {pgid} holds a specdebug probe helper (PID {p['pid']})"
    return None


def judge(
    req: Request,
    table: Table,
    uid: int,
    own: Collection[int] = (),
    environ: Callable[[int, str], bool] = environ_has,
    cmdlines: Callable[[int], list[str]] = cmdline,
    environ_entries: Callable[[int], list[str]] = environ_entries,
) -> dict[str, Any]:
    """Is the group in `req` the one the record names?  Pure given the process table (unit-tested);
    `own` holds the groups of this login (own_groups)."""
    pgid = int(req["pgid"])
    everyone = [p for p in table.values() if p["pgid"] == pgid]  # zombies still prove identity
    members = [p for p in everyone if p["state"] != "Z"]
    out: dict[str, Any] = {
        "pgid": pgid,
        "members": sorted(p["pid"] for p in members),
        "state": "running",
        "reason": "",
    }
    why = refusal(pgid, members, own, uid, cmdlines)
    if why is not None:
        out.update(state="refused", reason=why)
        return out
    if not members:
        out.update(state="gone", reason=f"process group {pgid} is gone")
        return out
    leader = table.get(pgid)
    if leader is not None and leader["pgid"] == pgid:
        want = req.get("start_ticks")
        if want is None:
            out.update(state="unproven", reason=f"the record has no start time for leader PID {pgid}")
        elif leader["start"] != int(want):
            out.update(
                state="mismatch",
                reason=f"process group {pgid} was reused: its leader started at tick {leader['start']}, "
                f"the record says {int(want)}",
            )
        elif req.get("launch_id") and req.get("require_token"):
            # the launch put its id into the server's environment (kept readable by SPT_NOENV)
            entries = [e for e in environ_entries(pgid) if e.startswith(LAUNCH_VAR + "=")]
            if entries != [f"{LAUNCH_VAR}={req['launch_id']}"]:
                out.update(
                    state="unproven",
                    reason=f"the leader of process group {pgid} does not carry this launch's id "
                    f"({LAUNCH_VAR}): not the server the record names",
                )
        return out
    pid, pid_start = req.get("pid"), req.get("pid_start_ticks")
    p = table.get(int(pid)) if pid is not None else None
    if p is not None and p["pgid"] == pgid and pid_start is not None and p["start"] == int(pid_start):
        return out  # the recorded process itself is still in the group: a PGID is never reused while used
    token = req.get("launch_id")
    if token and any(environ(m["pid"], f"{LAUNCH_VAR}={token}") for m in members):
        return out  # a process carrying this launch's own id is still in the group
    out.update(
        state="unproven",
        reason=f"leader PID {pgid} is gone and nothing left in process group {pgid} proves it is this server "
        f"({len(members)} processes remain)",
    )
    return out


def _judge_now(req: Request) -> dict[str, Any]:
    """judge() on the table of now; a group whose leader is gone and whose other members cannot be
    proven is looked at again for up to SETTLE_S: a server killed as a whole (a lost node, kill -9)
    leaves members still exiting, whose /proc environ is already empty, and "cannot be proven" would
    be said of a group that is a moment from "gone" (seen under load in a deployment's status)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        table = proc_table()
        out = judge(req, table, os.getuid(), own_groups(table))
        leader = table.get(out["pgid"])
        leader_lives = leader is not None and leader["pgid"] == out["pgid"]
        if out["state"] != "unproven" or leader_lives or time.monotonic() >= deadline:
            return out
        time.sleep(0.1)


def op_check(req: Request) -> dict[str, Any]:
    return _judge_now(req)


def op_signal(req: Request) -> dict[str, Any]:
    out = _judge_now(req)
    out["signalled"] = False
    if out["state"] != "running":
        return out
    sig = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "INT": signal.SIGINT}[req["sig"]]
    try:
        os.killpg(out["pgid"], sig)
        out["signalled"] = True
    except ProcessLookupError:
        out.update(state="gone", reason=f"process group {out['pgid']} is gone")
    except PermissionError:
        out.update(state="refused", reason=f"not allowed to signal process group {out['pgid']}")
    return out


def _is_it(pid: int, start_ticks: int | None) -> bool:
    """PID is alive (not a zombie) and, when start_ticks is given, the process started then."""
    p = proc_stat(pid)
    return (
        p is not None and p["state"] not in ("Z", "X") and (start_ticks is None or p["start"] == start_ticks)
    )


def op_wait_exit(req: Request) -> dict[str, Any]:
    """Block until the process PID (started at start_ticks) ends, or timeout_s: the server's main
    process watched itself, so a kill -9 is known within milliseconds (a group listing every 0.5 s
    and two empty listings took 1-7 s).  seen: the process was there when asked (False: never
    found, or the PID is another process now; the caller then trusts its group listing, not this)."""
    pid = int(req["pid"])
    ticks = req.get("start_ticks")
    start_ticks = int(ticks) if ticks is not None else None
    timeout = max(0.0, min(float(req.get("timeout_s") or WAIT_EXIT_MAX_S), WAIT_EXIT_MAX_S))
    fd = -1
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            fd = pidfd_open(pid)
        except ProcessLookupError:
            return {"seen": False, "gone": True, "how": "pidfd"}
        except OSError:  # no pidfd in this kernel, or not allowed: read /proc instead
            fd = -1
    try:
        # checked after the pidfd is open: it pins that process, so a reused PID cannot pass
        if not _is_it(pid, start_ticks):
            return {"seen": False, "gone": True, "how": "pidfd" if fd >= 0 else "proc"}
        if fd >= 0:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            gone = bool(poller.poll(timeout * 1000))
            return {"seen": True, "gone": gone or not _is_it(pid, start_ticks), "how": "pidfd"}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            if not _is_it(pid, start_ticks):
                return {"seen": True, "gone": True, "how": "proc"}
        return {"seen": True, "gone": False, "how": "proc"}
    finally:
        if fd >= 0:
            os.close(fd)


def op_inspect(req: Request) -> dict[str, Any]:
    """What to record when attaching to PID: its own start time and its group leader's identity."""
    pid = int(req["pid"])
    table = proc_table()
    if pid <= 1:
        return {
            "state": "refused",
            "reason": f"PID {pid} is init (of the box or of its PID namespace): refused",
        }
    p = table.get(pid)
    if p is None or p["state"] == "Z":
        return {"state": "refused", "reason": f"no running process with PID {pid}"}
    pgid = p["pgid"]
    members = [m for m in table.values() if m["pgid"] == pgid and m["state"] != "Z"]
    why = refusal(pgid, members, own_groups(table), os.getuid())
    if why is not None:
        return {"state": "refused", "reason": f"PID {pid}: {why}"}
    leader = table.get(pgid)
    leader_start = leader["start"] if leader is not None and leader["pgid"] == pgid else None
    return {
        "state": "ok",
        "pid": pid,
        "pid_start_ticks": p["start"],
        "pgid": pgid,
        "start_ticks": leader_start,
        "cmdline": cmdline(pid),
    }


# -- server records: untrusted files --------------------------------------------------------------


def _state_dir(req: Request) -> str:
    d = os.path.expanduser(req.get("dir") or "~/.specdebug/servers")
    return d if os.path.isabs(d) else os.path.join(os.path.expanduser("~"), d)


def _bad_owner(st: os.stat_result, what: str) -> str | None:
    if st.st_uid != os.getuid():
        return f"{what} is owned by uid {st.st_uid}, not by this login (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _check_dir(d: str, create: bool) -> str | None:
    """None when the folder is ours and private; 'missing'; else the reason it is refused."""
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        if not create:
            return "missing"
        os.makedirs(d, 0o700, exist_ok=True)
        st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"state folder {d} is not a plain folder"
    return _bad_owner(st, f"state folder {d}")


def _path(req: Request) -> tuple[str, str]:
    name = req.get("name") or ""
    if not NAME_RE.match(name):
        raise ValueError(f"bad profile name {name!r}")
    d = _state_dir(req)
    return d, os.path.join(d, name + ".json")


def op_read_state(req: Request) -> dict[str, Any]:
    d, path = _path(req)
    why = _check_dir(d, False)
    if why == "missing":
        return {"state": "missing", "path": path}
    if why is not None:
        return {"state": "refused", "path": path, "reason": why}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return {"state": "missing", "path": path}
    except OSError as exc:
        return {"state": "refused", "path": path, "reason": f"cannot open {path}: {exc.strerror}"}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return {"state": "refused", "path": path, "reason": f"{path} is not a regular file"}
        why = _bad_owner(st, path)
        if why is None and st.st_size > MAX_STATE:
            why = f"{path} is too large for a server record ({st.st_size} bytes)"
        if why is not None:
            return {"state": "refused", "path": path, "reason": why}
        data = os.read(fd, MAX_STATE + 1)
    finally:
        os.close(fd)
    return {"state": "ok", "path": path, "data": data.decode("utf-8", "replace")}


def op_write_state(req: Request) -> dict[str, Any]:
    d, path = _path(req)
    why = _check_dir(d, True)
    if why is not None:
        return {"state": "refused", "path": path, "reason": why}
    if len(req["data"].encode("utf-8")) > MAX_STATE:  # what read_state would refuse is never written
        return {"state": "refused", "path": path, "reason": f"a server record over {MAX_STATE} bytes"}
    # unique per request: the resident helper answers requests in threads of one process (one PID)
    tmp = f"{path}.tmp.{os.getpid()}.{os.urandom(6).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            data = req["data"].encode("utf-8")
            if os.write(fd, data) != len(data):
                raise OSError(28, "short write (no space left on the device?)")
            os.fsync(fd)
        finally:
            os.close(fd)
        if req.get("check_only"):  # a launch proving the record can be written before it starts
            os.unlink(tmp)
        else:
            os.rename(tmp, path)  # a record is whole or absent, never torn
    except BaseException:
        try:
            os.unlink(tmp)  # a full disk leaves no partial file behind
        except OSError:
            pass
        raise
    return {"state": "ok", "path": path}


def op_forget_state(req: Request) -> dict[str, Any]:
    d, path = _path(req)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    return {"state": "ok", "path": path}


LIST_MAX = 64  # records listed at most (a launch's check of who else holds the GPUs)


def op_list_states(req: Request) -> dict[str, Any]:
    """Every server record of this login in the state folder, each checked as read_state checks one."""
    d = _state_dir(req)
    why = _check_dir(d, False)
    if why == "missing":
        return {"state": "ok", "records": []}
    if why is not None:
        return {"state": "refused", "reason": why}
    names = sorted(n[: -len(".json")] for n in os.listdir(d) if n.endswith(".json"))
    records = []
    for name in [n for n in names if NAME_RE.match(n)][:LIST_MAX]:
        got = op_read_state({"dir": req.get("dir"), "name": name})
        if got["state"] == "ok":
            records.append({"name": name, "data": got["data"]})
    return {"state": "ok", "records": records}


OPS: dict[str, Callable[[Request], dict[str, Any]]] = {
    "list_states": op_list_states,
    "check": op_check,
    "signal": op_signal,
    "inspect": op_inspect,
    "wait_exit": op_wait_exit,
    "read_state": op_read_state,
    "write_state": op_write_state,
    "forget_state": op_forget_state,
}
