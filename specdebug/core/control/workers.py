"""Finding a server's worker processes in a /proc snapshot.

Why a module: the env check, the process views and stop/status all need "which PIDs are this
server's workers".  Three ways, in order of trust: the tree under the PID/process group recorded at
launch, a regex over /proc/PID/cmdline (never `comm`: the kernel truncates it to 15 characters,
so `sglang::scheduler_TP0` would read `sglang::schedul`), or explicit PIDs.  Pure functions over
`ProcInfo` lists, so they are tested without a box.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specdebug.engines import ENGINES
from specdebug.remote.api import ProcInfo

#: Process titles that tell which server runs (for the server-overwrites-env flags).
_KIND_TITLES = tuple((title, e.name) for e in ENGINES.values() for title in e.worker_titles)


@dataclass
class Selection:
    """Workers chosen from a process table, the launcher above them, and how they were found."""

    workers: list[ProcInfo]
    launcher: ProcInfo | None
    how: str
    missing_pids: list[int] = field(default_factory=list)  # asked for, but not in the table (gone)


def cmdline_text(proc: ProcInfo) -> str:
    """The command line as one string (what --match regexes run over)."""
    return " ".join(a for a in proc.cmdline if a)


def ancestors(procs_by_pid: dict[int, ProcInfo], pid: int) -> list[int]:
    """PIDs from pid's parent up to the root (cycle-safe)."""
    out: list[int] = []
    seen = {pid}
    cur = procs_by_pid.get(pid)
    while cur is not None and cur.ppid not in seen and cur.ppid > 0:
        out.append(cur.ppid)
        seen.add(cur.ppid)
        cur = procs_by_pid.get(cur.ppid)
    return out


def descendants(procs: Sequence[ProcInfo], root_pid: int) -> list[ProcInfo]:
    """Every process below root_pid (children, grandchildren, ...), in table order."""
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    wanted: set[int] = set()
    stack = [root_pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in wanted and child != root_pid:
                wanted.add(child)
                stack.append(child)
    return [p for p in procs if p.pid in wanted]


def _is_searcher(proc: ProcInfo, pattern: str) -> bool:
    """A process whose argv holds the pattern itself (grep, pgrep, `specdebug env --match X`).

    On a loopback box our own command line would otherwise match its own regex.
    """
    return any(a == pattern or a.endswith("=" + pattern) for a in proc.cmdline[1:])


def match_cmdline(procs: Iterable[ProcInfo], regex: str) -> list[ProcInfo]:
    """Processes whose /proc/PID/cmdline matches regex (re.search); kernel threads never match."""
    rx = re.compile(regex)
    return [p for p in procs if p.cmdline and rx.search(cmdline_text(p)) and not _is_searcher(p, regex)]


def common_launcher(procs_by_pid: dict[int, ProcInfo], pids: Sequence[int]) -> ProcInfo | None:
    """The deepest process that is an ancestor of every given PID and not one of them (None: init/none)."""
    chains = [ancestors(procs_by_pid, pid) for pid in pids if pid in procs_by_pid]
    if not chains:
        return None
    common = set(chains[0]).intersection(*map(set, chains[1:]))
    common -= set(pids)
    for pid in chains[0]:  # nearest first
        if pid in common:
            return procs_by_pid.get(pid) if pid > 1 else None
    return None


def select_workers(
    procs: Sequence[ProcInfo],
    *,
    pids: Sequence[int] = (),
    match: str | None = None,
    root_pid: int | None = None,
    pgid: int | None = None,
) -> Selection:
    """Pick workers: under root_pid/pgid (optionally filtered by match), else by match, else by pids."""
    by_pid = {p.pid: p for p in procs}
    if root_pid is not None or pgid is not None:
        tree: dict[int, ProcInfo] = {}
        if root_pid is not None:
            tree.update((p.pid, p) for p in descendants(procs, root_pid))
        if pgid is not None:
            tree.update((p.pid, p) for p in procs if p.pgid == pgid)
        tree.pop(root_pid or -1, None)
        launcher = by_pid.get(root_pid) if root_pid is not None else by_pid.get(pgid or -1)
        if launcher is not None:
            tree.pop(launcher.pid, None)
        found = [p for p in procs if p.pid in tree]
        how = f"process tree of pid {root_pid}" if root_pid is not None else f"process group {pgid}"
        if match:
            found = match_cmdline(found, match)
            how += f" matching /{match}/"
        return Selection(found, launcher, how)
    if match:
        found = match_cmdline(procs, match)
        return Selection(
            found, common_launcher(by_pid, [p.pid for p in found]), f"cmdline matching /{match}/"
        )
    found = [by_pid[pid] for pid in pids if pid in by_pid]
    missing = [pid for pid in pids if pid not in by_pid]
    how = "pids " + ", ".join(str(p) for p in pids)
    return Selection(found, common_launcher(by_pid, [p.pid for p in found]), how, missing)


def listing_filter(
    *,
    pids: Sequence[int] = (),
    match: str | None = None,
    root_pid: int | None = None,
    pgid: int | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `Remote.processes` that return a superset of what select_workers picks.

    Why: the box then sends (and reads) only those processes and their ancestors, not all of /proc.
    """
    if root_pid is not None or pgid is not None:
        return {"root_pid": root_pid, "pgid": pgid}
    if match:
        return {"match": match}
    return {"pids": list(pids)}


def group_filter(pgid: int, pid: int) -> dict[str, Any]:
    """`Remote.processes` keywords for a launch record's group (all group_members needs)."""
    return {"pgid": pgid, "pids": [pid]}


def server_kind(procs: Iterable[ProcInfo]) -> str | None:
    """Server kind (an engine name) from its workers' process titles (engines' `worker_titles`), else None."""
    for p in procs:
        text = cmdline_text(p)
        for marker, kind in _KIND_TITLES:
            if text.startswith(marker):
                return kind
    return None
