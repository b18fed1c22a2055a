"""What specdebug remembers about a server it launched, and what the box says about it now.

A launched server is identified by its process group (PGID == PID of the setsid'd launcher) plus
the launcher's start time in clock ticks, so a recycled PID is never mistaken for our server.
The record lives on the box (`~/.specdebug/servers/<profile>.json`) so that `stop`/`status` work
from another laptop, after specdebug quit, or after the connection dropped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from pydantic import BaseModel, Field

from specdebug.core.capability import require_write
from specdebug.core.secrets import mask_argv
from specdebug.remote.api import ProcInfo, Remote, RemoteError

STATE_DIR = ".specdebug/servers"  # under $HOME on the box


class ServerRecord(BaseModel):
    """One server launched (or attached) by specdebug."""

    profile: str
    host: str = ""
    fingerprint: str = ""
    pid: int
    pgid: int
    start_ticks: int | None = None  # /proc/PID/stat starttime of the leader: guards against PID reuse
    port: int
    log_file: str  # absolute path on the box (~ expanded)
    log_offset: int = 0  # log size before launch: this run's lines start here
    started_at: float = Field(default_factory=time.time)  # local clock, unix seconds
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)  # masked
    cwd: str | None = None
    attached: bool = False  # found running, not launched by us
    stopped_at: float | None = None


class PortHolder(BaseModel):
    """Who listens on a TCP port on the box (pids empty when not visible, e.g. another user's)."""

    port: int
    listening: bool
    pids: list[int] = Field(default_factory=list)
    cmdline: list[str] = Field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.pids[0] if self.pids else None

    def describe(self) -> str:
        if not self.listening:
            return f"port {self.port} is free"
        if not self.pids:
            return f"port {self.port} is in use (holder not visible: another user's process?)"
        who = " ".join(self.cmdline)[:120] or "?"
        return f"port {self.port} is in use by PID {self.pid} ({who})"


def state_path_words(profile_name: str) -> list[str]:
    """sh positional words for the state file; $HOME is expanded by the box's shell, never by us."""
    return [f"{STATE_DIR}/{profile_name}.json"]


_WRITE_STATE = 'mkdir -p "$HOME/$(dirname "$1")" && cat > "$HOME/$1.tmp" && mv -f "$HOME/$1.tmp" "$HOME/$1"'
_READ_STATE = 'if [ -f "$HOME/$1" ]; then cat "$HOME/$1"; else exit 3; fi'


async def save_record(remote: Remote, record: ServerRecord) -> None:
    require_write("write the server record", remote)
    data = record.model_dump_json(indent=1).encode()
    res = await remote.run(
        ["sh", "-c", _WRITE_STATE, "sh", *state_path_words(record.profile)], input=data, timeout=15
    )
    if not res.ok:
        raise RemoteError(f"cannot write the server state file: {res.err.strip() or res.exit_status}")


async def file_size(remote: Remote, path: str) -> int | None:
    """Size of a file on the box (None when it cannot be read): a log's offset before a run."""
    if not path:
        return None
    try:
        res = await remote.run(["wc", "-c", "--", path], timeout=15)
        return int(res.out.split()[0]) if res.ok else None
    except (RemoteError, ValueError, IndexError):
        return None


async def load_record(remote: Remote, profile_name: str) -> ServerRecord | None:
    """The state file of a profile's server, or None when specdebug never launched it on this box."""
    res = await remote.run(["sh", "-c", _READ_STATE, "sh", *state_path_words(profile_name)], timeout=15)
    if res.exit_status == 3:
        return None
    if not res.ok:
        raise RemoteError(f"cannot read the server state file: {res.err.strip() or res.exit_status}")
    try:
        return ServerRecord.model_validate_json(res.stdout)
    except ValueError:
        return None


async def forget_record(remote: Remote, profile_name: str) -> None:
    """Remove the profile's state file (benchmarks and tests clean up after themselves)."""
    require_write("remove the server record", remote)
    await remote.run(["sh", "-c", 'rm -f -- "$HOME/$1"', "sh", *state_path_words(profile_name)], timeout=15)


def group_members(procs: Sequence[ProcInfo], record: ServerRecord) -> list[ProcInfo]:
    """Processes of the record's group; empty when the group is gone or the PGID was reused.

    A PGID cannot be reused while any member lives, so members are ours unless the leader PID now
    belongs to a process started at another time (then the whole group is someone else's).
    """
    members = [p for p in procs if p.pgid == record.pgid]
    leader = next((p for p in members if p.pid == record.pgid), None)
    if leader and record.start_ticks is not None and leader.start_ticks != record.start_ticks:
        return []
    # zombies are dead: they wait for init to reap them, which can take a moment
    return [p for p in members if p.state != "Z"]


# Finds the PIDs whose open sockets LISTEN on the port: /proc/net/tcp{,6} gives the socket inode,
# /proc/*/fd links name it.  Runs on the box with python3 (one round trip through the probe).
PORT_HOLDER_SCRIPT = r"""
import json, os, sys
port = int(sys.argv[1]); inodes = set()
for name in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        with open(name) as fh:
            next(fh)
            for line in fh:
                f = line.split()
                if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add("socket:[%s]" % f[9])
    except (OSError, StopIteration):
        pass
pids = []
if inodes:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) in inodes:
                    pids.append(int(pid))
                    break
            except OSError:
                pass
pids.sort()
cmd = []
if pids:
    try:
        with open("/proc/%d/cmdline" % pids[0], "rb") as fh:
            cmd = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        pass
print(json.dumps({"listening": bool(inodes), "pids": pids, "cmdline": cmd}))
"""


async def find_port_holder(remote: Remote, port: int) -> PortHolder:
    res = await remote.run(["python3", "-c", PORT_HOLDER_SCRIPT, str(port)], timeout=30)
    if not res.ok:
        raise RemoteError(f"cannot check port {port} on the box: {res.err.strip() or res.exit_status}")
    data = json.loads(res.stdout)
    data["cmdline"] = mask_argv(data.get("cmdline") or [])  # an --api-key of whoever holds the port
    return PortHolder(port=port, **data)


HEALTH_SCRIPT = r"""
import sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(sys.argv[1], timeout=float(sys.argv[2])) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print(0)
"""


async def health_on_box(remote: Remote, port: int, path: str, timeout: float = 2.0) -> int | None:
    """HTTP status of GET http://127.0.0.1:port/path, asked from the box itself (None: no answer)."""
    url = f"http://127.0.0.1:{port}{path}"
    res = await remote.run(["python3", "-c", HEALTH_SCRIPT, url, str(timeout)], timeout=timeout + 10)
    try:
        code = int(res.out.strip() or 0)
    except ValueError:
        return None
    return code or None
