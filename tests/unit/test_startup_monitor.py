"""The pure server monitor (core.control.monitor) and the tracker's log-problem rule: events in,
state and announced changes out, time passed in."""

from __future__ import annotations

import asyncio

from specdebug.core.control.actions import ServerStatus
from specdebug.core.control.events import (
    GroupChange,
    HealthChange,
    Launched,
    LogLine,
    LogProblem,
    ServerPhase,
    ServerState,
    Verdict,
)
from specdebug.core.control.monitor import EXITED_MESSAGE, ServerMonitor, watch_liveness
from specdebug.core.control.records import ActorMark, ServerRecord, StopResult
from specdebug.core.control.tracker import StartupTracker
from specdebug.remote.api import RemoteError

T0 = 1_700_000_000.0


def record() -> ServerRecord:
    return ServerRecord(profile="p", pid=42, pgid=42, port=30000, log_file="/l/server.log", started_at=T0)


def status(health: int | None, state: str = "running") -> ServerStatus:
    return ServerStatus(profile="p", state=state, record=record(), pids=[42, 43], port=30000, health=health)  # type: ignore[arg-type]


def test_launch_to_ready_announces_once() -> None:
    mon = ServerMonitor()
    assert mon.state is ServerState.IDLE and mon.nothing_running()
    assert mon.apply(Launched(record=record())) is None
    assert mon.state is ServerState.STARTING and [p.name for p in mon.phases] == ["launch"]
    mon.apply(ServerPhase(name="load_weights", at=T0 + 1, elapsed_s=1))
    mon.apply(LogLine(text="hello\tworld", at=T0 + 1))
    mon.apply(HealthChange(status=503, at=T0 + 1))
    mon.apply(GroupChange(pids=[42, 43], at=T0 + 1))
    assert list(mon.log_lines) == ["hello world"] and mon.health == 503 and mon.pids == [42, 43]
    assert mon.elapsed(T0 + 5) == 5
    change = mon.apply(Verdict(verdict="ready", elapsed_s=9, phases=mon.phases))
    assert change is not None and change.state is ServerState.READY and change.record == record()
    assert mon.state == "ready" and mon.elapsed(T0 + 100) == 9 and mon.alive()


def test_failed_is_alive_only_with_processes() -> None:
    mon = ServerMonitor()
    mon.apply(Launched(record=record()))
    mon.apply(GroupChange(pids=[42], at=T0 + 1))
    mon.apply(Verdict(verdict="failed", reason="boom"))
    assert mon.state is ServerState.FAILED and mon.alive() and mon.nothing_running()
    mon.apply(GroupChange(pids=[], at=T0 + 2))
    assert not mon.alive()


def test_log_problem_is_kept() -> None:
    mon = ServerMonitor()
    mon.apply(LogProblem(path="/l/server.log", detail="no such file", at=T0))
    assert mon.log_problem == "no such file"


def test_stop_result() -> None:
    mon = ServerMonitor()
    mon.apply(Launched(record=record()))
    change = mon.apply(StopResult(profile="p", stopped=True, message="stopped p"))
    assert change is not None and change.state is ServerState.STOPPED
    assert mon.pids == [] and mon.message == "stopped p"
    change = mon.apply(StopResult(profile="p", stopped=False, message="still there"))
    assert change is not None and change.state is ServerState.FAILED


def test_found_running_then_ready_then_exited() -> None:
    mon = ServerMonitor()
    assert mon.apply_status(status(None)) is None  # running, health not answering: nothing to announce
    assert mon.state is ServerState.RUNNING and mon.found is not None and mon.pids == [42, 43]
    assert mon.liveness([42], 503) is None
    change = mon.liveness([42], 200)
    assert change is not None and change.state is ServerState.READY
    change = mon.liveness([], None)
    assert change is not None and change.state is ServerState.EXITED
    assert mon.message == EXITED_MESSAGE and mon.found is None
    assert mon.liveness([], None) is None  # no longer watched


