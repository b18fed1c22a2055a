"""The pure startup state machine and the startup history (ETA).

No I/O and time passed in: log lines, health answers and group liveness go in, phases and one
Verdict come out, so every rule is unit-tested without a box.
"""

from __future__ import annotations

import re
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from specdebug.core.control.cause import EXC_LINE_RE, root_cause
from specdebug.core.control.events import GroupChange, HealthChange, LogLine, LogProblem, ServerPhase, Verdict
from specdebug.core.control.records import ServerRecord
from specdebug.core.logs.hints import with_hint
from specdebug.core.model import Model
from specdebug.core.records import JournalRecord, LaunchRecord, VerdictRecord

if TYPE_CHECKING:
    from specdebug.engines.pack import Pack

TrackerEvent = ServerPhase | LogLine | HealthChange | GroupChange | LogProblem | Verdict

# -- the pure state machine ------------------------------------------------------------------

TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\)")
_PREFIX_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] ")
EXCERPT_BEFORE = 5
EXCERPT_MAX = 80
EXITED_CAUSE_LINES = 40  # the server exited without an error line seen: where to look for its cause


def _packs() -> dict[str, Pack]:
    from specdebug.engines import PACKS

    return PACKS


@dataclass(frozen=True)
class RunIdentity:
    """Who the watched server is: copied into its Verdict."""

    profile: str = ""
    fingerprint: str = ""
    pid: int | None = None
    pgid: int | None = None
    log_file: str | None = None


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
    exit_wait_until: float | None = None  # the error is told: how long its process group may take to exit


