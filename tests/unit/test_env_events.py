"""The env service as one stream of typed events: processes found, files read, the log searched,
then the report (the fake remote and fixtures of test_env_check)."""

from __future__ import annotations

from specdebug.core.env.events import EnvDone, EnvFilesRead, EnvLogRead, EnvProcessesFound
from specdebug.core.env.probe import check_env, env_events
from tests.unit.test_env_check import CLOBBERED, NCCL, PROCS, FakeRemote, environ, q, reads


async def test_events_in_order_then_the_report() -> None:
    files = reads({200: environ(**NCCL), 201: CLOBBERED, 202: CLOBBERED})
    log = "box:201:5 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
    events = [ev async for ev in env_events(FakeRemote(files, log), q(expected=NCCL, log_path="srv.log"))]
    assert [type(ev) for ev in events] == [EnvProcessesFound, EnvFilesRead, EnvLogRead, EnvDone]
    found, read, logged, done = events
    assert isinstance(found, EnvProcessesFound) and found.processes == len(PROCS) and found.workers == 2
    assert found.launcher_pid == 200 and "2 worker(s)" in found.describe()
    assert isinstance(read, EnvFilesRead) and read.files > 0
    assert isinstance(logged, EnvLogRead) and logged.lines == 1 and logged.error is None
    assert isinstance(done, EnvDone) and done.report.workers[0].vars["NCCL_PROTO"].source == "nccl_log"


async def test_no_log_no_log_event_and_helper_gives_the_same_report() -> None:
    files = reads({201: environ(**NCCL), 202: environ(**NCCL)})
    events = [ev async for ev in env_events(FakeRemote(files, None), q(expected=NCCL))]
    assert [type(ev) for ev in events] == [EnvProcessesFound, EnvFilesRead, EnvDone]
    report = await check_env(FakeRemote(files, None), q(expected=NCCL))
    last = events[-1]
    assert isinstance(last, EnvDone) and last.report == report


async def test_unreadable_log_is_in_the_log_event() -> None:
    files = reads({201: environ(**NCCL), 202: environ(**NCCL)})
    events = [ev async for ev in env_events(FakeRemote(files, None), q(expected=NCCL, log_path="x.log"))]
    logged = [ev for ev in events if isinstance(ev, EnvLogRead)]
    assert logged and logged[0].error is not None and "x.log" in logged[0].error
