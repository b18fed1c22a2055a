"""Who else holds the GPUs a launch would use: this box user's other running servers (their records)
and any running bisection (the box's bisection lock).

Why: a launch from the TUI while a bisection's trial held the GPUs cost the bisection a data point
("failed to start: Not enough memory"), and nothing warned (issue 41).  The front end asks here
before it launches and lets the user confirm.  Which GPUs a server uses is read from
CUDA_VISIBLE_DEVICES as recorded (its profile's env): two servers that both name theirs share GPUs
only where the lists meet; one that names none sees every GPU, so it *may* share (said so).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import ValidationError

from specdebug.core.control.records import ServerRecord, box_call, group_members, state_dir_of
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.remote.api import Remote, RemoteError

GPU_VAR = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class GpuNeighbour:
    """One thing that holds (or may hold) GPUs this launch would use, as one sentence."""

    name: str  # the profile of the other server, or `bisection ID`
    sentence: str


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


async def gpu_neighbours(remote: Remote, profile: Profile, host: str) -> list[GpuNeighbour]:
    """Other running servers of this box user whose GPUs may meet the profile's, and every running
    bisection on the box (it holds the box's GPUs for its whole run), each named."""
    from specdebug.core.bisect.boxlock import describe, running_bisections

    records, bisections = await asyncio.gather(other_records(remote), running_bisections(remote))
    procs = await remote.processes() if records else []
    mine = visible_gpus(profile.server.env)
    found: list[GpuNeighbour] = []
    for rec in records:
        if rec.profile == profile.name or rec.stopped_at is not None or not group_members(procs, rec):
            continue
        why = shared_gpus(mine, visible_gpus(rec.env), "it")
        if why is None:
            continue
        by = f", launched by {rec.launched_by.describe()}" if rec.launched_by else ""
        name = visible(rec.profile)
        found.append(
            GpuNeighbour(name, f"{name} (PID {rec.pid}, port {rec.port}{by}) runs on {host} and {why}")
        )
    for holder in bisections or []:
        found.append(
            GpuNeighbour(f"bisection {visible(str(holder.get('bisect', '?')))[:40]}", describe(holder, host))
        )
    return found
