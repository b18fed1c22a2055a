"""Stop, status and attach: act only on a process group proven to be the recorded server's.

Why a module of its own: these are the places where specdebug sends signals, so every rule about
identity sits together.  A record (untrusted: it is a file on the box) names a group; the box
checks, in the same step as the signal, that the group's leader is the process the record names
(PID + start time), that every member belongs to this login's user, and that it is neither init,
nor this login's own sshd/shell/helper (specdebug/box/procctl.py).  Anything that cannot be
proven is reported as such and never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from specdebug.capability import require_write
from specdebug.core.control.records import (
    ActorMark,
    PortHolder,
    ServerRecord,
    StateFileError,
    StopResult,
    check_group,
    file_size,
    find_port_holder,
    group_members,
    health_on_box,
    inspect_process,
    load_record,
    save_record,
    signal_group,
)
from specdebug.core.control.workers import group_filter
from specdebug.core.model import Model
from specdebug.core.profiles import Profile
from specdebug.core.secrets import mask_argv, profile_secrets
from specdebug.errors import SpecdebugError
from specdebug.remote.api import JobSteps, Remote, RemoteError

if TYPE_CHECKING:  # the journal's records (many models) only where one is written: `status` writes none
    from specdebug.core.journal import EventJournal

Clock = Callable[[], float]


class LaunchRefused(SpecdebugError):
    """Not launched or attached: the port is taken, the server still runs, or the target is refused."""

    def __init__(
        self,
        message: str,
        *,
        holder: PortHolder | None = None,
        record: ServerRecord | None = None,
        hint: str | None = None,
    ):
        super().__init__(message, hint)
        self.holder = holder
        self.record = record


async def stop_record(
    remote: Remote,
    record: ServerRecord,
    *,
    grace_s: float = 10.0,
    journal: EventJournal | None = None,
    clock: Clock = time.time,
    poll_s: float = 0.2,
) -> StopResult:
    """TERM the recorded process group, KILL it after `grace_s`, and confirm nothing of it is left.

    Each signal is sent by the box only after it proved the group is the recorded one."""
    require_write("stop", remote, journal)
    t0 = clock()
    result = StopResult(profile=record.profile, pid=record.pid, pgid=record.pgid, stopped=True)
    if record.stopped_at is not None:
        result.message = f"{record.profile}: not running (already stopped)"
        return _finish(result, journal, t0, clock, record.host)
    # the stop mark first: a session watching this server sees its group go as our stop, not a crash
    marked = record.model_copy(update={"stopped_by": ActorMark.now(clock)})
    with contextlib.suppress(RemoteError):
        await save_record(remote, marked)
    for sig, wait_s in (("TERM", grace_s), ("KILL", 10.0)):
        verdict = await signal_group(remote, record, sig)
        state = verdict["state"]
        if state in ("gone", "mismatch"):
            result.remaining = []
            if not result.signals:
                why = ("group reused: " if state == "mismatch" else "") + verdict["reason"]
                result.message = f"{record.profile}: not running ({why})"
            break
        if state != "running":  # refused / unproven
            result.stopped, result.refused = False, True
            result.remaining = list(verdict.get("members") or [])
            result.message = f"{record.profile}: not stopped: {verdict['reason']}; nothing was signalled"
            with contextlib.suppress(RemoteError):  # not stopped: the mark would be a lie
                await save_record(remote, record)
            return _finish(result, journal, t0, clock, record.host)
        result.was_running = True
        result.signals.append(sig)
        members = await _wait_gone(remote, record, clock() + wait_s, clock, poll_s)
        result.remaining = members
        if not members:
            break
    result.stopped = not result.remaining
    if result.was_running:
        if result.stopped:
            result.message = (
                f"{record.profile}: stopped process group {record.pgid} ({', '.join(result.signals)})"
            )
        else:
            result.message = f"{record.profile}: still running after KILL: PIDs {result.remaining}"
    if result.stopped and record.step and isinstance(remote, JobSteps):
        await _cancel_step(remote, record.step, result)
    if result.stopped:
        with contextlib.suppress(RemoteError):
            ended = marked if result.was_running else record  # it was gone already: nobody stopped it
            await save_record(remote, ended.model_copy(update={"stopped_at": clock()}))
    return _finish(result, journal, t0, clock, record.host)


async def _cancel_step(remote: JobSteps, step: str, result: StopResult) -> None:
    """The group is proven gone: end the job step that held it (it ends by itself within a second)."""
    result.step = step
    try:
        await remote.cancel_step(step)
        result.message += f"; job step {step} cancelled"
    except RemoteError as exc:
        result.stopped = False
        result.message += f"; job step {step} not cancelled: {exc}"


async def _wait_gone(
    remote: Remote, record: ServerRecord, end: float, clock: Clock, poll_s: float
) -> list[int]:
    while True:
        members = sorted(
            p.pid
            for p in group_members(await remote.processes(**group_filter(record.pgid, record.pid)), record)
        )
        if not members or clock() >= end:
            return members
        await asyncio.sleep(poll_s)


def _finish(
    result: StopResult, journal: EventJournal | None, t0: float, clock: Clock, host: str
) -> StopResult:
    result.elapsed_s = clock() - t0
    if journal is not None:
        from specdebug.core.records import StopRecord

        journal.append(StopRecord(stop=result, host=host or None))
    return result


async def stop(
    remote: Remote, profile: Profile, *, grace_s: float = 10.0, journal: EventJournal | None = None
) -> StopResult:
    try:
        record = await load_record(remote, profile.name)
    except StateFileError as exc:
        result = StopResult(profile=profile.name, refused=True, message=f"{profile.name}: not stopped: {exc}")
        if journal is not None:
            from specdebug.core.records import StopRecord

            journal.append(StopRecord(stop=result))
        return result
    if record is None:
        return StopResult(
            profile=profile.name, stopped=True, message=f"{profile.name}: never launched on this box"
        )
    return await stop_record(remote, record, grace_s=grace_s, journal=journal)


class ServerStatus(Model):
    type: Literal["status"] = "status"
    profile: str
    state: Literal["running", "stopped", "not_launched", "exited", "unverified"]
    reason: str = ""  # why not running (gone, group reused, already stopped) or why unverified
    record: ServerRecord | None = None
    pids: list[int] = Field(default_factory=list)
    titles: list[str] = Field(default_factory=list)
    port: int
    port_holder: PortHolder | None = None
    health: int | None = None
    # the specdebug run that stopped it (the record's stop mark): `stopped` / `exited` by whom
    stopped_by: ActorMark | None = None

    def describe(self) -> str:
        if self.state == "not_launched":
            text = f"{self.profile}: not launched by specdebug on this box"
        elif self.state == "running":
            r = self.record
            assert r is not None
            text = f"{self.profile}: running, PID {r.pid} PGID {r.pgid}, {len(self.pids)} processes"
            text += f", health {self.health or 'not answering'} on port {self.port}"
        elif self.stopped_by is not None and self.reason:  # `P: stopped by another specdebug session (...)`
            text = f"{self.profile}: {self.reason}"
        else:
            text = f"{self.profile}: {self.state}" + (f" ({self.reason})" if self.reason else "")
        if self.port_holder and self.port_holder.listening and self.state != "running":
            text += f"; {self.port_holder.describe()}"
        return text


async def liveness(remote: Remote, record: ServerRecord, profile: Profile) -> tuple[list[int], int | None]:
    """The group's live PIDs and the health status after ready (one process probe + one health probe)."""
    members = group_members(await remote.processes(**group_filter(record.pgid, record.pid)), record)
    if not members:
        return [], None
    return sorted(p.pid for p in members), await health_on_box(
        remote, record.port, profile.ready.health, host=record.listen_host
    )