def leader_died(pid: int, left: list[int]) -> str:
    """The reason when the server's main process is gone before its children (or with them: left empty)."""
    if not left:
        return f"server's main process {pid} died (killed or crashed)"
    shown = ", ".join(str(p) for p in left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
    return f"server's main process {pid} died (killed or crashed); {len(left)} of its processes still exiting: {shown}"


class StartupTracker:
    """Turns log lines, health answers and group liveness into phases and one Verdict.

    Pure (no I/O, time passed in) so every rule is unit-tested with fake inputs; `watch` feeds it.
    """

    SETTLE_S = 1.2  # longest wait after an error line for the traceback's exception line
    QUIET_S = 0.3  # after the exception line: finish once the log is quiet this long
    EXIT_SETTLE_S = 0.5  # after the group died: let the last log lines arrive
    # after a fatal error the server's main process still runs its exit (real vLLM 0.32 on a CPU:
    # 2.2 s from the traceback to the zombie, idle); a verdict given before would leave a relaunch
    # refused as "already running".  So the verdict waits for the group to go, this long at most,
    # and says when it did not
    EXIT_WAIT_S = 15.0
    LISTENER_RECHECK_S = 1.0  # another process holds the port: how often to ask again

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
        check_listener: bool = False,
    ) -> None:
        self.pack = _packs().get(kind)
        self.require_ready_line = require_ready_line and self.pack is not None
        self.started_at = started_at
        self.timeout_s = timeout_s
        self.deadline = deadline if deadline is not None else started_at + timeout_s
        self.who = RunIdentity(
            profile=profile, fingerprint=fingerprint, pid=pid, pgid=pgid, log_file=log_file
        )
        self.log_problem: str | None = None  # why the log cannot be followed (None: it can)
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
        self._leader_seen = False
        self.last_progress_at = started_at
        self.failing: _Failing | None = None
        self.verdict: Verdict | None = None
        # a health answer is the server's only when its port's listener is of the launched group
        # (issue 41: another process on the port answered): the watch asks the box and says
        self.check_listener = check_listener
        self.listener_ours_at: float | None = None  # when the listener was last found ours
        self.listener_checked_at: float | None = None
        self.foreign_listener: str | None = None  # who answered instead (None: nobody else seen)

    # inputs ---------------------------------------------------------------------------------

    def feed_line(self, text: str, at: float) -> list[TrackerEvent]:
        out: list[TrackerEvent] = [LogLine(text=text, at=at)]
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

    def health(self, status: int | None, at: float) -> list[TrackerEvent]:
        out: list[TrackerEvent] = []
        if status != self.health_status or not self._health_polled:
            self._health_polled = True
            self.health_status = status
            out.append(HealthChange(status=status, at=at))
        if status == 200 and self.health_ok_at is None:
            self.health_ok_at = at
        if self.verdict is None:
            out.extend(self._check_ready(at))
        return out

    def group(self, pids: list[int], at: float) -> list[TrackerEvent]:
        out: list[TrackerEvent] = []
        if pids != self.pids:
            self.pids = list(pids)
            out.append(GroupChange(pids=list(pids), at=at))
        self._empty_listings = 0 if pids else self._empty_listings + 1
        leader = self.who.pid
        if leader is not None and leader in pids:
            self._leader_seen = True
        elif (
            leader is not None
            and pids
            and self._leader_seen
            and self.verdict is None
            and self.failing is None
        ):
            # the main process was listed before and is gone while its children still exit (kill -9 of
            # the leader; TP children can take seconds): say it now, naming what is left
            self.failing = _Failing(
                kind="exited",
                started=at,
                deadline=at + self.EXIT_SETTLE_S,
                reason=leader_died(leader, pids),
                reason_at=at,  # finish once the log is quiet (QUIET_S) or at the deadline
                last_line_at=at,
            )
        # two empty listings in a row: one listing can miss a process that is mid-exec
        if self._empty_listings >= 2 and self.verdict is None:
            if self.failing is None:
                self.failing = _Failing(kind="exited", started=at, deadline=at + self.EXIT_SETTLE_S)
            else:
                self.failing.deadline = min(self.failing.deadline, at + self.EXIT_SETTLE_S)
        return out

    def leader_gone(self, at: float) -> list[TrackerEvent]:
        """The box saw the main process itself end (kill -9, a crash): fail now, naming what of its
        group the last listing showed, once the log is quiet (QUIET_S) or at EXIT_SETTLE_S.  The
        listing alone needed the leader listed, then missing, 0.5 s apart (1-7 s in all)."""
        leader = self.who.pid
        if leader is None or self.verdict is not None or self.failing is not None:
            return []
        self.failing = _Failing(
            kind="exited",
            started=at,
            deadline=at + self.EXIT_SETTLE_S,
            reason=leader_died(leader, [p for p in self.pids or [] if p != leader]),
            reason_at=at,
            last_line_at=at,
        )
        return []

    def listener_check_due(self, at: float) -> bool:
        """Health answers and the box should say whose listener answered: at the first answer, then
        when every other ready condition holds (the verdict's own check), at most every
        LISTENER_RECHECK_S while another process holds the port."""
        if not self.check_listener or self.verdict is not None or self.failing is not None:
            return False
        if self.health_status != 200:
            return False
        last = self.listener_checked_at
        if last is None:
            return True
        if not self._ready_but_listener() or (self.listener_ours_at or 0.0) >= self._ready_inputs_at():
            return False
        return self.foreign_listener is None or at - last >= self.LISTENER_RECHECK_S

    def listener(self, ours: bool | None, detail: str, at: float) -> list[TrackerEvent]:
        """The box's answer on who listens on the port: ours (or `None`, it cannot tell: the
        health answer is taken as before), or another process (`detail` names it): then health
        alone never makes the server ready; its own error or exit, or the timeout, ends the watch."""
        self.listener_checked_at = at
        if ours is False:
            self.foreign_listener = detail
            self.listener_ours_at = None
            return []
        self.foreign_listener = None
        self.listener_ours_at = at
        return list(self._check_ready(at)) if self.verdict is None else []

    def _ready_but_listener(self) -> bool:
        if self.failing is not None or self.health_ok_at is None:
            return False
        return not (self.require_ready_line and self.ready_line_at is None)

    def _ready_inputs_at(self) -> float:
        return max(self.health_ok_at or 0.0, self.ready_line_at or 0.0)

    def log_unreadable(self, detail: str, at: float) -> list[TrackerEvent]:
        """The log cannot be followed.  When the verdict needs the ready line it can never come:
        fail now, naming the log and why (not a timeout minutes later).  Otherwise health alone
        can still make the server ready; a timeout's reason names the log problem."""
        first = self.log_problem is None
        self.log_problem = detail
        path = self.who.log_file or "?"
        out: list[TrackerEvent] = [LogProblem(path=path, detail=detail, at=at)] if first else []
        if self.verdict is None and self.failing is None and self.require_ready_line:
            reason = f"cannot read the server log {path}: {detail}"
            out.append(self._finish("failed", at, reason, "log_unreadable", [t for _, t in self.lines]))
        return out

    def exit_due(self, at: float) -> bool:
        """The server's group is gone and the next tick would give the failed verdict: the moment
        the watch reads what is left of the log (a follower behind on a loaded link must not cost
        the excerpt; a fixed settle time cannot promise that)."""
        f = self.failing
        return self.verdict is None and f is not None and f.kind == "exited" and self._due(f, at)

    def _due(self, f: _Failing, at: float) -> bool:
        quiet = f.reason is not None and at - max(f.reason_at, f.last_line_at) >= self.QUIET_S
        return quiet or at >= f.deadline

    def tick(self, at: float) -> list[TrackerEvent]:
        if self.verdict is not None:
            return []
        f = self.failing
        if f is not None:
            if not self._due(f, at):
                return []
            if f.kind != "exited" and self.pids:  # told, but its processes still run: let them exit
                if f.exit_wait_until is None:
                    f.exit_wait_until = at + self.EXIT_WAIT_S
                if at < f.exit_wait_until:
                    return []
            return [self._fail(at)]
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
        if not self._ready_but_listener():
            return []
        ready_at = self._ready_inputs_at()
        if self.check_listener and (self.listener_ours_at is None or self.listener_ours_at < ready_at):
            return []  # whose listener answered is checked (again) once everything else says ready
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
            profile=self.who.profile,
            fingerprint=self.who.fingerprint,
            pid=self.who.pid,
            pgid=self.who.pgid,
            log_file=self.who.log_file,
        )
        return [self.verdict]

    def _fail(self, at: float) -> Verdict:
        f = self.failing
        assert f is not None
        if f.kind == "exited":
            last = next((t for _, t in reversed(self.lines) if t.strip()), None)
            reason = f.reason or f"server exited (process group {self.who.pgid} is gone)"
            cause = root_cause([t for _, t in list(self.lines)[-EXITED_CAUSE_LINES:]], self.pack)
            if cause:
                reason += f"; the log's error: {cause}"
            elif last:
                reason += f"; last log line: {self.message(last)}"
            excerpt = [t for _, t in list(self.lines)[-20:]]
        else:
            window = [t for i, t in self.lines if i >= (f.trigger_index or 0)]
            reason = root_cause(window, self.pack) or f.reason or f.trigger_msg or f.kind
            if self.pids and f.exit_wait_until is not None:
                reason += (
                    f"; {len(self.pids)} of its processes still run {at - f.started:.0f} s after the error "
                    f"(process group {self.who.pgid}): stop it before launching again"
                )
            first = (f.trigger_index or 0) - EXCERPT_BEFORE
            excerpt = [t for i, t in self.lines if i >= first]
            if len(excerpt) > EXCERPT_MAX:
                head, tail = excerpt[:20], excerpt[-(EXCERPT_MAX - 21) :]
                excerpt = [*head, f"[... {len(excerpt) - len(head) - len(tail)} lines ...]", *tail]
        if self.foreign_listener is not None:
            reason += f"; its /health was answered by another process ({self.foreign_listener})"
        return self._finish("failed", at, reason, f.kind, excerpt)

    def _timeout(self, at: float) -> Verdict:
        waited = at - self.started_at
        reason = f"timed out after {waited:.0f} s in phase {self.last_phase}"
        reason += f" (no progress for {at - self.last_progress_at:.0f} s"
        reason += f", health {self.health_status if self.health_status else 'not answering'}"
        if self.require_ready_line:
            reason += ", ready line " + ("seen" if self.ready_line_at else "not seen")
        if self.log_problem is not None:
            reason += f", log {self.who.log_file} unreadable: {self.log_problem}"
        if self.foreign_listener is not None:
            reason += f", health answered by another process: {self.foreign_listener}"
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
            profile=self.who.profile,
            fingerprint=self.who.fingerprint,
            pid=self.who.pid,
            pgid=self.who.pgid,
            log_file=self.who.log_file,
        )
        return self.verdict


