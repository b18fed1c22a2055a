"""The workers of a profile's server, their stacks taken on the box (specdebug/box/stacks.py, run
by the box's python3 as the box user), grouped; or a record of S seconds as shares.

Workers are found as the env check finds them (core.env.probe.query_for_profile: the launch record's
process tree, filtered by [workers] match); a server that is not running is said so, never replaced
by other processes that match (py-spy on another user's or another server's processes answers a
question nobody asked).  py-spy missing on the box: the report says how to get it.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from specdebug.core.control.workers import cmdline_text, listing_filter, select_workers
from specdebug.core.env.probe import ServerNotRunning, query_for_profile
from specdebug.core.profiles import Profile
from specdebug.core.stacks.group import Worker, group_workers, main_frames, summary
from specdebug.core.stacks.record import summarize
from specdebug.core.stacks.roles import identify, worker_ranks
from specdebug.remote.api import Remote, RemoteError
from specdebug.remote.boxcode import python_argv

MAX_REPLY = 8 << 20


class StacksError(RemoteError):
    """No workers, or the box could not run the stack module (the message says which)."""


async def find_workers(remote: Remote, profile: Profile) -> tuple[list[Worker], str]:
    try:
        q = await query_for_profile(remote, profile)
    except ServerNotRunning as exc:
        raise StacksError(f"{exc} (launch it: specdebug launch -c PROFILE)") from exc
    where: dict[str, Any] = dict(pids=q.pids, match=q.match, root_pid=q.root_pid, pgid=q.pgid)
    procs = await remote.processes(**listing_filter(**where))
    sel = select_workers(procs, **where)
    if not sel.workers:
        raise StacksError(f"no worker of {profile.name} found ({sel.how})")
    titles = [cmdline_text(p) for p in sel.workers]
    idents = [identify(t) for t in titles]
    workers = [
        Worker(p.pid, rank, title[:120], role=ident.role, label=ident.label)
        for p, title, ident, rank in zip(sel.workers, titles, idents, worker_ranks(idents), strict=True)
    ]
    return sorted(workers, key=lambda w: (w.rank is None, w.rank or 0, w.pid)), sel.how


async def run_box_module(remote: Remote, req: dict[str, Any], timeout: float) -> dict[str, Any]:
    res = await remote.run(python_argv("stacks.py", json.dumps(req)), timeout=timeout)
    if not res.ok or len(res.stdout) > MAX_REPLY:
        why = (res.err or res.out).strip().splitlines()[-1:] or [f"exit status {res.exit_status}"]
        raise StacksError(f"stack module on the box failed: {why[0][:200]}")
    try:
        data = json.loads(res.stdout)
    except ValueError as exc:
        raise StacksError(f"stack module answered {res.out[:120]!r}") from exc
    if not isinstance(data, dict):
        raise StacksError("stack module answered no object")
    return data


def _missing(data: dict[str, Any]) -> str | None:
    return None if data.get("py_spy") else str(data.get("hint") or "py-spy not found on the box")


async def dump(
    remote: Remote, profile: Profile, *, py_spy: str | None = None, pids: list[int] | None = None
) -> dict[str, Any]:
    """Every worker's stack now (or those of `pids`: the Env pane's selected worker), grouped;
    {"error", "hint"} without py-spy."""
    workers, how = await find_workers(remote, profile)
    if pids:
        workers = [w for w in workers if w.pid in pids] or [
            Worker(p, i, f"pid {p}") for i, p in enumerate(pids)
        ]
        how = f"{how}, pids {', '.join(map(str, pids))}"
    data = await run_box_module(
        remote, {"pids": [w.pid for w in workers], "mode": "dump", "py_spy": py_spy or ""}, 60
    )
    if (hint := _missing(data)) is not None:
        return {"profile": profile.name, "found_by": how, "error": "py-spy not found", "hint": hint}
    for w in workers:
        got = (data.get("pids") or {}).get(str(w.pid)) or {"error": "no answer"}
        if "error" in got:
            w.error = str(got["error"])
        else:
            w.frames = main_frames(got)
    groups = group_workers(workers, profile.server.kind)
    return {
        "profile": profile.name,
        "found_by": how,
        "py_spy": data.get("py_spy"),
        "phase": groups[0].phase if groups and not groups[0].differs else "cannot tell (no majority)",
        "summary": summary(groups),
        "groups": [asdict(g) for g in groups],
        "workers": [asdict(w) for w in workers],
        "errors": {str(w.pid): w.error for w in workers if w.error},
    }


async def record(
    remote: Remote, profile: Profile, seconds: int, *, rate: int = 97, py_spy: str | None = None
) -> dict[str, Any]:
    """py-spy record of every worker for `seconds`, as shares per function and path."""
    workers, how = await find_workers(remote, profile)
    req = {"pids": [w.pid for w in workers], "mode": "record", "duration": seconds, "rate": rate}
    data = await run_box_module(remote, {**req, "py_spy": py_spy or ""}, seconds + 60)
    if (hint := _missing(data)) is not None:
        return {"profile": profile.name, "found_by": how, "error": "py-spy not found", "hint": hint}
    per_pid = data.get("pids") or {}
    out = summarize(per_pid)
    return {
        "profile": profile.name,
        "fingerprint": profile.fingerprint(),
        "found_by": how,
        "seconds": seconds,
        "rate": rate,
        "ranks": len(workers),
        **out,
        "errors": {p: r["error"] for p, r in per_pid.items() if "error" in r},
    }