async def status(remote: Remote, profile: Profile) -> ServerStatus:
    record = await load_record(remote, profile.name)
    holder = await find_port_holder(remote, profile.server.port)
    st = ServerStatus(
        profile=profile.name,
        state="not_launched",
        record=record,
        port=profile.server.port,
        port_holder=holder,
    )
    if record is None:
        return st
    st.stopped_by = record.stopped_by
    if record.stopped_at is not None:
        st.state, st.reason = "stopped", record.stopped_elsewhere() or "already stopped"
        return st
    verdict = await check_group(remote, record)
    if verdict["state"] != "running":
        st.state = "exited" if verdict["state"] in ("gone", "mismatch") else "unverified"
        st.reason = ("group reused: " if verdict["state"] == "mismatch" else "") + verdict["reason"]
        if verdict["state"] == "gone" and record.stopped_by is not None:
            st.reason = f"{record.stopped_elsewhere()}; {st.reason}"  # the stop ended before its record
        return st
    st.stopped_by = None  # still running: a stop was asked but has not ended it (yet)
    members = [
        p
        for p in group_members(await remote.processes(**group_filter(record.pgid, record.pid)), record)
        if p.pid in verdict["members"]
    ]
    st.pids = sorted(p.pid for p in members)
    known = profile_secrets(profile)
    st.titles = [
        " ".join(mask_argv(p.cmdline, known)) or p.title for p in sorted(members, key=lambda p: p.pid)
    ]
    st.state = "running" if members else "exited"
    if members:
        st.health = await health_on_box(remote, record.port, profile.ready.health, host=record.listen_host)
    return st