# -- history (ETA) ---------------------------------------------------------------------------


class StartupHistory(Model):
    """What earlier successful startups of a profile took (from the journal's verdict events)."""

    profile: str
    runs: int
    expected_total_s: float
    phase_starts: dict[str, float]  # median elapsed_s at which each phase began

    def eta(self, elapsed_s: float) -> float:
        return max(0.0, self.expected_total_s - elapsed_s)


def startup_history(
    events: Sequence[JournalRecord], profile: str, fingerprint: str | None = None
) -> StartupHistory | None:
    """Median startup time of earlier ready verdicts of `profile` (same fingerprint when given).

    Attaching to a running server is not a startup (its phases all read 0 s): left out.  A verdict
    belongs to the launch with its PID and start time (verdict time - elapsed), so a later real
    launch that happens to get the same PID still counts."""
    attached = [
        (e.server.pid, e.server.started_at)
        for e in events
        if isinstance(e, LaunchRecord) and e.server.attached
    ]

    def was_attach(v: Verdict) -> bool:
        start = v.at - v.elapsed_s if v.at else None
        return any(pid == v.pid and (start is None or abs(at - start) < 1.0) for pid, at in attached)

    runs = [
        e.outcome
        for e in events
        if isinstance(e, VerdictRecord)
        and e.outcome.verdict == "ready"
        and e.outcome.profile == profile
        and not was_attach(e.outcome)
        and (fingerprint is None or e.outcome.fingerprint in ("", fingerprint))
    ]
    if not runs:
        return None
    totals = [e.elapsed_s for e in runs]
    starts: dict[str, list[float]] = {}
    for e in runs:
        for p in e.phases:
            starts.setdefault(p.name, []).append(p.elapsed_s)
    return StartupHistory(
        profile=profile,
        runs=len(runs),
        expected_total_s=statistics.median(totals),
        phase_starts={k: statistics.median(v) for k, v in starts.items()},
    )


def verdict_of_run(verdict: Verdict, rec: ServerRecord) -> bool:
    """The verdict belongs to the run `rec` (its PID, started within a second of it)."""
    if verdict.pid != rec.pid:
        return False
    if not verdict.at:
        return True  # same PID, no time to tell them apart: leave it out rather than count it
    return abs(verdict.at - verdict.elapsed_s - rec.started_at) < 1.0
