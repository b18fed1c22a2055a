"""What specdebug remembers about a server it launched, and what the box says about it now.

A launched server is identified by its process group (PGID == PID of the setsid'd server, as the
server side of the launch reported it) plus that leader's start time in clock ticks, so a recycled
PID is never mistaken for our server.  The record lives on the box, in a state folder (default
`~/.specdebug/servers/<profile>.json`, resolved on the box; a Remote's `state_dir` chooses another)
so that `stop`/`status` work from another laptop, after specdebug quit, or after a drop.  Records
are untrusted input when read back: owner, mode, type and schema are checked before use.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import socket
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from specdebug.acting import acting
from specdebug.capability import require_write
from specdebug.core.fingerprint import server_host, url_host
from specdebug.core.model import Model
from specdebug.core.secrets import mask_argv
from specdebug.core.source import ServerSource
from specdebug.remote.api import (
    ConnectionDropped,
    NotConnected,
    ProcInfo,
    Remote,
    RemoteError,
    RequestTimeout,
)

DEFAULT_STATE_DIR = "~/.specdebug/servers"  # on the box; `~` is the box user's home, never ours


MAX_RECORD_BYTES = 1 << 20  # box/procctl.py's MAX_STATE: what read_state (stop, status) accepts


class ActorMark(Model):
    """Who acted on a server (stopped or launched it): the specdebug run, its user, host and PID, and when.

    Written by that run into the record on the box, so any other session (another terminal, a
    TUI watching the server) tells "stopped by another specdebug session" from "died"."""

    what: str = Field(default="specdebug", max_length=200)
    user: str = Field(default="", max_length=200)
    host: str = Field(default="", max_length=200)
    pid: int = 0
    at: float = 0.0

    @classmethod
    def now(cls, clock: Any = time.time) -> ActorMark:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = str(os.getuid())
        return cls(what=acting(), user=user, host=socket.gethostname(), pid=os.getpid(), at=clock())

    def is_this_process(self) -> bool:
        return self.pid == os.getpid() and self.host == socket.gethostname()

    def describe(self) -> str:
        """`specdebug bisect, alice@laptop PID 4242, at 10:02:03 UTC` (the fields are made visible)."""
        from specdebug.core.sanitize import visible

        when = time.strftime(" at %H:%M:%S UTC", time.gmtime(self.at)) if 0 < self.at < 1e11 else ""
        who = f"{visible(self.user)[:64]}@{visible(self.host)[:64]}" if self.user or self.host else "?"
        return f"{visible(self.what)[:64]}, {who} PID {self.pid}{when}"


class FailedLaunch(Model):
    """The startup verdict of the deployment this server is a node of said failed: `status` keeps it
    failed while the groups still run (a hung leader and a waiting worker both look alive)."""

    reason: str
    node: str | None = None  # the node the verdict names
    at: float = 0.0


class ServerRecord(Model):
    """One server launched (or attached) by specdebug."""

    profile: str = Field(pattern=r"^[A-Za-z0-9._-]{1,200}$")
    host: str = ""
    fingerprint: str = ""
    pid: int = Field(gt=1)  # the server process (the group leader when launched by specdebug)
    pgid: int = Field(gt=1)
    start_ticks: int | None = Field(default=None, ge=0)  # /proc starttime of the group leader (PID == PGID)
    pid_start_ticks: int | None = Field(default=None, ge=0)  # starttime of `pid` (attach: the listener)
    launch_id: str | None = None  # SPECDEBUG_LAUNCH_ID in the server's environment (launched only)
    port: int = Field(ge=0, le=65535)
    log_file: str  # absolute path on the box (~ expanded)
    log_offset: int = Field(default=0, ge=0)  # log size before launch: this run's lines start here
    started_at: float = Field(default_factory=time.time)  # local clock, unix seconds
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)  # masked
    cwd: str | None = None
    source: ServerSource | None = None  # the commit its cwd held at launch, read on the box
    attached: bool = False  # found running, not launched by us
    step: str | None = Field(default=None, pattern=r"^[0-9]+\.[0-9]+$")  # the Slurm job step holding it
    stopped_at: float | None = None
    # who launched it, and who stopped it: the stop mark is written before the first signal, so a
    # watcher that sees the group go already finds it (stopped_at only once the group is gone)
    launched_by: ActorMark | None = None
    stopped_by: ActorMark | None = None
    failed_launch: FailedLaunch | None = None

    @property
    def listen_host(self) -> str:
        """Where on the box the server answers: its recorded argv's --host (core.fingerprint.server_host)."""
        return server_host(self.argv)

    @model_validator(mode="after")
    def _consistent(self) -> ServerRecord:
        # a launched server leads its own group: an edit of one of the two numbers is caught here
        if not self.attached and self.pid != self.pgid:
            raise ValueError(
                f"a launched server leads its own group, but pid is {self.pid} and pgid {self.pgid}"
            )
        if not self.attached and None not in (self.start_ticks, self.pid_start_ticks):
            if self.start_ticks != self.pid_start_ticks:
                raise ValueError("a launched server's start_ticks and pid_start_ticks differ")
        return self

    def same_run(self, other: ServerRecord) -> bool:
        """The other record names this very run (a stop mark added to it changes nothing here)."""
        return (self.pgid, self.pid, self.start_ticks, self.launch_id, self.started_at) == (
            other.pgid,
            other.pid,
            other.start_ticks,
            other.launch_id,
            other.started_at,
        )

    def stopped_elsewhere(self) -> str | None:
        """`stopped by another specdebug session (…)` when a stop mark says so, else None."""
        if self.stopped_by is None:
            return None
        whose = "this" if self.stopped_by.is_this_process() else "another"  # this: e.g. the TUI's Bisect pane
        return f"stopped by {whose} specdebug session ({self.stopped_by.describe()})"

    def identity(self) -> dict[str, Any]:
        """What the box-side check compares (specdebug/box/procctl.py judge)."""
        return {
            "pgid": self.pgid,
            "start_ticks": self.start_ticks,
            "pid": self.pid,
            "pid_start_ticks": self.pid_start_ticks,
            "launch_id": self.launch_id,
            # launched with SPT_NOENV: the leader's /proc environ still holds the launch id
            "require_token": bool(self.launch_id) and self.env.get("SPT_NOENV") == "1",
        }


