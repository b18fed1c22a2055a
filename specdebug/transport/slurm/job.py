"""Slurm host specs (`slurm:JOBID[:NODE]`) and what the Slurm clients say about an allocation.

The Slurm transport never ssh'es to a node: everything runs as a job step of the user's
allocation (`srun --jobid J --overlap -w NODE`), so the only things it needs on this machine are
the Slurm client programs and a SLURM_CONF that reaches the controller.  This module is the
argv and the parsing of their answers (scontrol's one-line records); the transport is slurm.py.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

from specdebug.transport.base import HostSpecError, RemoteError, TransportFailed
from specdebug.transport.local import abandon

SCHEME = "slurm:"
_SPEC_RE = re.compile(r"slurm:(?P<job>[0-9]{1,12})(?::(?P<node>[A-Za-z0-9][A-Za-z0-9._-]{0,199}))?")


class SlurmMissing(TransportFailed):
    """The Slurm client programs are not installed here: retrying cannot help."""


class JobGone(TransportFailed):
    """The allocation is not running (ended, cancelled, pending, unknown): no node to run on."""


class StepRefused(TransportFailed):
    """Slurm refuses this user a step in the job (another user's): retrying cannot help."""


def is_slurm_spec(text: str) -> bool:
    return text.startswith(SCHEME)


@dataclass(frozen=True)
class SlurmSpec:
    """`slurm:JOBID` (the allocation; its first node where one is needed) or `slurm:JOBID:NODE`."""

    text: str
    job: str
    node: str | None = None

    @classmethod
    def parse(cls, text: str) -> SlurmSpec:
        m = _SPEC_RE.fullmatch(text)
        if not m:
            raise HostSpecError(f"bad host spec {text!r}: expected slurm:JOBID or slurm:JOBID:NODE")
        return cls(text=text, job=m["job"], node=m["node"])

    def on(self, node: str) -> SlurmSpec:
        return SlurmSpec(text=f"{SCHEME}{self.job}:{node}", job=self.job, node=node)


@dataclass(frozen=True)
class JobInfo:
    """The allocation as `scontrol show job -o` describes it (nodes expanded)."""

    job: str
    state: str
    nodes: list[str]
    name: str = ""
    user: str = ""  # scontrol's UserId, `name(uid)`

    @property
    def uid(self) -> int | None:
        m = re.search(r"\((\d+)\)$", self.user)
        return int(m.group(1)) if m else None

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def srun_argv(job: str, node: str, argv: Sequence[str], *, name: str | None = None) -> list[str]:
    """One task on NODE as a step of the running allocation, sharing its resources (--overlap).

    No --pty: plain pipes, which is what the helper's line protocol wants; --unbuffered so a
    line the box writes arrives at once."""
    words = [
        "srun",
        f"--jobid={job}",
        "--overlap",
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--unbuffered",
        "--quiet",
    ]
    if name:
        words.append(f"--job-name={name}")
    return [*words, *argv]


async def slurm_command(argv: Sequence[str], timeout: float = 30.0) -> tuple[int, str, str]:
    """Run one Slurm client command here: (exit status, stdout, stderr)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise SlurmMissing(f"{argv[0]} not found: the Slurm client programs are not installed here") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError as exc:
        proc.kill()
        await proc.wait()
        raise RemoteError(f"{argv[0]} did not answer within {timeout:g} s") from exc
    except asyncio.CancelledError:
        # the caller is gone (an app leaving): the command ends now, and its pipes are closed while
        # the loop runs (left open, its transport said "Event loop is closed" when collected)
        abandon(proc, group=False)
        raise
    return proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def parse_record(line: str) -> dict[str, str]:
    """`Key=Value Key=Value ...` (scontrol -o) as a dict; values may not contain spaces except
    the last known free-text keys, which scontrol puts last anyway."""
    fields: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
    return fields


async def job_info(job: str) -> JobInfo:
    """The allocation's state and nodes; RemoteError naming the job when Slurm does not know it."""
    rc, out, err = await slurm_command(["scontrol", "show", "job", "-o", job])
    if rc != 0 or not out.strip():
        why = ((err or out).strip().splitlines()[-1:] or [f"exit status {rc}"])[0][:300]
        gone = "invalid job id" in why.lower()  # ended long enough ago that the controller forgot it
        raise (JobGone if gone else RemoteError)(f"slurm job {job}: {why}")
    rec = parse_record(out.splitlines()[0])
    nodes = await expand_nodes(rec.get("NodeList", ""))
    return JobInfo(
        job=job,
        state=rec.get("JobState", "UNKNOWN"),
        nodes=nodes,
        name=rec.get("JobName", ""),
        user=rec.get("UserId", ""),
    )


async def check_step_access(info: JobInfo, node: str) -> None:
    """One trivial step on NODE: StepRefused, in srun's own words, when Slurm denies this user steps
    in the job (another user's; an administrator is let through).  Other failures say nothing
    here: the helper's start reports them, and retries where that can help."""
    rc, _, err = await slurm_command(srun_argv(info.job, node, ["true"]), timeout=30)
    said = [line.strip() for line in err.splitlines() if "error" in line.lower()]
    if rc != 0 and said and "permission denied" in said[-1].lower():
        raise StepRefused(f"slurm job {info.job} (user {info.user}): {said[-1][:300]}")


async def expand_nodes(nodelist: str) -> list[str]:
    """`n[1-2],gpu7` as node names (scontrol show hostnames does Slurm's own expansion)."""
    if not nodelist or nodelist == "(null)":
        return []
    rc, out, err = await slurm_command(["scontrol", "show", "hostnames", nodelist])
    if rc != 0:
        raise RemoteError(f"cannot expand node list {nodelist!r}: {err.strip()[:200]}")
    return out.split()


async def node_address(node: str) -> str | None:
    """The node's NodeAddr (how this machine reaches it), or None when scontrol does not say."""
    rc, out, _ = await slurm_command(["scontrol", "show", "node", "-o", node])
    if rc != 0 or not out.strip():
        return None
    return parse_record(out.splitlines()[0]).get("NodeAddr") or None


def address_now(text: str, timeout: float = 10.0) -> str | None:
    """Where other nodes reach the node a `slurm:JOB[:NODE]` spec names (the job's first node when
    none is named): its NodeAddr, asked of scontrol now (blocking: placement is synchronous and runs
    once per verb).  None when Slurm cannot say (no client, the job gone): the caller's fallback."""
    import subprocess

    spec = SlurmSpec.parse(text)

    def scontrol(*words: str) -> str | None:
        try:
            res = subprocess.run(
                ["scontrol", *words], capture_output=True, text=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return res.stdout if res.returncode == 0 and res.stdout.strip() else None

    node = spec.node
    if node is None:
        job = scontrol("show", "job", "-o", spec.job)
        nodelist = parse_record(job.splitlines()[0]).get("NodeList", "") if job else ""
        names = scontrol("show", "hostnames", nodelist) if nodelist and nodelist != "(null)" else None
        node = names.split()[0] if names else None
    if node is None:
        return None
    out = scontrol("show", "node", "-o", node)
    return (parse_record(out.splitlines()[0]).get("NodeAddr") or None) if out else None


async def job_steps(job: str) -> list[str]:
    """Step ids (`J.S`) squeue still lists for the job."""
    rc, out, _ = await slurm_command(["squeue", "-h", "-s", "-j", job, "-o", "%i"])
    return [s for s in out.split() if "." in s] if rc == 0 else []


async def cancel_step(step: str) -> None:
    """`scancel JOB.STEP`; a step already gone is not an error."""
    if not re.fullmatch(r"[0-9]+\.[0-9]+", step):
        raise RemoteError(f"not a job step id: {step!r}")
    rc, out, err = await slurm_command(["scancel", step])
    text = (err or out).strip()
    # a finished step is "Invalid job id specified"; one ending now "already completing or completed"
    if rc != 0 and "already complet" not in text.lower() and "invalid job id" not in text.lower():
        raise RemoteError(f"scancel {step}: {text[:300] or f'exit status {rc}'}")
