"""Starting a server detached on the box and recording who it is.

Separate from the watchers: the launch script, the server's self-report and the record are the
parts that must be right about process identity (the stop path trusts them).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, replace

from specdebug.capability import require_write
from specdebug.core.control.actions import LaunchRefused, stop_record
from specdebug.core.control.events import Clock
from specdebug.core.control.records import (
    MAX_RECORD_BYTES,
    ActorMark,
    ServerRecord,
    find_port_holder,
    group_members,
    load_record,
    save_record,
)
from specdebug.core.control.workers import group_filter
from specdebug.core.drift.snapshot import snapshot_or_error
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.profiles.ports import port_change_hint
from specdebug.core.records import LaunchRecord
from specdebug.core.secrets import mask_argv, mask_env, profile_secrets
from specdebug.core.source import ServerSource, read_source
from specdebug.remote.api import ConnectionDropped, JobSteps, NotConnected, Remote, RemoteError
from specdebug.remote.boxcode import source
from specdebug.remote.shell import env_assignments

# -- launch ------------------------------------------------------------------------------------

# The launch, in sh on the box (specdebug/box/launch.sh and launch_report.sh; how they prove who
# the server is: their header comments).  Profile text only ever comes as positional parameters:
# $1 log path, $2 cwd, $3 the report script, then the command (env K=V ... argv).  The server side
# reports its own identity after setsid and execs the server, so nothing here depends on when a
# process snapshot happens to be taken.
logger = logging.getLogger(__name__)
LAUNCH_SCRIPT = source("launch.sh")
LAUNCH_REPORT = source("launch_report.sh")
LAUNCH_VAR = "SPECDEBUG_LAUNCH_ID"  # marks the server's processes (proves a leaderless group is ours)


def launch_env(profile: Profile) -> dict[str, str]:
    env = dict(profile.server.env)
    if profile.server.spt_noenv:
        env.setdefault("SPT_NOENV", "1")
    return env


def launch_argv(profile: Profile, launch_id: str | None = None) -> list[str]:
    """The argv run on the box (as `sh -c LAUNCH_SCRIPT sh LOG CWD REPORT env K=V... ARGV...`)."""
    env = launch_env(profile)
    if launch_id:
        env[LAUNCH_VAR] = launch_id
    command = ["env", *env_assignments(env), *profile.server.argv]
    server = profile.server
    return ["sh", "-c", LAUNCH_SCRIPT, "sh", server.log_file, server.cwd or "", LAUNCH_REPORT, *command]


@dataclass(frozen=True)
class Started:
    """What the server side of a launch reported: its own PID, group, session and start time."""

    pid: int
    pgid: int
    sid: int
    start_ticks: int
    log_offset: int
    log_file: str
    step: str | None = None  # the job step holding the server (a Slurm node), else None


def parse_launch_report(out: str) -> Started:
    """The launcher's lines (`size N`, `log PATH`) and the server's own `server <stat line>`."""
    size = log = stat = None
    for line in out.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "size":
            size = int(rest.strip())
        elif tag == "log":
            log = rest
        elif tag == "server":
            stat = rest
        elif tag == "notleader":
            raise RemoteError(f"launch: the server did not get its own process group and session ({rest})")
        elif tag == "noid":
            raise RemoteError("launch: the server could not read its own /proc entry; not started")
    if size is None or log is None:
        raise RemoteError(f"launch failed: {out.strip() or 'no output'}")
    if stat is None:
        raise RemoteError("launch: the server did not report its identity (see its log)")
    fields = stat[stat.rfind(")") + 2 :].split()
    pid, pgid, sid, start = int(stat.split()[0]), int(fields[2]), int(fields[3]), int(fields[19])
    if not (pid == pgid == sid and pid > 1):
        raise RemoteError(f"launch: the server reported PID {pid}, PGID {pgid}, session {sid}; refused")
    return Started(pid=pid, pgid=pgid, sid=sid, start_ticks=start, log_offset=size, log_file=log)


async def start_detached(remote: Remote, profile: Profile, launch_id: str | None = None) -> Started:
    """Run the launch script on the box: the server starts detached and reports who it is.

    On a Remote whose processes live in job steps (Slurm), the launch is a step of its own that
    lasts as long as the server (its id goes into the record)."""
    step = None
    if isinstance(remote, JobSteps):
        res, step = await remote.launch_step(
            launch_argv(profile, launch_id), name=f"specdebug-{profile.name}", timeout=30
        )
    else:
        res = await remote.run(launch_argv(profile, launch_id), timeout=30)
    if not res.ok:
        what = {
            3: "cannot create the log file",
            4: "cannot cd to the working directory",
            5: "not launching: unsafe log file",  # launch.sh: a folder not ours and private, a symlink
        }.get(res.exit_status or 0, "launch failed")
        raise RemoteError(f"{what}: {res.err.strip() or res.out.strip() or res.exit_status}")
    try:
        started = parse_launch_report(res.out)
    except (ValueError, IndexError) as exc:
        raise RemoteError(f"launch: unreadable report from the box: {res.out.strip()[:300]!r}") from exc
    return replace(started, step=step)


async def check_can_launch(remote: Remote, profile: Profile) -> None:
    """Raise LaunchRefused when this profile's server still runs or its port is taken."""
    record = await load_record(remote, profile.name)
    if record is not None and record.stopped_at is None:
        members = group_members(await remote.processes(**group_filter(record.pgid, record.pid)), record)
        if members:
            raise LaunchRefused(
                f"{profile.name} is already running (PID {record.pid}, PGID {record.pgid}, "
                f"{len(members)} processes); stop or restart it",
                record=record,
                hint=f"specdebug stop {remote.name} -c {profile.name} (or restart instead of stop)",
            )
    holder = await find_port_holder(remote, profile.server.port)
    if holder.listening:
        raise LaunchRefused(
            f"not launching {profile.name}: {holder.describe()}",
            holder=holder,
            hint=port_change_hint(profile, holder.free, holder.free_from),
        )