def test_found_healthy_announces_ready_and_exited_record_says_gone() -> None:
    mon = ServerMonitor()
    change = mon.apply_status(status(200))
    assert change is not None and change.state is ServerState.READY
    mon.apply_status(status(None, state="exited"))
    assert mon.state is ServerState.IDLE and "is gone" in mon.message


class RecordOnBox:
    """A box whose only answer is the profile's record (read_state), or none (the helper fails)."""

    state_dir = "/s"

    def __init__(self, rec: ServerRecord | None) -> None:
        self.rec = rec

    async def box_op(self, op: str, request: dict, timeout: float = 30) -> dict:
        if self.rec is None or op != "read_state":  # the main process's pidfd watch: no helper
            raise RemoteError("no helper")
        assert request["name"] == "p"
        return {"state": "ok", "path": "/s/p.json", "data": self.rec.model_dump_json()}


async def test_watch_liveness_drives_the_monitor() -> None:
    answers = iter([([42], 200), ([], None)])

    async def liveness(remote, rec, profile):
        return next(answers)

    mon = ServerMonitor()
    mon.apply_status(status(None))
    seen = [
        c.state if c else None
        async for c in watch_liveness(
            mon, RecordOnBox(None), record(), None, liveness=liveness, interval=0.01
        )  # type: ignore[arg-type]
    ]
    assert seen == [ServerState.READY, ServerState.EXITED]
    assert await asyncio.wait_for(_drained(mon), 1) is None


def test_the_records_stop_mark_makes_a_gone_group_stopped_by_another_session_not_died() -> None:
    mark = ActorMark(what="specdebug bisect", user="alice", host="laptop", pid=4242, at=T0 + 5)
    mon = ServerMonitor()
    mon.apply_status(status(200))
    change = mon.liveness([], None, record().model_copy(update={"stopped_by": mark}))
    assert change is not None and change.state is ServerState.STOPPED
    assert mon.message.startswith(
        "stopped by another specdebug session (specdebug bisect, alice@laptop PID 4242"
    )
    assert "died" not in mon.message and mon.relaunched is None

    mon.apply_status(status(200))  # no mark: it died, as before
    mon.liveness([43], None, record())
    assert mon.state is ServerState.EXITED and "died (killed or crashed)" in mon.message

    newer = ServerRecord(
        profile="p", pid=77, pgid=77, port=30000, log_file="/l", started_at=T0 + 9, launched_by=mark
    )
    mon.apply_status(status(200))
    mon.liveness([], None, newer)  # relaunched elsewhere: the newer run is named, to be followed
    assert mon.state is ServerState.STOPPED and mon.relaunched == newer
    assert (
        "relaunched by another specdebug session (specdebug bisect" in mon.message
        and "now PID 77" in mon.message
    )


async def _drained(mon: ServerMonitor) -> None:
    async for _ in watch_liveness(mon, None, record(), None, liveness=None, interval=0.01):  # type: ignore[arg-type]
        raise AssertionError("an exited server is not watched")


def tracker(require_ready_line: bool = True) -> StartupTracker:
    return StartupTracker(
        kind="sglang",
        started_at=T0,
        timeout_s=60,
        require_ready_line=require_ready_line,
        profile="p",
        pid=42,
        pgid=42,
        log_file="/no/such/dir/server.log",
    )


def test_unreadable_log_fails_at_once_when_the_ready_line_is_needed() -> None:
    t = tracker()
    events = t.log_unreadable("no such file", T0 + 0.5)
    problem, verdict = events
    assert isinstance(problem, LogProblem) and problem.path == "/no/such/dir/server.log"
    assert isinstance(verdict, Verdict) and verdict.verdict == "failed"
    assert verdict.error_kind == "log_unreadable"
    assert "/no/such/dir/server.log" in (verdict.reason or "") and "no such file" in (verdict.reason or "")
    assert verdict.pid == 42 and verdict.profile == "p"  # typed identity fields reach the verdict
    assert t.log_unreadable("no such file", T0 + 1) == []  # said once


