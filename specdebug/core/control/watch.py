"""Watching a launched server: the log follower, health poller and group poller feed the tracker.

The I/O half of startup: three concurrent watchers on the connection, one queue of typed inputs,
one tracker.  The log is followed by `core.logs.follow.Follower` (exact offsets, rotation,
truncation, resume after a drop); a log that cannot be followed becomes a `LogProblem` the
tracker turns into a reason, never a silent timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from specdebug.core.control.events import (
    Clock,
    ConnectionNote,
    Launched,
    StartupEvent,
    Verdict,
)
from specdebug.core.control.launch import start_launch
from specdebug.core.control.records import (
    ServerRecord,
    find_port_holder,
    group_members,
    health_on_box,
    load_record,
    main_process_exit,
)
from specdebug.core.control.tracker import StartupTracker, TrackerEvent
from specdebug.core.control.workers import group_filter
from specdebug.core.fingerprint import url_host
from specdebug.core.journal import EventJournal
from specdebug.core.limits import cap_text
from specdebug.core.logs.events import LogEvent
from specdebug.core.logs.follow import Follower, RawRun
from specdebug.core.profiles import Profile
from specdebug.core.records import VerdictRecord
from specdebug.core.secrets import Scrubber
from specdebug.remote.api import ConnectionDropped, ConnState, ConnStatus, Remote, RemoteError

logger = logging.getLogger(__name__)

HEALTH_DEADLINE_S = 2.0  # one health answer through the forward, whole
FOLLOW_RETRY_S = 2.0  # a follower that ended (file unreadable, agent gone) is started again after this
FOLLOW_FAULTS = 3  # unexpected errors of the follower tried again before the log is said unreadable


# -- what the watchers put on the queue (typed; the tracker's inputs) ----------------------------


@dataclass(frozen=True, slots=True)
class _Line:
    text: str
    at: float


@dataclass(frozen=True, slots=True)
class _Health:
    status: int | None
    at: float


@dataclass(frozen=True, slots=True)
class _Group:
    pids: list[int]
    at: float


@dataclass(frozen=True, slots=True)
class _Unreadable:
    detail: str
    at: float


@dataclass(frozen=True, slots=True)
class _Tick:
    at: float


@dataclass(frozen=True, slots=True)
class _LeaderGone:
    at: float


@dataclass(frozen=True, slots=True)
class _Link:
    state: Literal["reconnecting", "resumed"]
    detail: str
    at: float


_Input = _Line | _Health | _Group | _Unreadable | _Tick | _Link | _LeaderGone
_Queue = asyncio.Queue[_Input]

# -- watch -------------------------------------------------------------------------------------


async def watch(
    remote: Remote,
    record: ServerRecord,
    profile: Profile,
    *,
    timeout_s: float | None = None,
    deadline: float | None = None,
    journal: EventJournal | None = None,
    clock: Clock = time.time,
    health_interval: float = 0.25,
    group_interval: float = 0.5,
    tick_interval: float = 0.1,
) -> AsyncIterator[StartupEvent]:
    """Stream startup events for a launched (or attached) server; the last one is its Verdict."""
    tracker = StartupTracker(
        kind=profile.server.kind,
        started_at=record.started_at,
        timeout_s=timeout_s if timeout_s is not None else profile.ready.timeout_s,
        require_ready_line=profile.ready.require_ready_line,
        profile=profile.name,
        fingerprint=record.fingerprint or profile.fingerprint(),
        pid=record.pid,
        pgid=record.pgid,
        log_file=record.log_file,
        deadline=deadline,
        check_listener=True,
    )
    if deadline is None and timeout_s is not None:
        tracker.deadline = record.started_at + timeout_s
    scrub = Scrubber.for_profile(profile)
    queue: _Queue = asyncio.Queue()
    poke = asyncio.Event()  # set when the ready line arrives: ask /health now, not at the next poll
    follower = Follower(remote, record.log_file, offset=record.log_offset)
    follow_task = asyncio.create_task(_follow_log(remote, follower, queue, clock))
    follow_task.add_done_callback(_log_follow_end)
    drained = False
    tasks = [
        follow_task,
        asyncio.create_task(
            _poll_health(
                remote,
                record.port,
                profile.ready.health,
                queue,
                clock,
                health_interval,
                poke,
                record.listen_host,
            )
        ),
        asyncio.create_task(_poll_group(remote, record, queue, clock, group_interval)),
        asyncio.create_task(_watch_main_process(remote, record, queue, clock)),
        asyncio.create_task(_ticker(queue, clock, tick_interval)),
    ]
    subscribe = getattr(remote, "subscribe", None)  # a Connection tells its link's changes
    unsubscribe = subscribe(_link_listener(queue, clock)) if callable(subscribe) else lambda: None
    try:
        while True:
            item = await queue.get()
            events: list[TrackerEvent]
            match item:
                case _Line(text, at):
                    events = tracker.feed_line(scrub(text), at)  # secrets never reach an event
                    if tracker.ready_line_at is not None and tracker.health_ok_at is None:
                        poke.set()
                case _Health(status, at):
                    events = tracker.health(status, at)
                    if tracker.listener_check_due(clock()):
                        ours, detail = await listener_is_ours(remote, record)
                        events += tracker.listener(ours, detail, clock())
                case _Group(pids, at):
                    events = tracker.group(pids, at)
                case _LeaderGone(at):
                    events = tracker.leader_gone(at)
                case _Unreadable(detail, at):
                    events = tracker.log_unreadable(scrub(detail), at)
                case _Tick(at):
                    events = []
                    if not drained and tracker.exit_due(at):
                        drained = True  # the group is gone: the rest of the log, then the verdict
                        for text in await _rest_of_log(remote, follower, follow_task):
                            events += tracker.feed_line(scrub(text), clock())
                        at = clock()
                    events += tracker.tick(at)
                case _Link(state, detail, at):
                    yield ConnectionNote(state=state, detail=detail, at=at)
                    continue
            for ev in events:
                if isinstance(ev, Verdict) and ev.verdict == "failed" and ev.error_kind == "exited":
                    ev = await _stopped_while_starting(remote, record, ev)
                if isinstance(ev, Verdict) and journal is not None:
                    journal.append(VerdictRecord(outcome=ev, host=record.host or None), sync=True)
                yield ev
                if isinstance(ev, Verdict):
                    return
    finally:
        unsubscribe()
        for t in tasks:
            t.cancel()
        # bounded: a watcher stuck in library code must not keep the caller from its verdict
        await asyncio.wait(tasks, timeout=5)


async def listener_is_ours(remote: Remote, record: ServerRecord) -> tuple[bool | None, str]:
    """Does the server's port listener belong to its process group?  False (with who holds it)
    when another process listens there: its /health answer is not this server's (issue 41: two
    nodes on one machine bound one address, the other's server answered).  None when the box
    cannot tell (no listener it can see, an unreadable table, a box without the op): the health
    answer is then taken as before."""
    try:
        holder = await find_port_holder(remote, record.port)
        if not holder.listening:
            return None, f"no listener on port {record.port} visible on the box"
        if not holder.pids:
            others = holder.others() if holder.self_uid is not None else []
            return (False, holder.describe()) if others else (None, holder.describe())
        procs = await remote.processes(**group_filter(record.pgid, record.pid))
    except Exception:  # the check is extra proof; without it the watch goes on as it did
        logger.debug("who listens on port %s could not be checked", record.port, exc_info=True)
        return None, f"who listens on port {record.port} could not be checked"
    group = {p.pid for p in group_members(procs, record)}
    if group & set(holder.pids):
        return True, f"port {record.port} is held by the server's process group {record.pgid}"
    return False, holder.describe() + f", not of the server's process group {record.pgid}"


async def _stopped_while_starting(remote: Remote, record: ServerRecord, verdict: Verdict) -> Verdict:
    """A group gone while starting: when the box's record carries a stop mark on this run, another
    specdebug session stopped it (a bisection, `stop` in another terminal), and the verdict says so
    instead of "died (killed or crashed)"."""
    try:
        now = await load_record(remote, record.profile)
    except RemoteError:
        return verdict
    why = now.stopped_elsewhere() if now is not None and now.same_run(record) else None
    if why is None:
        return verdict
    return verdict.model_copy(update={"reason": why, "error_kind": "stopped"})


async def launch_and_watch(
    remote: Remote,
    profile: Profile,
    *,
    journal: EventJournal | None = None,
    timeout_s: float | None = None,
    clock: Clock = time.time,
) -> AsyncIterator[StartupEvent]:
    """Launch, then watch: a Launched event, phases/log/health events, and the Verdict."""
    launching = await start_launch(remote, profile, journal=journal, clock=clock)
    record = launching.record
    yield Launched(record=record)
    # beside the drift snapshot: the startup time is the server's, not the snapshot's
    async for ev in watch(remote, record, profile, timeout_s=timeout_s, journal=journal, clock=clock):
        yield ev
    await launching.finish()


def _clean_line(raw: bytes) -> str:
    text = cap_text(raw.decode("utf-8", "replace").rstrip("\n"))  # excerpts stay bounded
    if "\r" in text:  # progress bars redraw with \r: keep what the terminal would show last
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return text


def _problem(ev: LogEvent) -> str | None:
    """The follow events that mean the log cannot be read (the rest: rotation, truncation, a
    reconnect, are the follower's own business)."""
    if ev.kind == "missing":
        return "no such file"  # the launch created it: gone, or a path that names no file
    if ev.kind == "error":
        return ev.detail or "the follower could not read it"
    if ev.kind == "ended":
        return f"the log follower ended ({ev.detail})" if ev.detail else "the log follower ended"
    return None


REST_MAX_BYTES = 256 * 1024  # what is read directly after the group died (the excerpt's source)


async def _rest_of_log(remote: Remote, follower: Follower, task: asyncio.Task[None]) -> list[str]:
    """The lines the follower has not delivered yet, read directly once the server's group is gone.

    The follower is stopped first: between its awaits it has queued every line up to its offset,
    so reading from that offset gives each line once.  The last REST_MAX_BYTES at most; nothing
    when the log cannot be read now (the verdict then says what the follower saw)."""
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    offset = follower.offset
    if offset is None:
        return []
    try:
        data = await remote.read_file(follower.path, offset=offset, max_bytes=REST_MAX_BYTES + 1)
    except Exception:  # gone, unreadable, or the link is down: keep what was followed
        logger.debug("reading the rest of %s failed", follower.path, exc_info=True)
        return []
    if len(data) > REST_MAX_BYTES:  # keep the end: a crash's traceback is the last thing written
        data = data[-REST_MAX_BYTES:]
        data = data[data.find(b"\n") + 1 :]
    return [_clean_line(raw) for raw in data.split(b"\n")[: -1 if data.endswith(b"\n") else None] if raw]


def _log_follow_end(task: asyncio.Task[None]) -> None:
    """The follow task ended by an error nobody awaits (the watch never reads its result): said in
    the debug log, with its traceback, or a watch that sees no line again leaves no clue why."""
    if not task.cancelled() and task.exception() is not None:
        logger.debug("the startup log follower ended", exc_info=task.exception())


async def _follow_log(remote: Remote, follower: Follower, queue: _Queue, clock: Clock) -> None:
    """Every line appended to the log from the follower's offset on (exact offsets, resumes after a
    drop, follows rotation and truncation); what keeps it from reading goes on the queue."""
    path = follower.path
    faults = 0
    while True:
        try:
            async for item in follower.lines():
                if isinstance(item, LogEvent):
                    why = _problem(item)
                    if why is not None:
                        await queue.put(_Unreadable(why, clock()))
                    else:
                        logger.debug("startup log %s: %s %s", path, item.kind, item.detail)
                    continue
                for data in item.lines if isinstance(item, RawRun) else (item.data,):
                    await queue.put(_Line(_clean_line(data), clock()))
        except ConnectionDropped:
            with contextlib.suppress(RemoteError, asyncio.TimeoutError, TimeoutError):
                await remote.wait_connected(30)
        except RemoteError as exc:
            if remote.status.state is not ConnState.CONNECTED:  # the drop, not the log: follow again
                with contextlib.suppress(RemoteError, asyncio.TimeoutError, TimeoutError):
                    await remote.wait_connected(30)
            else:
                await queue.put(_Unreadable(f"cannot follow it: {exc}", clock()))
        except Exception as exc:  # a fault below us (a library's race): never a silent end, where
            # a healthy server would time out unseen ("ready line not seen"); tried again, then said
            faults += 1
            logger.debug("the startup log follower failed (%d)", faults, exc_info=True)
            if faults > FOLLOW_FAULTS:
                await queue.put(_Unreadable(f"cannot follow it: {type(exc).__name__}: {exc}", clock()))
                return
        # the follower keeps its offset, inode and check: a new start resumes exactly there
        await asyncio.sleep(FOLLOW_RETRY_S)


async def _poll_health(
    remote: Remote,
    port: int,
    path: str,
    queue: _Queue,
    clock: Clock,
    interval: float,
    poke: asyncio.Event | None = None,
    host: str = "127.0.0.1",
) -> None:
    """GET the health path every `interval` s through a port forward (or from the box if refused),
    at the address the server answers at on the box (`host`: its --host, issue 41);
    each answer's status within HEALTH_DEADLINE_S, its body never read (a health path that streams
    cannot hold the watch)."""
    import httpx

    from specdebug.core.httpread import get_bounded

    forward = client = None
    try:
        forward = await _open_forward(remote, port, host)
        if forward is not None:
            client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(2.0, connect=1.0))
        while True:
            t0 = clock()
            status: int | None = None
            try:
                if client is not None and forward is not None:
                    url = f"http://{url_host(forward.local_host)}:{forward.local_port}{path}"
                    status = (
                        await get_bounded(client, url, deadline_s=HEALTH_DEADLINE_S, read_body=False)
                    ).status
                else:
                    status = await health_on_box(remote, port, path, host=host)
            except Exception:  # down or unreachable: no status this round
                logger.debug("health check of port %s failed", port, exc_info=True)
                status = None
            await queue.put(_Health(status, clock()))
            wait = max(0.02, interval - (clock() - t0))
            if poke is None:
                await asyncio.sleep(wait)
            else:
                # asyncio.wait, not wait_for: 3.11's wait_for can swallow a cancel and hang the watch
                waiter = asyncio.ensure_future(poke.wait())
                try:
                    await asyncio.wait({waiter}, timeout=wait)
                finally:
                    waiter.cancel()
                poke.clear()
    finally:
        if client is not None:
            await client.aclose()
        if forward is not None:
            try:
                await forward.close()
            except Exception:  # the connection may be gone already
                logger.debug("closing the health forward failed", exc_info=True)


