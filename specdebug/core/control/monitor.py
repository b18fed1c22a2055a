"""What a front end knows about the profile's server, and the liveness watch after ready.

The startup pane used to hold this state machine and its monitor loop; a bisection run (or a
second seat) needs the same without a screen.  `ServerMonitor` is pure (no I/O, time passed in):
startup events, a found status, stop results and liveness answers go in; the state and the
changes worth telling others come out.  `watch_liveness` is its async driver after ready.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from specdebug.core.control.actions import ServerStatus
from specdebug.core.control.events import (
    NOTHING_RUNNING,
    ConnectionNote,
    GroupChange,
    HealthChange,
    Launched,
    LogLine,
    LogProblem,
    ServerPhase,
    ServerState,
    StartupEvent,
    Verdict,
)
from specdebug.core.control.records import ServerRecord, StopResult, load_record, main_process_exit
from specdebug.core.control.tracker import leader_died
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.remote.api import Remote, RemoteError

LOG_LINES_KEPT = 500
MONITOR_S = 0.25  # one helper round trip per server: a dead server is seen within about this
EXITED_MESSAGE = "the server's process group is gone (crashed or killed outside specdebug)"
RECORD_POLL_S = 1.0  # how soon a relaunch by another session is followed (one box op per poll)

Liveness = Callable[[Remote, ServerRecord, Profile], Awaitable[tuple[list[int], int | None]]]


@dataclass(frozen=True)
class StateChanged:
    """A change other front ends must hear of (they refollow logs, recheck workers...)."""

    state: ServerState
    record: ServerRecord | None


class ServerMonitor:
    """The profile's server as one front end sees it: folded from events, never from a screen."""

    def __init__(self) -> None:
        self.log_lines: deque[str] = deque(maxlen=LOG_LINES_KEPT)
        self.reset_run(ServerState.IDLE)

    def reset_run(self, state: ServerState) -> None:
        """A new run (or none): forget the last one's record, phases and verdict."""
        self.state = state
        self.record: ServerRecord | None = None
        self.found: ServerStatus | None = None  # running when we looked: not watched from launch
        self.phases: list[ServerPhase] = []
        self.verdict: Verdict | None = None
        self.health: int | None = None
        self.pids: list[int] = []
        self.message = ""
        self.log_problem: str | None = None
        self.relaunched: ServerRecord | None = None  # the box's record names a newer run than ours

    # inputs ---------------------------------------------------------------------------------

    def apply(self, ev: StartupEvent | StopResult) -> StateChanged | None:
        """Fold one core event in; returns the change to announce, if any."""
        if isinstance(ev, Launched):
            self.record, self.found, self.verdict, self.log_problem = ev.record, None, None, None
            self.state = ServerState.STARTING
            self.phases = [ServerPhase(name="launch", at=ev.record.started_at, elapsed_s=0.0)]
            self.log_lines.clear()
        elif isinstance(ev, ServerPhase):
            self.phases.append(ev)
        elif isinstance(ev, LogLine):
            self.log_lines.append(visible(ev.text, tab=" "))
        elif isinstance(ev, LogProblem):
            self.log_problem = ev.detail
        elif isinstance(ev, ConnectionNote):  # a drop is said, and the watch goes on after it
            self.message = (
                f"connection lost ({visible(ev.detail)}): reconnecting, the watch goes on after it"
                if ev.state == "reconnecting"
                else "reconnected: the watch resumed where it was"
            )
        elif isinstance(ev, HealthChange):
            self.health = ev.status
        elif isinstance(ev, GroupChange):
            self.pids = ev.pids
        elif isinstance(ev, Verdict):
            self.verdict = ev
            self.phases = list(ev.phases)
            self.state = ServerState(ev.verdict)
            return StateChanged(self.state, self.record)
        elif isinstance(ev, StopResult):
            self.state = ServerState.STOPPED if ev.stopped else ServerState.FAILED
            self.message = ev.message
            if ev.stopped:
                self.pids, self.health = [], None
            return StateChanged(self.state, self.record)
        return None

    def apply_status(self, st: ServerStatus) -> StateChanged | None:
        """What `status` found: a running server is RUNNING (READY when healthy) with its PID and
        log, without a launch or an attach (nothing is written)."""
        self.reset_run(ServerState.IDLE)
        if st.state == "running" and st.record is not None:
            self.record, self.pids, self.health, self.found = st.record, list(st.pids), st.health, st
            self.state = ServerState.READY if st.health == 200 else ServerState.RUNNING
        elif st.state == "exited" and st.record is not None:
            self.message = f"the last server (PID {st.record.pid}) is gone: it exited or was killed"
        if self.state is ServerState.IDLE and st.port_holder is not None and st.port_holder.listening:
            self.message = (self.message + "\n" if self.message else "") + st.port_holder.describe()
        return StateChanged(self.state, self.record) if self.state is ServerState.READY else None

    def gone(self, pids: list[int]) -> bool:
        """This liveness answer says the run ends: its group is gone, or its main process."""
        leader = self.record.pid if self.record is not None else None
        return not pids or (leader is not None and leader not in pids)

    def liveness(
        self, pids: list[int], health: int | None, record_now: ServerRecord | None = None
    ) -> StateChanged | None:
        """One liveness answer after ready (or found running).  `record_now`: the profile's record
        as the box holds it now, read once the group went: its stop mark says another specdebug
        session stopped this run, a newer run in it says the profile was relaunched elsewhere;
        without either the run died (killed or crashed)."""
        if self.state not in (ServerState.READY, ServerState.RUNNING):
            return None  # stopped or relaunched meanwhile
        self.pids, self.health = pids, health
        if self.gone(pids):
            return self._ended(pids, record_now)
        if self.state is ServerState.RUNNING and health == 200:
            self.state = ServerState.READY
            return StateChanged(self.state, self.record)
        return None

    def leftover(self, pids: list[int], health: int | None) -> bool:
        """After the run ended by itself with processes left (its main process goes first, its
        workers a moment later or never): the group as the box lists it now.  True while some remain;
        a stop or a new run meanwhile makes it a no-op (False)."""
        if self.state is not ServerState.EXITED:
            return False
        self.pids, self.health = pids, health
        leader = self.record.pid if self.record is not None else None
        self.message = EXITED_MESSAGE if leader is None else leader_died(leader, pids)
        return bool(pids)

    def _ended(self, pids: list[int], record_now: ServerRecord | None) -> StateChanged:
        ours, self.found = self.record, None
        elsewhere = self.ended_elsewhere(record_now)
        if elsewhere is not None:
            self.state, self.message = ServerState.STOPPED, elsewhere
            if not pids:
                self.health = None
            return StateChanged(self.state, ours)
        self.state = ServerState.EXITED
        leader = ours.pid if ours is not None else None
        self.message = EXITED_MESSAGE if not pids or leader is None else leader_died(leader, pids)
        return StateChanged(self.state, ours)

    def ended_elsewhere(self, record_now: ServerRecord | None) -> str | None:
        """Why the watched run ended, when the box's record says another session ended it (or ran
        a newer one): the sentence, else None (sets `relaunched` to the newer run)."""
        ours = self.record
        if ours is None or record_now is None:
            return None
        if record_now.same_run(ours):
            return record_now.stopped_elsewhere()
        if record_now.stopped_at is not None:
            return None  # a newer run, already over: it says nothing of how ours ended
        self.relaunched = record_now
        by = record_now.launched_by
        return (
            f"relaunched by another specdebug session ({by.describe() if by else 'who: not recorded'}): "
            f"now PID {record_now.pid}; PID {ours.pid} ended before it"
        )

    def follow(self, record: ServerRecord, note: str) -> None:
        """Watch a run another session launched, from its launch (its phases replay from its log)."""
        self.apply(Launched(record=record))
        self.message = note

    # questions ------------------------------------------------------------------------------

    def nothing_running(self) -> bool:
        return self.state in NOTHING_RUNNING

    def alive(self) -> bool:
        """As far as we know the server is alive: a failed startup only while its processes are there."""
        return self.state in (
            ServerState.READY,
            ServerState.RUNNING,
            ServerState.STARTING,
            ServerState.STOPPING,
        ) or (self.state is ServerState.FAILED and bool(self.pids))

    def elapsed(self, now: float) -> float | None:
        if self.verdict is not None:
            return self.verdict.elapsed_s
        if self.record is None:
            return None
        return max(0.0, now - self.record.started_at)


