"""The I/O of an environment check: one probe for the process table, one read of all /proc files,
one grep of the log, then the pure report; `env_events` streams a typed event after each step.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from specdebug.core.control.workers import listing_filter, select_workers
from specdebug.core.env.events import EnvDone, EnvEvent, EnvFilesRead, EnvLogRead, EnvProcessesFound
from specdebug.core.env.model import DEFAULT_PREFIXES, NCCL_ENV_MARKER, EnvQuery, EnvReport
from specdebug.core.env.report import build_report
from specdebug.core.profiles import Profile
from specdebug.core.profiles.paths import login_relative
from specdebug.engines import worker_match
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote

if TYPE_CHECKING:
    from specdebug.core.control.records import ServerRecord

# ---------------------------------------------------------------------------------------------
# IO: one probe for the process table, one for all /proc files, one grep of the log


def proc_paths(pids: Sequence[int]) -> list[str]:
    paths = ["/proc/stat", "/etc/passwd"]
    for pid in pids:
        paths += [f"/proc/{pid}/environ", f"/proc/{pid}/cmdline", f"/proc/{pid}/status"]
    return paths


async def read_nccl_lines(
    remote: Remote, log_path: str, *, timeout: float = 30.0, max_lines: int = 20000
) -> tuple[list[str], str | None]:
    """NCCL 'set by environment' lines from the server log (grep on the box, fixed string)."""
    path = login_relative(log_path)  # the probe runs in the login home (core.profiles.paths)
    res = await remote.run(
        ["grep", "-a", "-F", "-m", str(max_lines), "-e", NCCL_ENV_MARKER, "--", path], timeout=timeout
    )
    if res.timed_out:
        return [], f"reading NCCL lines from {log_path} timed out"
    if res.exit_status == 1:
        return [], None
    if res.exit_status != 0:
        err = res.err.strip().splitlines()
        return [], f"cannot read log {log_path}: {err[-1] if err else f'grep exit {res.exit_status}'}"
    return res.out.splitlines(), None


async def env_events(remote: Remote, query: EnvQuery) -> AsyncGenerator[EnvEvent, None]:
    """Find the workers, read their /proc files in one probe, read NCCL proof lines, build the
    report: an event after each step, then EnvDone with the report."""
    where: dict[str, Any] = dict(pids=query.pids, match=query.match, root_pid=query.root_pid, pgid=query.pgid)
    procs = await remote.processes(**listing_filter(**where))
    sel = select_workers(procs, pids=query.pids, match=query.match, root_pid=query.root_pid, pgid=query.pgid)
    yield EnvProcessesFound(
        processes=len(procs),
        workers=len(sel.workers),
        launcher_pid=sel.launcher.pid if sel.launcher is not None else None,
        how=sel.how,
        missing_pids=list(sel.missing_pids),
    )
    pids = [p.pid for p in sel.workers] + list(sel.missing_pids)
    if sel.launcher is not None:
        pids.append(sel.launcher.pid)
    read = await remote.read_files(proc_paths(pids), max_bytes=4 << 20)
    yield EnvFilesRead(files=len(read), unreadable=sum(1 for r in read if r.data is None))
    reads = {r.path: r for r in read}
    lines: list[str] = []
    log_error = None
    if query.log_path:
        lines, log_error = await read_nccl_lines(remote, query.log_path)
        yield EnvLogRead(path=query.log_path, lines=len(lines), error=log_error)
    yield EnvDone(report=build_report(query, procs, reads, lines, selection=sel, log_error=log_error))


async def check_env(remote: Remote, query: EnvQuery) -> EnvReport:
    """`env_events` for callers that only want the report."""
    async for ev in env_events(remote, query):
        if isinstance(ev, EnvDone):
            return ev.report
    raise RuntimeError("the env check ended without a report")  # pragma: no cover - env_events ends in one


class ServerNotRunning(SpecdebugError, LookupError):
    """The profile's recorded server is not running on this box.

    Why an error and not a fallback: every other process on the box whose command line matches
    `[workers] match` belongs to someone else (another user, a bisection's trial server), and an
    answer about those is an answer about a server the user did not name.  A box-wide look is asked
    for explicitly (`all_matching`) and labelled as such.
    """


NOT_RUNNING_HINT = "launch it (specdebug launch -c PROFILE), or look box-wide with --all-matching"


def _why_not_running(record: ServerRecord | None) -> str:
    if record is None:
        return "specdebug has no launch record of it here"
    if record.stopped_at is not None:
        return f"its launch record says it stopped at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record.stopped_at))}"
    return f"its recorded process group {record.pgid} (pid {record.pid}) is gone"


async def query_for_profile(
    remote: Remote,
    profile: Profile,
    *,
    expect: Mapping[str, str] | None = None,
    expect_from_launcher: bool = False,
    prefixes: Sequence[str] | None = None,
    log_path: str | None = None,
    show_secrets: bool = False,
    all_matching: bool = False,
) -> EnvQuery:
    """The query for a profile's server: expected env = profile.server.env (+ overrides); workers =
    the process tree of the launch record on the box (~/.specdebug/servers/<name>.json).

    `all_matching`: instead, every process on the box whose command line matches `[workers] match`
    (else every engine's worker titles), whoever runs it: a box-wide look, labelled so in the
    report, which never gives a verdict about the profile's server.

    Raises ServerNotRunning when the recorded server is not running (never a box-wide guess).
    """
    from specdebug.core.control.records import group_members, load_record

    server = profile.server
    query = EnvQuery(
        expected={**server.env, **(expect or {})},
        expected_source=f"profile {profile.name}" + (" + --expect" if expect else ""),
        expect_from_launcher=expect_from_launcher,
        prefixes=list(prefixes or DEFAULT_PREFIXES),
        server_kind=server.kind if server.kind != "custom" else None,
        server_argv=list(server.argv),
        show_secrets=show_secrets,
    )
    if all_matching:
        query.match = profile.workers.match or worker_match()
        query.box_wide = True
        query.log_path = log_path  # the profile's log describes its own server, not these processes
        return query
    record = await load_record(remote, profile.name)
    alive = False
    if record is not None and record.stopped_at is None:
        alive = bool(group_members(await remote.processes(pgid=record.pgid, pids=[record.pid]), record))
    if not alive or record is None:
        raise ServerNotRunning(
            f"{profile.name} is not running on {remote.name}: {_why_not_running(record)}",
            NOT_RUNNING_HINT,
        )
    query.root_pid, query.pgid, query.match = record.pid, record.pgid, profile.workers.match
    query.log_path = log_path or record.log_file or server.log_file or None
    return query