class StopResult(Model):
    """What a stop did (server_control.stop_record): journaled as a `stop` record."""

    type: Literal["stopped"] = "stopped"
    profile: str
    pid: int | None = None
    pgid: int | None = None
    was_running: bool = False
    stopped: bool = False  # nothing of the group is left
    refused: bool = False  # the record could not be trusted or the group not proven: nothing signalled
    signals: list[str] = Field(default_factory=list)
    remaining: list[int] = Field(default_factory=list)
    elapsed_s: float = 0.0
    message: str = ""
    step: str | None = None  # the job step cancelled with the group (a Slurm node)


class StateFileError(RemoteError):
    """A server record on the box that is not safe to act on (owner, mode, type or content)."""


class PortHolder(Model):
    """Who listens on a TCP port on the box (pids empty when not visible, e.g. another user's)."""

    port: int
    listening: bool
    pids: list[int] = Field(default_factory=list)
    cmdline: list[str] = Field(default_factory=list)
    owners: list[dict[str, Any]] = Field(default_factory=list)  # [{uid, user}] of the listening sockets
    self_uid: int | None = None  # the box login's uid (None: an older box op)
    # a port nobody listens on now, when this one is taken (box/ports.py): from the login's
    # $SPECDEBUG_SIM_PORTS block (free_from names it) or the first above; the launch checks it again
    free: int | None = Field(default=None, ge=1, le=65535)
    free_from: str = ""

    @property
    def pid(self) -> int | None:
        return self.pids[0] if self.pids else None

    def others(self) -> list[str]:
        """`user (uid N)` of each listening socket that is not this login's."""
        return [f"{o.get('user')} (uid {o.get('uid')})" for o in self.owners if o.get("uid") != self.self_uid]

    def describe(self) -> str:
        if not self.listening:
            return f"port {self.port} is free"
        if self.others() and self.self_uid is not None:
            return f"port {self.port} is in use by another user's process: {', '.join(self.others())}"
        if not self.pids:
            return f"port {self.port} is in use (holder not visible: another user's process?)"
        who = " ".join(self.cmdline)[:120] or "?"
        return f"port {self.port} is in use by PID {self.pid} ({who})"