async def watch_liveness(
    monitor: ServerMonitor,
    remote: Remote,
    record: ServerRecord,
    profile: Profile,
    *,
    liveness: Liveness,
    interval: float = MONITOR_S,
) -> AsyncIterator[StateChanged | None]:
    """After ready (or found running), keep asking: a server that dies later must not keep saying
    READY, and one found still starting turns READY when its health answers.  Yields after each
    answer (the change, or None) while the monitor says ready or running, then (it exited with
    processes left) one per re-ask of them until none is left."""
    # the box watches the main PID itself: its end asks for liveness at once, not at the next interval
    leader = asyncio.create_task(main_process_exit(remote, record))
    try:
        while monitor.state in (ServerState.READY, ServerState.RUNNING):
            if leader.done():
                await asyncio.sleep(interval)
            else:
                await asyncio.wait({leader}, timeout=interval)
            try:
                pids, health = await liveness(remote, record, profile)
                now = await record_now(remote, record.profile) if monitor.gone(pids) else None
            except RemoteError:
                continue  # connection trouble is the header's news; try again
            yield monitor.liveness(pids, health, now)
        ended = lambda: [monitor] if monitor.pids and monitor.state is ServerState.EXITED else []  # noqa: E731
        async for _ in leftovers(ended, interval):
            try:
                pids, health = await liveness(remote, record, profile)
            except RemoteError:
                continue
            monitor.leftover(pids, health)
            yield None
    finally:
        leader.cancel()


