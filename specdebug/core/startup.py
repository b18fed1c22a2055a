"""Launch a server from a profile and say, the moment it is knowable, whether it came up.

The old way was a 15-second loop of fresh `ssh host curl /health` calls: up to 15 s late when the
server was ready and blind to a crash until the timeout.  Here three watchers run at once and feed
one pure state machine (`StartupTracker`):

* the log, followed from the byte offset it had at launch (`tail -c +N -F` on its own channel):
  startup phases in order, the ready line, error lines (pattern pack from `specdebug.core.logs`);
* the health endpoint, polled every 0.25 s through an SSH port forward (or from the box itself
  when forwarding is refused);
* the process group's liveness (`remote.processes()` every 0.5 s).

Ready = health 200 and (the kind's ready line seen, unless the profile disables that).  Failed =
an error line (then a short settle window collects the traceback up to its exception line, which
becomes the reason), or the group died, or timeout_s passed (the reason names the last phase).

The server is started detached: `setsid`, stdin from /dev/null, output appended to the log file,
so it lives on when specdebug quits or the connection drops.  The server side of the launch reports
its own PID, group and start time (never a racy process snapshot).  It is stopped by its recorded
process group after the box proved the group is still that one, never by a name (server_control).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import statistics
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from specdebug.capability import require_write
from specdebug.core import server_control
from specdebug.core.limits import cap_text
from specdebug.core.logs.hints import with_hint
from specdebug.core.profiles import Profile
from specdebug.core.secrets import Scrubber, mask_argv, mask_env, profile_secrets
from specdebug.core.server_control import LaunchRefused, ServerStatus, StopResult
from specdebug.core.servers import (
    ServerRecord,
    find_port_holder,
    group_members,
    health_on_box,
    load_record,
    save_record,
)
from specdebug.core.workers import group_filter
from specdebug.remote.api import ConnectionDropped, Remote, RemoteError
from specdebug.remote.shell import env_assignments

logger = logging.getLogger(__name__)

Clock = Callable[[], float]

# -- events --------------------------------------------------------------------------------


class ServerPhase(BaseModel):
    """A startup phase entered (first milestone line of it), with the time we saw it."""

    type: Literal["phase"] = "phase"
    name: str
    at: float  # unix seconds, local clock
    elapsed_s: float  # since launch
    line: str | None = None


class LogLine(BaseModel):
    type: Literal["log"] = "log"
    text: str
    at: float


class HealthChange(BaseModel):
    type: Literal["health"] = "health"
    status: int | None  # HTTP status; None = no answer (refused, timeout)
    at: float


class GroupChange(BaseModel):
    type: Literal["group"] = "group"
    pids: list[int]
    at: float


class Launched(BaseModel):
    type: Literal["launched"] = "launched"
    record: ServerRecord


class Verdict(BaseModel):
    """How a startup ended: ready, or failed with the reason and the log lines around it."""

    type: Literal["verdict"] = "verdict"
    verdict: Literal["ready", "failed"]
    profile: str = ""
    fingerprint: str = ""
    phases: list[ServerPhase] = Field(default_factory=list)
    last_phase: str | None = None
    ready_at: float | None = None
    at: float = 0.0
    elapsed_s: float = 0.0
    reason: str | None = None
    error_kind: str | None = None  # pattern kind (oom, nccl, scheduler_exception...), exited, timeout
    excerpt: list[str] = Field(default_factory=list)
    pid: int | None = None
    pgid: int | None = None
    log_file: str | None = None

    def summary(self) -> dict[str, Any]:
        """The headless JSON shape (issue: verdict, phases[{name, at, elapsed_s}], ready_at, ...)."""
        return {
            "verdict": self.verdict,
            "profile": self.profile,
            "fingerprint": self.fingerprint,
            "phases": [{"name": p.name, "at": p.at, "elapsed_s": round(p.elapsed_s, 3)} for p in self.phases],
            "last_phase": self.last_phase,
            "ready_at": self.ready_at,
            "elapsed_s": round(self.elapsed_s, 3),
            "reason": self.reason,
            "error_kind": self.error_kind,
            "excerpt": self.excerpt,
            "pid": self.pid,
            "pgid": self.pgid,
            "log_file": self.log_file,
        }


StartupEvent = Annotated[
    ServerPhase | LogLine | HealthChange | GroupChange | Launched | Verdict, Field(discriminator="type")
]


# -- the pure state machine ------------------------------------------------------------------

EXC_LINE_RE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?(?:[A-Za-z_]\w*)?(?:Error|Exception|Exit|Interrupt)(?::\s?.*)?$"
)
TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\)")
_PREFIX_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] ")
EXCERPT_BEFORE = 5
EXCERPT_MAX = 80


def _packs() -> dict[str, Any]:
    try:
        from specdebug.core.logs.patterns import PACKS
    except ImportError:  # pragma: no cover - the logs pack ships with specdebug
        return {}
    return PACKS


@dataclass
class _Failing:
    kind: str
    started: float
    deadline: float
    trigger_index: int | None = None
    trigger_msg: str | None = None
    reason: str | None = None
    reason_at: float = 0.0
    last_line_at: float = 0.0
    last_index: int | None = None


class StartupTracker:
    """Turns log lines, health answers and group liveness into phases and one Verdict.

    Pure (no I/O, time passed in) so every rule is unit-tested with fake inputs; `watch` feeds it.
    """

    SETTLE_S = 1.2  # longest wait after an error line for the traceback's exception line
    QUIET_S = 0.3  # after the exception line: finish once the log is quiet this long
    EXIT_SETTLE_S = 0.5  # after the group died: let the last log lines arrive

    def __init__(
        self,
        *,
        kind: str,
        started_at: float,
        timeout_s: float,
        require_ready_line: bool = True,
        profile: str = "",
        fingerprint: str = "",
        pid: int | None = None,
        pgid: int | None = None,
        log_file: str | None = None,
        deadline: float | None = None,
    ) -> None:
        self.pack = _packs().get(kind)
        self.require_ready_line = require_ready_line and self.pack is not None
        self.started_at = started_at
        self.timeout_s = timeout_s
        self.deadline = deadline if deadline is not None else started_at + timeout_s
        self.meta: dict[str, Any] = {
            "profile": profile,
            "fingerprint": fingerprint,
            "pid": pid,
            "pgid": pgid,
            "log_file": log_file,
        }
        self.phases: list[ServerPhase] = [ServerPhase(name="launch", at=started_at, elapsed_s=0.0)]
        self._seen_phases = {"launch"}
        self.lines: deque[tuple[int, str]] = deque(maxlen=400)
        self.n = 0
        self.ready_line_at: float | None = None
        self.health_ok_at: float | None = None
        self.health_status: int | None = None
        self._health_polled = False
        self.pids: list[int] | None = None
        self._empty_listings = 0
        self.last_progress_at = started_at
        self.failing: _Failing | None = None
        self.verdict: Verdict | None = None

    # inputs ---------------------------------------------------------------------------------

    def feed_line(self, text: str, at: float) -> list[Any]:
        out: list[Any] = [LogLine(text=text, at=at)]
        self.lines.append((self.n, text))
        index = self.n
        self.n += 1
        if self.verdict is not None:
            return out
        msg = self.message(text)
        if self.failing is not None:
            self.failing.last_line_at = at
            self.failing.last_index = index
            if EXC_LINE_RE.match(msg):
                self.failing.reason, self.failing.reason_at = msg, at
            return out
        kind = self.error_kind(text, msg)
        if kind is not None:
            self.failing = _Failing(
                kind=kind,
                started=at,
                deadline=at + self.SETTLE_S,
                trigger_index=index,
                trigger_msg=msg,
                last_line_at=at,
                last_index=index,
            )
            if EXC_LINE_RE.match(msg):
                self.failing.reason, self.failing.reason_at = msg, at
            return out
        phase = self.pack.phase_of(text) if self.pack is not None else None
        if phase and not phase.endswith("_done") and phase not in self._seen_phases:
            self._seen_phases.add(phase)
            ev = ServerPhase(name=phase, at=at, elapsed_s=at - self.started_at, line=text)
            self.phases.append(ev)
            self.last_progress_at = at
            out.append(ev)
        elif phase:
            self.last_progress_at = at
        if self.pack is not None and self.ready_line_at is None and self.pack.is_ready(text):
            self.ready_line_at = at
        out.extend(self._check_ready(at))
        return out

    def health(self, status: int | None, at: float) -> list[Any]:
        out: list[Any] = []
        if status != self.health_status or not self._health_polled:
            self._health_polled = True
            self.health_status = status
            out.append(HealthChange(status=status, at=at))
        if status == 200 and self.health_ok_at is None:
            self.health_ok_at = at
        if self.verdict is None:
            out.extend(self._check_ready(at))
        return out

    def group(self, pids: list[int], at: float) -> list[Any]:
        out: list[Any] = []
        if pids != self.pids:
            self.pids = list(pids)
            out.append(GroupChange(pids=list(pids), at=at))
        self._empty_listings = 0 if pids else self._empty_listings + 1
        # two empty listings in a row: one listing can miss a process that is mid-exec
        if self._empty_listings >= 2 and self.verdict is None:
            if self.failing is None:
                self.failing = _Failing(kind="exited", started=at, deadline=at + self.EXIT_SETTLE_S)
            else:
                self.failing.deadline = min(self.failing.deadline, at + self.EXIT_SETTLE_S)
        return out

    def tick(self, at: float) -> list[Any]:
        if self.verdict is not None:
            return []
        f = self.failing
        if f is not None:
            quiet = f.reason is not None and at - max(f.reason_at, f.last_line_at) >= self.QUIET_S
            if quiet or at >= f.deadline:
                return [self._fail(at)]
            return []
        if at >= self.deadline:
            return [self._timeout(at)]
        return []

    # helpers --------------------------------------------------------------------------------

    def message(self, text: str) -> str:
        if self.pack is not None:
            return self.pack.message(text).strip()
        return _PREFIX_RE.sub("", text).strip()

    def error_kind(self, text: str, msg: str) -> str | None:
        if self.pack is not None:
            kind = self.pack.error_kind(text)
            if kind:
                return kind
        if TRACEBACK_RE.search(msg):
            return "traceback"
        if self.pack is None and EXC_LINE_RE.match(msg):
            return "exception"
        return None

    @property
    def last_phase(self) -> str:
        return self.phases[-1].name

    def _check_ready(self, at: float) -> list[Verdict]:
        if self.failing is not None or self.health_ok_at is None:
            return []
        if self.require_ready_line and self.ready_line_at is None:
            return []
        ready_at = max(self.health_ok_at, self.ready_line_at or 0.0)
        if "ready" not in self._seen_phases:
            self._seen_phases.add("ready")
            self.phases.append(ServerPhase(name="ready", at=ready_at, elapsed_s=ready_at - self.started_at))
        self.verdict = Verdict(
            verdict="ready",
            phases=list(self.phases),
            last_phase="ready",
            ready_at=ready_at,
            at=at,
            elapsed_s=ready_at - self.started_at,
            **self.meta,
        )
        return [self.verdict]

    def _fail(self, at: float) -> Verdict:
        f = self.failing
        assert f is not None
        if f.kind == "exited":
            last = next((t for _, t in reversed(self.lines) if t.strip()), None)
            reason = f"server exited (process group {self.meta['pgid']} is gone)"
            if last:
                reason += f"; last log line: {self.message(last)}"
            excerpt = [t for _, t in list(self.lines)[-20:]]
        else:
            reason = f.reason or f.trigger_msg or f.kind
            first = (f.trigger_index or 0) - EXCERPT_BEFORE
            excerpt = [t for i, t in self.lines if i >= first]
            if len(excerpt) > EXCERPT_MAX:
                head, tail = excerpt[:20], excerpt[-(EXCERPT_MAX - 21) :]
                excerpt = [*head, f"[... {len(excerpt) - len(head) - len(tail)} lines ...]", *tail]
        return self._finish("failed", at, reason, f.kind, excerpt)

    def _timeout(self, at: float) -> Verdict:
        waited = at - self.started_at
        reason = f"timed out after {waited:.0f} s in phase {self.last_phase}"
        reason += f" (no progress for {at - self.last_progress_at:.0f} s"
        reason += f", health {self.health_status if self.health_status else 'not answering'}"
        if self.require_ready_line:
            reason += ", ready line " + ("seen" if self.ready_line_at else "not seen")
        reason += ")"
        return self._finish("failed", at, reason, "timeout", [t for _, t in list(self.lines)[-20:]])

    def _finish(
        self, verdict: Literal["ready", "failed"], at: float, reason: str, kind: str, excerpt: list[str]
    ) -> Verdict:
        self.verdict = Verdict(
            verdict=verdict,
            phases=list(self.phases),
            last_phase=self.last_phase,
            at=at,
            elapsed_s=at - self.started_at,
            reason=with_hint(reason, excerpt) if verdict == "failed" else reason,
            error_kind=kind,
            excerpt=excerpt,
            **self.meta,
        )
        return self.verdict


# -- history (ETA) ---------------------------------------------------------------------------


class StartupHistory(BaseModel):
    """What earlier successful startups of a profile took (from the journal's verdict events)."""

    profile: str
    runs: int
    expected_total_s: float
    phase_starts: dict[str, float]  # median elapsed_s at which each phase began

    def eta(self, elapsed_s: float) -> float:
        return max(0.0, self.expected_total_s - elapsed_s)


def startup_history(
    events: list[dict[str, Any]], profile: str, fingerprint: str | None = None
) -> StartupHistory | None:
    """Median startup time of earlier ready verdicts of `profile` (same fingerprint when given).

    Attaching to a running server is not a startup (its phases all read 0 s): left out.  A verdict
    belongs to the launch with its PID and start time (verdict time - elapsed), so a later real
    launch that happens to get the same PID still counts."""
    attached = [
        (e.get("pid"), e.get("started_at")) for e in events if e.get("kind") == "launch" and e.get("attached")
    ]

    def was_attach(v: dict[str, Any]) -> bool:
        if v.get("attached"):
            return True
        start = float(v["at"]) - float(v.get("elapsed_s") or 0) if v.get("at") else None
        return any(
            pid == v.get("pid") and (at is None or start is None or abs(float(at) - start) < 1.0)
            for pid, at in attached
        )

    runs = [
        e
        for e in events
        if e.get("kind") == "verdict"
        and e.get("verdict") == "ready"
        and e.get("profile") == profile
        and not was_attach(e)
        and (fingerprint is None or e.get("fingerprint") in (None, "", fingerprint))
    ]
    if not runs:
        return None
    totals = [float(e.get("elapsed_s") or 0) for e in runs]
    starts: dict[str, list[float]] = {}
    for e in runs:
        for p in e.get("phases") or []:
            starts.setdefault(p["name"], []).append(float(p.get("elapsed_s") or 0))
    return StartupHistory(
        profile=profile,
        runs=len(runs),
        expected_total_s=statistics.median(totals),
        phase_starts={k: statistics.median(v) for k, v in starts.items()},
    )


# -- launch ------------------------------------------------------------------------------------

# Positional parameters only: $1 log path, $2 cwd, $3 the report script, then the command (env K=V
# ... argv).  `~` in the
# log path or cwd is expanded here, on the box.  The server side reports its own identity: after
# setsid, the child shell reads /proc/$$/stat (PID, PGID, session, start time), checks that it leads
# its own group and session, writes that line to fd 3 (the launcher's stdout, which the client
# reads), closes fd 3 and execs the server, so the PID, the group and the start time stay the
# server's.  Nothing here depends on when a process snapshot happens to be taken.
LAUNCH_REPORT = r"""
read -r st </proc/$$/stat || { echo noid >&3; exit 125; }
leads() { [ "$1" = "$5" ] && [ "$1" = "$6" ]; }
leads $st || { printf 'notleader %s\n' "$st" >&3; exit 125; }
printf 'server %s\n' "$st" >&3
exec 3>&-
exec "$@"
"""
LAUNCH_SCRIPT = r"""
log=$1; dir=$2; report=$3; shift 3
case $log in "~") log=$HOME;; "~/"*) log=$HOME/${log#"~/"};; esac
case $log in /*) ;; *) log=$PWD/$log;; esac
if [ -n "$dir" ]; then
  case $dir in "~") dir=$HOME;; "~/"*) dir=$HOME/${dir#"~/"};; esac
  cd -- "$dir" || exit 4
fi
mkdir -p -- "$(dirname -- "$log")" || exit 3
: >>"$log" || exit 3
size=$(wc -c <"$log")
printf 'size %s\nlog %s\n' "$size" "$log"
if command -v setsid >/dev/null 2>&1; then
  set -- setsid sh -c "$report" sh "$@"
else
  set -- python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' sh -c "$report" sh "$@"
fi
"$@" 3>&1 </dev/null >>"$log" 2>&1 &
"""
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
    """Run the launch script on the box: the server starts detached and reports who it is."""
    res = await remote.run(launch_argv(profile, launch_id), timeout=30)
    if not res.ok:
        what = {3: "cannot create the log file", 4: "cannot cd to the working directory"}.get(
            res.exit_status or 0, "launch failed"
        )
        raise RemoteError(f"{what}: {res.err.strip() or res.out.strip() or res.exit_status}")
    try:
        return parse_launch_report(res.out)
    except (ValueError, IndexError) as exc:
        raise RemoteError(f"launch: unreadable report from the box: {res.out.strip()[:300]!r}") from exc


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
            )
    holder = await find_port_holder(remote, profile.server.port)
    if holder.listening:
        raise LaunchRefused(f"not launching {profile.name}: {holder.describe()}", holder=holder)