def test_unreadable_log_without_ready_line_names_it_in_the_timeout() -> None:
    t = tracker(require_ready_line=False)
    assert [type(e) for e in t.log_unreadable("Permission denied", T0)] == [LogProblem]
    (verdict,) = t.tick(T0 + 61)
    assert verdict.error_kind == "timeout" and "unreadable: Permission denied" in (verdict.reason or "")


def test_startup_view_names_an_unreadable_log_before_the_verdict() -> None:
    from specdebug.tui.panes.startup_view import StartupView

    class View(StartupView):
        def __init__(self) -> None:
            self._mon = ServerMonitor()
            self.history = None
            self.clock = lambda: T0

        @property
        def mon(self) -> ServerMonitor:
            return self._mon

        @property
        def profile(self):
            return None

        def elapsed(self) -> float | None:
            return None

    view = View()
    view.mon.apply(Launched(record=record()))
    assert "cannot read" not in view.verdict_text().plain
    view.mon.apply(LogProblem(path="/l/server.log", detail="Permission denied", at=T0))
    assert "cannot read the server log: Permission denied" in view.verdict_text().plain


def test_after_ready_a_dead_main_process_is_exited_while_children_remain():
    from specdebug.core.control.events import ServerState
    from specdebug.core.control.monitor import ServerMonitor

    mon = ServerMonitor()
    mon.state = ServerState.READY
    mon.record = _record_with_pid(41)
    change = mon.liveness([42, 43], 200)
    assert change is not None and mon.state is ServerState.EXITED
    assert "main process 41 died" in mon.message and "42, 43" in mon.message


def _record_with_pid(pid: int) -> ServerRecord:
    return ServerRecord(profile="p", pid=pid, pgid=pid, port=30000, log_file="/l/server.log", started_at=T0)


async def test_the_workers_a_killed_main_process_leaves_are_followed_until_they_are_gone() -> None:
    """kill -9 of the group: the main process's end is seen first (its pidfd), while a worker is
    still exiting; the screen must not keep that worker's PID once it is gone (CI, 2026-12-06: the
    Startup pane said EXITED with PID 10966 for ever)."""
    answers = iter([([43], None), ([43], None), ([], None)])

    async def liveness(remote, rec, profile):
        return next(answers)

    mon = ServerMonitor()
    mon.apply_status(status(200))
    seen = []
    async for change in watch_liveness(
        mon, RecordOnBox(None), record(), None, liveness=liveness, interval=0.01
    ):  # type: ignore[arg-type]
        seen.append((change.state if change else None, list(mon.pids)))
    assert seen[0] == (ServerState.EXITED, [43])
    assert seen[-1] == (None, []) and mon.state is ServerState.EXITED and mon.pids == []
    assert mon.message == "server's main process 42 died (killed or crashed)"


def test_leftovers_are_not_taken_after_a_stop_or_a_new_run() -> None:
    mon = ServerMonitor()
    mon.apply_status(status(200))
    mon.liveness([43], None, None)
    assert mon.state is ServerState.EXITED and "still exiting: 43" in mon.message
    assert mon.leftover([43], None) is True
    mon.apply(StopResult(profile="p", stopped=True, message="stopped"))
    assert mon.leftover([43], None) is False and mon.pids == []


async def test_a_run_stopped_elsewhere_is_not_re_asked_for_its_processes() -> None:
    """Stopped by another session with processes still listed: that session's stop owns them; the
    watch ends (it re-asked for ever, the state never EXITED)."""
    mark = ActorMark(what="specdebug bisect", user="alice", host="laptop", pid=4242, at=T0 + 5)

    async def liveness(remote, rec, profile):
        return ([43], None)

    mon = ServerMonitor()
    mon.apply_status(status(200))
    box = RecordOnBox(record().model_copy(update={"stopped_by": mark}))

    async def watched() -> list:
        return [c async for c in watch_liveness(mon, box, record(), None, liveness=liveness, interval=0.01)]  # type: ignore[arg-type]

    seen = await asyncio.wait_for(watched(), 10)
    assert mon.state is ServerState.STOPPED and len(seen) == 1