# -- box-side operations (specdebug/box/procctl.py) -----------------------------------------------


async def box_call(remote: Remote, op: str, request: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    """One process-control operation, decided on the box (an op of the resident helper, or one
    python3 process where the box has none); the request never goes into a command line."""
    try:
        return await remote.box_op(op, request, timeout=timeout)
    except (ConnectionDropped, NotConnected):
        raise
    except RemoteError as exc:
        raise RemoteError(f"process control on the box failed: {exc}") from exc


def state_dir_of(remote: Remote) -> str:
    """The box-side folder of server records for this remote (the demo and tests use their own)."""
    return remote.state_dir or DEFAULT_STATE_DIR


def _state_request(remote: Remote, profile_name: str) -> dict[str, Any]:
    return {"dir": state_dir_of(remote), "name": profile_name}


async def save_record(remote: Remote, record: ServerRecord, *, check_only: bool = False) -> None:
    """Write the state file (whole or not at all).  check_only: write it beside and remove it,
    proving a record of this size can be written now (a launch asks before it starts anything)."""
    require_write("write the server record", remote)
    data = record.model_dump_json(indent=1)
    if len(data.encode()) > MAX_RECORD_BYTES:  # never write what stop and status would refuse
        raise StateFileError(
            f"the server record of {record.profile} is {len(data.encode())} bytes, over {MAX_RECORD_BYTES}"
        )
    req = {**_state_request(remote, record.profile), "data": data, "check_only": check_only}
    out = await box_call(remote, "write_state", req)
    if out.get("state") != "ok":
        raise StateFileError(f"cannot write the server state file: {out.get('reason')}")


async def file_size(remote: Remote, path: str) -> int | None:
    """Size of a file on the box (None when it cannot be read): a log's offset before a run."""
    if not path:
        return None
    try:
        res = await remote.run(["wc", "-c", "--", path], timeout=15)
        return int(res.out.split()[0]) if res.ok else None
    except (RemoteError, ValueError, IndexError):
        return None


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(file)'}: {e['msg']}" for e in exc.errors()[:5])


async def load_record(remote: Remote, profile_name: str) -> ServerRecord | None:
    """The state file of a profile's server, or None when specdebug never launched it on this box.

    Raises StateFileError when the file is not safe to act on: another owner, writable by others, not
    a regular file, not a valid record, or a record of another profile."""
    out = await box_call(remote, "read_state", _state_request(remote, profile_name))
    path = out.get("path") or profile_name
    if out["state"] == "missing":
        return None
    if out["state"] != "ok":
        raise StateFileError(f"server state file refused: {out.get('reason')}; nothing was signalled")
    try:
        record = ServerRecord.model_validate_json(out["data"])
    except ValidationError as exc:
        raise StateFileError(
            f"server state file {path} is not a valid record ({_problems(exc)}); nothing was signalled"
        ) from None
    if record.profile != profile_name:
        raise StateFileError(
            f"server state file {path} names profile {record.profile!r}, not {profile_name!r}; "
            "nothing was signalled"
        )
    return record


async def this_run_offset(remote: Remote, profile_name: str, log_file: str | None = None) -> int:
    """Byte offset where the profile's running server began its log: a launch appends to the log, so
    what "this run" printed starts there (an earlier run's ready line or timings prove nothing).

    0 when there is no record, the server was stopped, the record is for another log file, or the
    record cannot be read (the whole file is then this run's, as for a server specdebug never launched)."""
    try:
        record = await load_record(remote, profile_name)
    except RemoteError:
        return 0
    if record is None or record.stopped_at is not None:
        return 0
    if log_file is not None and record.log_file != log_file:
        return 0
    return record.log_offset


async def forget_record(remote: Remote, profile_name: str) -> None:
    """Remove the profile's state file (benchmarks and tests clean up after themselves)."""
    require_write("remove the server record", remote)
    await box_call(remote, "forget_state", _state_request(remote, profile_name))


async def check_group(remote: Remote, record: ServerRecord) -> dict[str, Any]:
    """Box-side verdict on the record's group: running (proven), gone, mismatch, unproven, refused."""
    return await box_call(remote, "check", record.identity())


async def signal_group(remote: Remote, record: ServerRecord, sig: str) -> dict[str, Any]:
    """Signal the record's group only if the box proves, in the same step, that it is the recorded one."""
    return await box_call(remote, "signal", {**record.identity(), "sig": sig})


WAIT_EXIT_S = 20.0  # one wait on the box; the watcher asks again after it
LEADER_RETRY_S = 1.0  # no helper yet, or the wait failed: ask the box to watch the main PID again after this


async def wait_main_exit(
    remote: Remote, record: ServerRecord, timeout_s: float = WAIT_EXIT_S
) -> dict[str, Any]:
    """Block until the record's main process ends or timeout_s (the box watches the PID itself: a
    pidfd in the helper): {seen, gone}.  seen False: that process was not there as recorded (gone
    already, or its PID reused), so only the group listing can tell what happened."""
    ticks = record.pid_start_ticks
    if ticks is None and record.pid == record.pgid:
        ticks = record.start_ticks
    request = {"pid": record.pid, "start_ticks": ticks, "timeout_s": timeout_s}
    return await box_call(remote, "wait_exit", request, timeout=timeout_s + 10)


async def main_process_exit(remote: Remote, record: ServerRecord) -> bool:
    """Returns True once the box saw the record's main process end; False when it cannot watch it
    (the PID was not there as recorded: the group listing decides).  Waits on the resident helper
    only (a blocked helper thread, never an SSH channel held open), re-asking after each bound and
    after a dropped or not yet started helper."""
    while True:
        if not getattr(remote, "has_helper", False):
            await asyncio.sleep(LEADER_RETRY_S)
            continue
        try:
            got = await wait_main_exit(remote, record)
        except RemoteError:
            await asyncio.sleep(LEADER_RETRY_S)
            continue
        if not got.get("seen"):
            return False
        if got.get("gone"):
            return True


async def inspect_process(remote: Remote, pid: int) -> dict[str, Any]:
    """The identity to record for a process found running (attach), or a refusal with its reason."""
    return await box_call(remote, "inspect", {"pid": pid})


def group_members(procs: Sequence[ProcInfo], record: ServerRecord) -> list[ProcInfo]:
    """Processes of the record's group; empty when the group is gone or the PGID was reused.

    The cheap client-side view (one process listing) for liveness and display.  A PGID cannot be
    reused while any member lives, so members are ours unless the leader PID (or, leader gone, the
    recorded PID) now belongs to a process started at another time.  Signals are decided on the box
    (signal_group), which also refuses groups that must never be signalled.
    """
    members = [p for p in procs if p.pgid == record.pgid]
    leader = next((p for p in members if p.pid == record.pgid), None)
    if leader and record.start_ticks is not None and leader.start_ticks != record.start_ticks:
        return []
    own = next((p for p in members if p.pid == record.pid), None)
    if leader is None and own and record.pid_start_ticks is not None:
        if own.start_ticks != record.pid_start_ticks:
            return []
    # zombies are dead: they wait for init to reap them, which can take a moment
    return [p for p in members if p.state != "Z"]


async def find_port_holder(remote: Remote, port: int) -> PortHolder:
    """Who listens on the port on the box (specdebug/box/ports.py)."""
    try:
        data = await remote.box_op("port_holder", {"port": port}, timeout=30)
    except (ConnectionDropped, NotConnected):
        raise
    except RemoteError as exc:
        raise RemoteError(f"cannot check port {port} on the box: {exc}") from exc
    data["cmdline"] = mask_argv(data.get("cmdline") or [])  # an --api-key of whoever holds the port
    return PortHolder(port=port, **data)


async def health_on_box(
    remote: Remote, port: int, path: str, timeout: float = 2.0, host: str = "127.0.0.1"
) -> int | None:
    """HTTP status of GET http://HOST:port/path, asked from the box itself (None: no answer); HOST is
    where the server answers (core.profiles.server_host: its --host, else 127.0.0.1).

    specdebug/box/health.py; a box that cannot run it (no python3) gives no answer either, as
    before; a lost connection is raised."""
    url = f"http://{url_host(host)}:{port}{path}"
    try:
        out = await remote.box_op("health", {"url": url, "timeout": timeout}, timeout=timeout + 10)
    except (ConnectionDropped, NotConnected, RequestTimeout):
        raise
    except RemoteError:
        return None
    code = out.get("status")
    return code if isinstance(code, int) and code else None