async def launch(
    remote: Remote, profile: Profile, *, journal: Any = None, clock: Clock = time.time, check: bool = True
) -> ServerRecord:
    """Start the profile's server detached on the box and record it (state file + journal)."""
    require_write("launch", remote, journal)
    if check:
        await check_can_launch(remote, profile)
    started = clock()
    launch_id = uuid.uuid4().hex
    got = await start_detached(remote, profile, launch_id)
    record = ServerRecord(
        profile=profile.name,
        host=remote.name,
        fingerprint=profile.fingerprint(),
        pid=got.pid,
        pgid=got.pgid,
        start_ticks=got.start_ticks,
        pid_start_ticks=got.start_ticks,
        launch_id=launch_id,
        port=profile.server.port,
        log_file=got.log_file,
        log_offset=got.log_offset,
        started_at=started,
        argv=mask_argv(profile.server.argv, profile_secrets(profile)),
        env=mask_env(launch_env(profile), profile_secrets(profile)),
        cwd=profile.server.cwd,
    )
    await save_record(remote, record)
    if journal is not None:
        journal.append("launch", record.model_dump(mode="json"), sync=True)
    return record


# -- watch -------------------------------------------------------------------------------------


async def watch(
    remote: Remote,
    record: ServerRecord,
    profile: Profile,
    *,
    timeout_s: float | None = None,
    deadline: float | None = None,
    journal: Any = None,
    clock: Clock = time.time,
    health_interval: float = 0.25,
    group_interval: float = 0.5,
    tick_interval: float = 0.1,
) -> AsyncIterator[Any]:
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
    )
    if deadline is None and timeout_s is not None:
        tracker.deadline = record.started_at + timeout_s
    scrub = Scrubber.for_profile(profile)
    queue: asyncio.Queue[tuple[str, tuple]] = asyncio.Queue()
    poke = asyncio.Event()  # set when the ready line arrives: ask /health now, not at the next poll
    tasks = [
        asyncio.create_task(_follow_log(remote, record.log_file, record.log_offset, queue, clock)),
        asyncio.create_task(
            _poll_health(remote, record.port, profile.ready.health, queue, clock, health_interval, poke)
        ),
        asyncio.create_task(_poll_group(remote, record, queue, clock, group_interval)),
        asyncio.create_task(_ticker(queue, clock, tick_interval)),
    ]
    try:
        while True:
            kind, payload = await queue.get()
            if kind == "line":
                events = tracker.feed_line(scrub(payload[0]), payload[1])  # secrets never reach an event
                if tracker.ready_line_at is not None and tracker.health_ok_at is None:
                    poke.set()
            elif kind == "health":
                events = tracker.health(*payload)
            elif kind == "group":
                events = tracker.group(*payload)
            else:
                events = tracker.tick(*payload)
            for ev in events:
                if isinstance(ev, Verdict) and journal is not None:
                    journal.append("verdict", ev.model_dump(mode="json"), sync=True)
                yield ev
                if isinstance(ev, Verdict):
                    return
    finally:
        for t in tasks:
            t.cancel()
        # bounded: a watcher stuck in library code must not keep the caller from its verdict
        await asyncio.wait(tasks, timeout=5)