async def _open_forward(remote: Remote, port: int, host: str = "127.0.0.1") -> Any:
    """A local forward to the server's port; None where there can be none (the check then runs on
    the box).  A drop while opening it is waited out and the forward opened again."""
    for _ in range(3):
        try:
            return await remote.forward_local_port(port, host)
        except ConnectionDropped:
            with contextlib.suppress(RemoteError, asyncio.TimeoutError, TimeoutError):
                await remote.wait_connected(30)
        except Exception:  # no forward (refused, not connected): the check runs on the box instead
            logger.debug(
                "%s: no forward to port %s; health checked from the box", remote.name, port, exc_info=True
            )
            return None
    return None


async def _poll_group(
    remote: Remote, record: ServerRecord, queue: _Queue, clock: Clock, interval: float
) -> None:
    """Live PIDs of the server's process group (only successful listings count: a drop is not a death)."""
    while True:
        try:
            procs = await remote.processes(**group_filter(record.pgid, record.pid))
        except RemoteError:
            procs = None
        if procs is not None:
            await queue.put(_Group(sorted(p.pid for p in group_members(procs, record)), clock()))
        await asyncio.sleep(interval)


async def _watch_main_process(remote: Remote, record: ServerRecord, queue: _Queue, clock: Clock) -> None:
    """The main process watched itself: when it ends, one group listing at once (what is left of
    the group), then the news (a kill -9 is named in about QUIET_S, not after two listings)."""
    if not await main_process_exit(remote, record):
        return
    at = clock()
    with contextlib.suppress(RemoteError):
        procs = await remote.processes(**group_filter(record.pgid, record.pid))
        await queue.put(_Group(sorted(p.pid for p in group_members(procs, record)), clock()))
    await queue.put(_LeaderGone(at))


def _link_listener(queue: _Queue, clock: Clock) -> Callable[[ConnStatus], None]:
    """Status changes of the link as queue items: a drop (`reconnecting`) and the reconnect after
    it (`resumed`: every watcher picks up where it was), so the watch says what happened."""
    down = [False]

    def on_status(status: ConnStatus) -> None:
        if status.state is ConnState.RECONNECTING and not down[0]:
            down[0] = True
            queue.put_nowait(_Link("reconnecting", status.last_error or "connection lost", clock()))
        elif status.state is ConnState.CONNECTED and down[0]:
            down[0] = False
            queue.put_nowait(_Link("resumed", "reconnected; the watch goes on where it was", clock()))

    return on_status


async def _ticker(queue: _Queue, clock: Clock, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        await queue.put(_Tick(clock()))
