"""The typed events a startup emits (phases, log lines, health, group, launch, verdict).

They are their own module so that consumers (panes, verbs, the journal) can name them without
pulling in the launcher or the watchers.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from specdebug.core.control.records import ServerRecord
from specdebug.core.model import Model

Clock = Callable[[], float]


class ServerState(StrEnum):
    """What a front end knows about the profile's server (a StrEnum: compares and prints as text)."""

    IDLE = "idle"  # nothing known to run
    CHECKING = "checking"  # asking the box whether it already runs
    LAUNCHING = "launching"  # launch (or attach) asked for, no record yet
    STARTING = "starting"  # launched: watching it come up
    READY = "ready"  # healthy (and its ready line seen)
    RUNNING = "running"  # found running, health not answering (yet)
    FAILED = "failed"  # the startup failed (its processes may still be there)
    STOPPING = "stopping"
    STOPPED = "stopped"
    EXITED = "exited"  # the process group went away by itself


# states in which no server of the profile is known to run
NOTHING_RUNNING = frozenset({ServerState.IDLE, ServerState.STOPPED, ServerState.FAILED, ServerState.EXITED})

# -- events --------------------------------------------------------------------------------


class ServerPhase(Model):
    """A startup phase entered (first milestone line of it), with the time we saw it."""

    type: Literal["phase"] = "phase"
    name: str
    at: float  # unix seconds, local clock
    elapsed_s: float  # since launch
    line: str | None = None


class LogLine(Model):
    type: Literal["log"] = "log"
    text: str
    at: float


class HealthChange(Model):
    type: Literal["health"] = "health"
    status: int | None  # HTTP status; None = no answer (refused, timeout)
    at: float


class GroupChange(Model):
    type: Literal["group"] = "group"
    pids: list[int]
    at: float


class LogProblem(Model):
    """The server log cannot be followed (missing, unreadable, its follower ended): the detail says why."""

    type: Literal["log_problem"] = "log_problem"
    path: str
    detail: str
    at: float


class ConnectionNote(Model):
    """The SSH link dropped while watching (`reconnecting`), or the watch picked up again after
    the reconnect (`resumed`): a verdict is never decided by a drop."""

    type: Literal["connection"] = "connection"
    state: Literal["reconnecting", "resumed"]
    detail: str = ""
    at: float


class Launched(Model):
    type: Literal["launched"] = "launched"
    record: ServerRecord


class Verdict(Model):
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
    ServerPhase | LogLine | HealthChange | GroupChange | LogProblem | ConnectionNote | Launched | Verdict,
    Field(discriminator="type"),
]
"""Everything `watch` / `launch_and_watch` yield (a tagged union: `type` names the member)."""