async def launch_and_watch(
    remote: Remote,
    profile: Profile,
    *,
    journal: Any = None,
    timeout_s: float | None = None,
    clock: Clock = time.time,
) -> AsyncIterator[Any]:
    """Launch, then watch: a Launched event, phases/log/health events, and the Verdict."""
    record = await launch(remote, profile, journal=journal, clock=clock)
    yield Launched(record=record)
    async for ev in watch(remote, record, profile, timeout_s=timeout_s, journal=journal, clock=clock):
        yield ev


def _clean_line(raw: bytes) -> str:
    text = cap_text(raw.decode("utf-8", "replace").rstrip("\n"))  # excerpts stay bounded
    if "\r" in text:  # progress bars redraw with \r: keep what the terminal would show last
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return text


async def _follow_log(remote: Remote, path: str, offset: int, queue: asyncio.Queue, clock: Clock) -> None:
    """Every line appended to the log from `offset` on; resumes at the same byte after a drop."""
    while True:
        try:
            async with remote.stream(
                ["tail", "-c", f"+{offset + 1}", "-F", "--", path], binary=True
            ) as stream:
                async for raw in stream:
                    offset += len(raw)
                    await queue.put(("line", (_clean_line(raw), clock())))
        except ConnectionDropped:
            with contextlib.suppress(RemoteError, asyncio.TimeoutError, TimeoutError):
                await remote.wait_connected(30)
        except RemoteError:
            pass
        await asyncio.sleep(0.5)