# the largest identity a box can report: a draft record of this size bounds the real one
DRAFT = Started(pid=1 << 30, pgid=1 << 30, sid=1 << 30, start_ticks=1 << 62, log_offset=1 << 62, log_file="")
LOG_PATH_SLACK = 4096  # the log path the box reports (~ expanded) may be longer than the profile's


def _record(
    remote: Remote | None,
    profile: Profile,
    got: Started,
    launch_id: str,
    started: float,
    source: ServerSource | None = None,
) -> ServerRecord:
    return ServerRecord(
        profile=profile.name,
        host=remote.name if remote is not None else "",
        fingerprint=profile.fingerprint(),
        pid=got.pid,
        pgid=got.pgid,
        start_ticks=got.start_ticks,
        pid_start_ticks=got.start_ticks,
        launch_id=launch_id,
        port=profile.server.port,
        log_file=got.log_file or profile.server.log_file,
        log_offset=got.log_offset,
        started_at=started,
        argv=mask_argv(profile.server.argv, profile_secrets(profile)),
        env=mask_env(launch_env(profile), profile_secrets(profile)),
        cwd=profile.server.cwd,
        step=got.step,
        source=source,  # its identity: which commit runs (core.source)
        launched_by=ActorMark.now(),  # another session following this profile says who relaunched it
    )


def launch_refusal(profile: Profile) -> str | None:
    """What `launch` would refuse in the profile itself, before any box: `profile check` says it too
    (both run check_launchable)."""
    try:
        check_launchable(profile)
    except LaunchRefused as exc:
        return str(exc)
    return None


def check_launchable(profile: Profile) -> None:
    """LaunchRefused for what no box could launch as the profile says, checked before any box (the
    launch runs it first; `profile check` through launch_refusal): text the launch cannot carry, a
    log path that names no file, a record stop and status could not read back."""
    why = _text_problem(profile)
    if why is not None:
        raise LaunchRefused(f"not launching {profile.name}: {why}")
    _check_record_size(_record(None, profile, DRAFT, uuid.uuid4().hex, time.time()))


def _text_problem(profile: Profile) -> str | None:
    """A NUL byte cannot pass through an exec (the launch failed on the box with "embedded null
    byte"); a line break in the log path or cwd broke the launch's line-based report (the record
    named the log's first line: a file the server never wrote); a log path that is a folder was
    refused only on the box."""
    server = profile.server
    words = [("server.argv", w) for w in server.argv]
    words += [(f"server.env {k}", f"{k}={v}") for k, v in server.env.items()]
    words += [("server.log_file", server.log_file), ("server.cwd", server.cwd or "")]
    for where, word in words:
        if "\0" in word:
            return f"{where} holds a NUL byte, which no command line can carry"
    for where, path in (("server.log_file", server.log_file), ("server.cwd", server.cwd or "")):
        if any(c in path for c in "\n\r"):
            return f"{where} {path!r} holds a line break (the launch reports the path as one line)"
    log = server.log_file
    if log in ("~", ".", "..") or log.endswith(("/", "/.", "/..")):
        return f"server.log_file {log!r} names a folder, not a file"
    return None


def _check_record_size(draft: ServerRecord) -> None:
    """Refuse before starting anything a server whose record stop and status could not read back."""
    size = len(draft.model_dump_json(indent=1).encode()) + LOG_PATH_SLACK
    if size > MAX_RECORD_BYTES:
        raise LaunchRefused(
            f"not launching {draft.profile}: its server record would be about {size} bytes "
            f"({len(draft.argv)} argv words, {len(draft.env)} env vars), over the {MAX_RECORD_BYTES} "
            "bytes a record may be (stop and status could not read it back); trim server.env or server.argv"
        )