async def attach(
    remote: Remote,
    profile: Profile,
    *,
    pid: int | None = None,
    port: int | None = None,
    log: str | None = None,
    journal: EventJournal | None = None,
    clock: Clock = time.time,
    scan_bytes: int = 8 << 20,
) -> ServerRecord:
    """Adopt a server started by hand: by PID or by the PID listening on the port.

    The box reports the process's own start time and its group leader's identity (the listener
    need not lead its group); init, other users' processes and this login's own session are refused.
    The log is read from the start of the latest run in it (the kind's restart line, e.g.
    SGLang's `server_args=`), so phases already passed are replayed before following live.
    """
    require_write("attach (writes the server record)", remote, journal)
    port = port or profile.server.port
    if pid is None:
        holder = await find_port_holder(remote, port)
        if not holder.listening:
            raise LaunchRefused(f"nothing listens on port {port}; give --pid")
        if holder.pid is None:
            raise LaunchRefused(holder.describe())
        pid = holder.pid
    ident = await inspect_process(remote, pid)
    if ident["state"] != "ok":
        raise LaunchRefused(f"not attaching: {ident['reason']}")
    from specdebug.core.logs.follow import expand_remote_path  # the log stack: attach alone reads a log

    log_path = await expand_remote_path(remote, log or profile.server.log_file)
    size = await file_size(remote, log_path)
    offset = 0
    if size is not None:
        start = max(0, size - scan_bytes)
        data = await remote.read_file(log_path, offset=start, max_bytes=size - start)
        offset = start + _last_run_offset(data, profile.server.kind)
    record = ServerRecord(
        profile=profile.name,
        host=remote.name,
        fingerprint=profile.fingerprint(),
        pid=ident["pid"],
        pgid=ident["pgid"],
        start_ticks=ident["start_ticks"],
        pid_start_ticks=ident["pid_start_ticks"],
        port=port,
        log_file=log_path,
        log_offset=offset,
        started_at=clock(),
        argv=mask_argv(ident.get("cmdline") or [], profile_secrets(profile)),
        attached=True,
    )
    await save_record(remote, record)
    if journal is not None:
        from specdebug.core.records import LaunchRecord

        journal.append(LaunchRecord(server=record), sync=True)  # record.attached: an attach
    return record


def _last_run_offset(data: bytes, kind: str) -> int:
    """Byte offset (within data) of the line where the latest server start begins, else of the first line."""
    from specdebug.engines import PACKS

    pack = PACKS.get(kind)
    rx = pack.restart_re if pack is not None else None
    best = 0
    if rx is None:
        return best
    pos = 0
    for line in data.split(b"\n"):
        if rx.search(line.decode("utf-8", "replace")):
            best = pos
        pos += len(line) + 1
    return best
