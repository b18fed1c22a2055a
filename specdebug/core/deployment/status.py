"""`status` of a target: every node's one-box status and one answer for the target.

Apart from control.py (launch, watch, stop): `specdebug status` is the verb users run most, and it
should not pay for the launch path, the journal or the records (tests/unit/test_cli_table.py holds it).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import Field

from specdebug.core.control.actions import ServerStatus
from specdebug.core.control.records import ServerRecord
from specdebug.core.deployment.place import Node
from specdebug.core.deployment.tracker import NodeSummary
from specdebug.core.limits import cap_text
from specdebug.core.model import Model
from specdebug.core.target import Target
from specdebug.remote.api import Remote, RemoteError


class DeploymentStatus(Model):
    """`status` on a deployment: running only when every node's group runs; FAILED naming the node
    whose group is gone (or unproven) while another still runs."""

    type: Literal["deployment_status"] = "deployment_status"
    profile: str
    state: Literal["running", "failed", "stopped", "not_launched", "exited", "unverified"]
    reason: str = ""
    nodes: list[NodeSummary] = Field(default_factory=list)
    node_status: list[ServerStatus] = Field(default_factory=list)
    health: int | None = None  # the leader's

    def describe(self) -> str:
        lines = [f"{self.profile}: {self.state}" + (f" ({self.reason})" if self.reason else "")]
        for n in self.nodes:
            who = f"PID {n.pid} PGID {n.pgid}" if n.pid else "no record"
            lines.append(
                f"  node {n.rank} {n.host}: {n.state}, {who}" + (f" ({n.reason})" if n.reason else "")
            )
        return "\n".join(lines)


async def target_status(target: Target) -> DeploymentStatus:
    """Every node's status and the target's (`node_status`: each node's own; a one-node target's
    verbs print its one ServerStatus as it is)."""
    from specdebug.core.control.actions import status

    deployment = target.deployment

    async def one(node: Node) -> ServerStatus:
        if node.host not in target.remotes:
            port = node.profile.server.port
            return ServerStatus(
                profile=node.profile.name, state="unverified", reason="not connected", port=port
            )
        try:
            return await status(target.remote(node), node.profile)
        except RemoteError as exc:
            if not target.multi:  # one box: its error is the answer (the verb says it, exit 1), as always
                raise
            return ServerStatus(
                profile=node.profile.name, state="unverified", reason=str(exc), port=node.profile.server.port
            )

    sts = await asyncio.gather(*(one(n) for n in deployment.nodes))
    nodes = [
        NodeSummary(
            host=n.host,
            rank=n.rank,
            pid=s.record.pid if s.record else None,
            pgid=s.record.pgid if s.record else None,
            state=s.state,
            reason=s.reason,
            log_file=s.record.log_file if s.record else None,
            port=s.port,
        )
        for n, s in zip(deployment.nodes, sts, strict=True)
    ]
    lines = await asyncio.gather(
        *(
            watchdog_line(target.remote(n), s.record)
            for n, s in zip(deployment.nodes, sts, strict=True)
            if s.state == "running" and s.record is not None
        )
    )
    running = [n for n, s in zip(nodes, sts, strict=True) if s.state == "running" and s.record is not None]
    for summary, line in zip(running, lines, strict=True):
        if line is not None:  # its group lives, but a rank's collective timed out: the group is broken
            summary.state, summary.reason = "failed", f"NCCL watchdog: {line}"
    out = DeploymentStatus(
        profile=deployment.profile.name, state="running", nodes=nodes, node_status=list(sts)
    )
    out.health = sts[0].health
    failed = next(
        (s.record.failed_launch for s in sts if s.state == "running" and s.record and s.record.failed_launch),
        None,
    )
    if failed is not None:  # the launch said failed; its groups living on do not make it running
        for n in nodes:
            if n.host == failed.node and n.state == "running":
                n.state, n.reason = "failed", "the failed launch named this node"
        alive = [n.host for n, s in zip(nodes, sts, strict=True) if s.state == "running"]
        out.state = "failed"
        out.reason = f"launch failed: {failed.reason}; its processes still run on {', '.join(alive)}"
        return out
    states = {n.state for n in nodes}
    if states == {"running"}:
        return out
    down = states - {"running", "unverified"}
    if down and ("running" in states or "failed" in states):  # an unreachable node is not a dead one
        bad = [n for n in nodes if n.state != "running"]
        out.state = "failed"
        still = [n.host for n in nodes if n.state == "running"]
        out.reason = "; ".join(f"{n.host}: {n.state}" + (f" ({n.reason})" if n.reason else "") for n in bad)
        out.reason += f"; {', '.join(still)} still running" if still else ""
        return out
    for state in ("unverified", "exited", "stopped", "not_launched"):
        if state in states:
            out.state = state
            break
    out.reason = "; ".join(f"{n.host}: {n.state}" for n in nodes)
    return out


# ProcessGroupNCCL's watchdog (shared/notes/multinode.md 1.4, 1.8: sglang#3932, vllm#13535): the line
# with "last completed NCCL work" names how far the rank got (compare it across ranks: the laggard)
WATCHDOG_RX = (
    r"ProcessGroupNCCL\.cpp:\d+\] .*(?:Watchdog caught collective operation timeout|last completed NCCL work)"
)


async def watchdog_line(remote: Remote, record: ServerRecord) -> str | None:
    """The last NCCL watchdog line of this run in the node's log (None: none, or the log unreadable)."""
    from specdebug.core.logs.matches import follow_match_batches
    from specdebug.core.logs.parser import LogParser

    parser = LogParser("none", grep=[WATCHDOG_RX], from_start=True)
    progress: str | None = None  # the last line saying how far the rank got
    other: str | None = None
    try:
        async for batch in follow_match_batches(
            remote, record.log_file, parser, offset=record.log_offset, once=True
        ):
            for m in batch:
                text = getattr(m, "line", None)
                if isinstance(text, str) and "last completed" in text:
                    progress = text
                elif isinstance(text, str):
                    other = text
    except RemoteError:
        return None
    last = progress or other
    return cap_text(last, 300) if last is not None else None