@dataclass
class Launching:
    """A server started and recorded; its LaunchRecord (with the drift snapshot) is journaled by
    `journaled` as soon as the snapshot is in, beside whatever the caller does meanwhile."""

    record: ServerRecord
    journaled: asyncio.Task[None] | None = None

    async def finish(self, timeout: float | None = None) -> None:
        """Wait for the LaunchRecord to be journaled (bounded by the snapshot's own deadline)."""
        if self.journaled is not None:
            await asyncio.wait_for(asyncio.shield(self.journaled), timeout)


async def start_launch(
    remote: Remote,
    profile: Profile,
    *,
    journal: EventJournal | None = None,
    clock: Clock = time.time,
    check: bool = True,
) -> Launching:
    """Start the profile's server detached on the box and record it (state file now; the journal's
    LaunchRecord once the drift snapshot taken beside the start is in).

    Returns as soon as the server is recorded: a caller watching the startup runs beside the
    snapshot, so the startup time it reports is the server's, never the snapshot's (a box whose
    installed files take long to hash)."""
    require_write("launch", remote, journal)
    check_launchable(profile)  # what `profile check` refuses too, before any box is asked
    if check:
        await check_can_launch(remote, profile)
    started = clock()
    launch_id = uuid.uuid4().hex
    draft = _record(remote, profile, DRAFT, launch_id, started)
    _check_record_size(draft)  # with this host's name in it
    await _reserve_record(remote, draft)
    drift = asyncio.create_task(snapshot_or_error(remote, profile)) if journal is not None else None
    try:
        record = await _start_and_record(remote, profile, launch_id, started)
    except BaseException:
        if drift is not None:
            drift.cancel()
        raise
    if journal is None or drift is None:
        return Launching(record)

    async def journal_it() -> None:
        snap = await drift  # the box as the server found it (core.drift)
        journal.append(LaunchRecord(server=record, drift=snap), sync=True)

    return Launching(record, asyncio.create_task(journal_it()))


async def _reserve_record(remote: Remote, draft: ServerRecord) -> None:
    """Nothing is started that could not be recorded: a record as large as the real one can be
    (the draft's identity is the largest a box reports, its log path padded) is written beside the
    state file and removed, before the launch.  A full disk or a quota refuses here."""
    padded = draft.model_copy(update={"log_file": draft.log_file + "x" * LOG_PATH_SLACK})
    try:
        await save_record(remote, padded, check_only=True)
    except (ConnectionDropped, NotConnected):
        raise
    except RemoteError as exc:
        raise LaunchRefused(
            f"not launching {draft.profile}: its server record cannot be written on the box ({exc}); "
            "nothing was started"
        ) from None


class UnrecordedServer(RemoteError):
    """A server was started but its record could not be written (what was done about it: the message)."""


async def _start_and_record(remote: Remote, profile: Profile, launch_id: str, started: float) -> ServerRecord:
    got = await start_detached(remote, profile, launch_id)
    # recorded at once: a specdebug killed from here on (or a dropped link) leaves a server that
    # status and stop find; the drift snapshot and the git check can take seconds on a busy box
    record = _record(remote, profile, got, launch_id, started)
    try:
        await save_record(remote, record)
    except RemoteError as exc:
        raise UnrecordedServer(await _stop_unrecorded(remote, record, exc)) from None
    source = await read_source(remote, profile.server.cwd)
    if source is not None:
        with_source = record.model_copy(update={"source": source})
        try:
            await save_record(remote, with_source)
            record = with_source
        except RemoteError:  # recorded already (without its commit): status and stop find it
            logger.warning("the server record of %s was not updated with its source", profile.name)
    return record


async def _stop_unrecorded(remote: Remote, record: ServerRecord, why: RemoteError) -> str:
    """Stop a server whose record could not be written (status and stop could never find it),
    through the same proof of identity as `stop`; the sentence says what was done."""
    head = (
        f"started {record.profile} (PID {record.pid}, group {record.pgid}) but its server record "
        f"cannot be written on the box ({why})"
    )
    try:
        result = await stop_record(remote, record, grace_s=5.0)
        stopped, detail = result.stopped, result.message
    except RemoteError as exc:
        stopped, detail = False, str(exc)
    if stopped:
        return f"{head}: stopped it ({detail})"
    return (
        f"{head}; stopping it failed ({detail}): it still runs: stop it on the box with "
        f"kill -TERM -- -{record.pgid}"
    )


async def launch(
    remote: Remote,
    profile: Profile,
    *,
    journal: EventJournal | None = None,
    clock: Clock = time.time,
    check: bool = True,
) -> ServerRecord:
    """Start the profile's server detached on the box and record it (state file + journal), the
    LaunchRecord journaled before returning (start_launch: a caller that watches meanwhile)."""
    launching = await start_launch(remote, profile, journal=journal, clock=clock, check=check)
    await launching.finish()
    return launching.record