LEFTOVER_MAX_S = 5.0  # the slowest re-ask of what a dead run left (a worker that never exits)


async def leftovers(left: Callable[[], list[ServerMonitor]], interval: float) -> AsyncIterator[None]:
    """While `left()` names monitors of an ended run whose processes remain: one tick per re-ask of
    their group (the main process exits first, its workers a moment later, or hang on), every
    `interval`, slower (up to LEFTOVER_MAX_S) while nothing changes: the screen never keeps a PID
    that is gone, and a worker that hangs on stays in view."""
    wait, last = interval, None
    while monitors := left():
        await asyncio.sleep(wait)
        yield None
        now = [tuple(m.pids) for m in monitors]
        wait = interval if now != last else min(wait * 2, LEFTOVER_MAX_S)
        last = now


async def record_now(remote: Remote, profile_name: str) -> ServerRecord | None:
    """The profile's record on the box now (None: none, or not readable): the evidence of who ended a run."""
    try:
        return await load_record(remote, profile_name)
    except (RemoteError, ValueError):
        return None


async def record_changes(
    remote: Remote, profile_name: str, *, interval: float = RECORD_POLL_S
) -> AsyncIterator[ServerRecord | None]:
    """The profile's record on the box each time it changes (a launch, a stop, a relaunch by
    another session); the first read is the baseline and is not yielded.  Reads only; a read that
    fails is tried again next time."""
    last: str | None = None
    first = True
    while True:
        try:
            rec = await load_record(remote, profile_name)
        except (RemoteError, ValueError):
            await asyncio.sleep(interval)
            continue
        text = rec.model_dump_json() if rec is not None else ""
        if not first and text != last:
            yield rec
        first, last = False, text
        await asyncio.sleep(interval)
