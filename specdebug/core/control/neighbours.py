"""Who else holds the GPUs a launch would use: this box user's other running servers (their records)
and any running bisection (the box's bisection lock).

Why: a launch from the TUI while a bisection's trial held the GPUs cost the bisection a data point
("failed to start: Not enough memory"), and nothing warned (issue 41).  The front end asks here
before it launches and lets the user confirm; the headless `launch`/`restart` ask the same
(target_neighbours) and refuse unless `--force`.  Which GPUs a server uses is read from
CUDA_VISIBLE_DEVICES as recorded (its profile's env): two servers that both name theirs share GPUs
only where the lists meet; one that names none sees every GPU, so it *may* share (said so).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from specdebug.core.control.records import ServerRecord, box_call, group_members, state_dir_of
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.remote.api import Remote, RemoteError

NEIGHBOUR_CHECK_S = 30.0  # a busy box's python3 start and its process list, on every node at once

if TYPE_CHECKING:
    from specdebug.core.target import Target

GPU_VAR = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class GpuNeighbour:
    """One thing that holds (or may hold) GPUs this launch would use, as one sentence."""

    name: str  # the profile of the other server, or `bisection ID`
    sentence: str
    # the same, as data (a verb's --json): kind `server` or `bisection`, where, which process, which
    # GPUs (`gpus`: its CUDA_VISIBLE_DEVICES, None for every GPU; `shared`: where both name theirs)
    kind: str = "server"
    host: str = ""
    pid: int | None = None
    pgid: int | None = None
    port: int | None = None
    gpus: list[str] | None = None
    shared: list[str] | None = None
    launched_by: str | None = None
    stop: str = ""  # how to free the GPUs, as said in the sentence
    detail: dict[str, Any] = field(default_factory=dict)  # a bisection's record (made visible)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "host": self.host,
            "pid": self.pid,
            "pgid": self.pgid,
            "port": self.port,
            "gpus": self.gpus,
            "shared_gpus": self.shared,
            "launched_by": self.launched_by,
            "stop": self.stop,
            "sentence": self.sentence,
            **({"bisection": self.detail} if self.detail else {}),
        }


def visible_gpus(env: dict[str, str]) -> list[str] | None:
    """The GPU ids an environment names (None: it names none, so every GPU is visible)."""
    value = env.get(GPU_VAR)
    if value is None or not value.strip():
        return None
    return [g.strip() for g in value.split(",") if g.strip()]


def shared_gpus(mine: list[str] | None, theirs: list[str] | None, who: str) -> str | None:
    """Why the two may share a GPU (None: their CUDA_VISIBLE_DEVICES lists do not meet)."""
    if mine is not None and theirs is not None:
        both = [g for g in mine if g in theirs]
        if not both:
            return None
        return f"holds GPU {','.join(both)} ({GPU_VAR}={','.join(theirs)}; this launch: {','.join(mine)})"
    nobody = (
        "neither sets"
        if mine is None and theirs is None
        else f"{who if theirs is None else 'this launch'} sets no"
    )
    return f"may hold the GPUs this launch uses ({nobody} {GPU_VAR}: every GPU is visible to it)"


async def other_records(remote: Remote) -> list[ServerRecord]:
    """This login's server records on the box (each checked as load_record checks one)."""
    out = await box_call(remote, "list_states", {"dir": state_dir_of(remote)})
    if out.get("state") != "ok":
        raise RemoteError(f"cannot list the server records: {out.get('reason')}")
    records = []
    for item in out.get("records") or []:
        try:
            rec = ServerRecord.model_validate_json(item["data"])
        except (ValidationError, KeyError, TypeError):
            continue  # not a record to act on: load_record refuses it too
        if rec.profile == item.get("name"):
            records.append(rec)
    return records


def stop_hint(rec: ServerRecord, host: str) -> str:
    """How to free the GPUs a recorded server holds.  A bisection's trial is not for stopping (that
    is what the warning protects): wait for the bisection instead."""
    if rec.launched_by is not None and "bisect" in rec.launched_by.what:
        return "it is a bisection's trial: wait for the bisection to end"
    return (
        f"stop it first with `specdebug stop {host} -c PROFILE` (PROFILE: {visible(rec.profile)}'s file), "
        f"or `kill -TERM -- -{rec.pgid}` on {host}"
    )


async def gpu_neighbours(
    remote: Remote, profile: Profile, host: str, *, same_target: Collection[str] = ()
) -> list[GpuNeighbour]:
    """Other running servers of this box user whose GPUs may meet the profile's, and every running
    bisection on the box (it holds the box's GPUs for its whole run), each named.  `same_target`:
    record names of the target's other nodes (a deployment's own servers are not its neighbours)."""
    from specdebug.core.bisect.boxlock import describe, running_bisections

    records: list[ServerRecord]
    bisections: list[dict[str, Any]] | None
    records, bisections = await all_of(other_records(remote), running_bisections(remote))
    procs = await remote.processes() if records else []
    mine = visible_gpus(profile.server.env)
    found: list[GpuNeighbour] = []
    for rec in records:
        if rec.profile == profile.name or rec.profile in same_target or rec.stopped_at is not None:
            continue
        if not group_members(procs, rec):
            continue
        theirs = visible_gpus(rec.env)
        why = shared_gpus(mine, theirs, "it")
        if why is None:
            continue
        by = rec.launched_by.describe() if rec.launched_by else None
        name = visible(rec.profile)
        stop = stop_hint(rec, host)
        found.append(
            GpuNeighbour(
                name,
                f"{name} (PID {rec.pid}, port {rec.port}{', launched by ' + by if by else ''}) runs on "
                f"{host} and {why}; {stop}",
                host=host,
                pid=rec.pid,
                pgid=rec.pgid,
                port=rec.port,
                gpus=theirs,
                shared=[g for g in mine if g in theirs] if mine is not None and theirs is not None else None,
                launched_by=by,
                stop=stop,
            )
        )
    for holder in bisections or []:
        pid = holder.get("pid")
        found.append(
            GpuNeighbour(
                f"bisection {visible(str(holder.get('bisect', '?')))[:40]}",
                describe(holder, host),
                kind="bisection",
                host=host,
                pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                stop="wait for it to end, or stop it there",
                detail={k: visible(str(v))[:200] for k, v in holder.items()},
            )
        )
    return found


async def target_neighbours(target: Target) -> list[GpuNeighbour]:
    """Every reachable node's neighbours (gpu_neighbours), the target's own servers left out: what a
    front end asks before it launches the target (the TUI's Startup pane, `launch`, `restart`)."""
    own = {n.profile.name for n in target.nodes}  # each node's record name
    per_node = await all_of(
        *(gpu_neighbours(target.remote(n), n.profile, n.host, same_target=own) for n in target.reachable())
    )
    return [n for found in per_node for n in found]


async def all_of(*calls: Coroutine[Any, Any, Any]) -> list[Any]:
    """Every call's result, side by side; the first error as itself.  A TaskGroup, not gather: a
    check cancelled midway (its deadline, a second key press) leaves no task running and no
    "exception was never retrieved" in the log, as nested gathers did."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in calls]
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [t.result() for t in tasks]