async def _poll_health(
    remote: Remote,
    port: int,
    path: str,
    queue: asyncio.Queue,
    clock: Clock,
    interval: float,
    poke: asyncio.Event | None = None,
) -> None:
    """GET the health path every `interval` s through a port forward (or from the box if refused)."""
    import httpx

    forward = client = None
    try:
        try:
            forward = await remote.forward_local_port(port)
        except Exception:  # no forward (refused, not connected): the check runs on the box instead
            logger.debug(
                "%s: no forward to port %s; health checked from the box", remote.name, port, exc_info=True
            )
        if forward is not None:
            client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(2.0, connect=1.0))
        while True:
            t0 = clock()
            status: int | None = None
            try:
                if client is not None and forward is not None:
                    resp = await client.get(f"http://127.0.0.1:{forward.local_port}{path}")
                    status = resp.status_code
                else:
                    status = await health_on_box(remote, port, path)
            except Exception:  # down or unreachable: no status this round
                logger.debug("health check of port %s failed", port, exc_info=True)
                status = None
            await queue.put(("health", (status, clock())))
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


async def _poll_group(
    remote: Remote, record: ServerRecord, queue: asyncio.Queue, clock: Clock, interval: float
) -> None:
    """Live PIDs of the server's process group (only successful listings count: a drop is not a death)."""
    while True:
        try:
            procs = await remote.processes(**group_filter(record.pgid, record.pid))
        except RemoteError:
            procs = None
        if procs is not None:
            await queue.put(("group", (sorted(p.pid for p in group_members(procs, record)), clock())))
        await asyncio.sleep(interval)


async def _ticker(queue: asyncio.Queue, clock: Clock, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        await queue.put(("tick", (clock(),)))


# stop / status / attach live in server_control (every signal sent by specdebug is decided there)
stop = server_control.stop
stop_record = server_control.stop_record
status = server_control.status
liveness = server_control.liveness
attach = server_control.attach
__all__ = [
    "LaunchRefused",
    "ServerStatus",
    "StopResult",
    "attach",
    "liveness",
    "status",
    "stop",
    "stop_record",
]
