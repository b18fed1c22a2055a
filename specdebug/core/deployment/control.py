"""Launch, watch, stop, attach and ask after a target: the one-box services run on every node at once.

Every front end hands these a `core.target.Target`; a one-box profile is a one-node target, so the
`launch`/`stop`/`status` verbs, the Startup pane and a bisection's trials all come here, with one
node or many.  Each node is an ordinary one-box server (its Node profile), so the launch, the three
watchers, the process-group proof before every signal and the records are the one-box code's.  What
is the target's: the order (workers first, the leader last, as SGLang's and vLLM's docs advise), the
refusal of the whole launch when any node cannot launch (nothing is started then), one verdict from
every node's events (tracker.py), and a status that is FAILED, naming the node, when any node's
group is gone, even while the leader still answers.  Messages name the node only on a multi-node
target (`Target.multi`): a one-box profile's read as they always did.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from specdebug.capability import require_write
from specdebug.core.control.actions import LaunchRefused
from specdebug.core.control.launch import Launching
from specdebug.core.control.records import ServerRecord, StopResult
from specdebug.core.deployment.place import Node
from specdebug.core.deployment.tracker import DeploymentTracker, DeploymentVerdict
from specdebug.core.journal import EventJournal
from specdebug.core.limits import cap_text
from specdebug.core.model import Model
from specdebug.core.records import DeploymentVerdictRecord
from specdebug.core.target import Target
from specdebug.errors import SpecdebugError
from specdebug.remote.api import RemoteError

RENDEZVOUS_CHECK_S = 1.0  # while a node waits at init: do its processes hold the rendezvous connection?


@dataclass(frozen=True)
class _Joined:
    connected: bool


@dataclass(frozen=True)
class _Store:
    """Who listens on the rendezvous port on the leader's box (rank 0's store)."""

    listening: bool
    pids: list[int]


class NodeEvent(Model):
    """A startup event of one node (events carry their node)."""

    type: Literal["node_event"] = "node_event"
    host: str
    rank: int
    event: Any


def require_launch(target: Target, journal: EventJournal | None) -> None:
    """A read-only seat may not launch this target: ReadOnlyError, before any check is made (a front
    end asks this before its GPU-neighbour check, which would only warn of a launch it cannot make)."""
    require_write("launch", *target.remotes.values(), journal)


async def launch_target(
    target: Target, *, journal: EventJournal | None = None, clock: Any = time.time
) -> dict[str, Launching]:
    """Start every node's server, workers first and the leader last; node host -> its launch (the
    record now; `finish_launches` waits for the journaled drift snapshots taken beside the start).

    Every node is checked first (its record, its port): one that cannot launch refuses the whole
    target, naming the node, before anything starts.  A launch that fails midway stops the
    nodes already started, so no half deployment is left behind."""
    from specdebug.core.control.launch import check_can_launch, start_launch

    require_launch(target, journal)  # a read-only seat: refused before any check

    async def check(node: Node) -> None:
        try:
            await check_can_launch(target.remote(node), node.profile)
        except LaunchRefused as exc:
            if not target.multi:
                raise
            raise LaunchRefused(target.named(node, exc), holder=exc.holder, record=exc.record) from None

    await asyncio.gather(*(check(n) for n in target.nodes))
    launched: dict[str, Launching] = {}
    for node in sorted(target.nodes, key=lambda n: (n.is_leader, -n.rank)):
        try:
            launched[node.host] = await start_launch(
                target.remote(node), node.profile, journal=journal, clock=clock, check=False
            )
        except (RemoteError, LaunchRefused) as exc:
            if launched:
                await stop_target(target, only=set(launched), grace_s=5.0)
            if not target.multi:
                raise
            raise type(exc)(target.named(node, exc)) from exc
    return launched


def records_of(launched: Mapping[str, Launching]) -> dict[str, ServerRecord]:
    return {host: la.record for host, la in launched.items()}


async def finish_launches(launched: Mapping[str, Launching]) -> None:
    """Wait until every node's LaunchRecord (with its drift snapshot) is journaled."""
    await asyncio.gather(*(la.finish() for la in launched.values()))


async def attach_target(
    target: Target,
    *,
    pid: int | None = None,
    port: int | None = None,
    log: str | None = None,
    journal: EventJournal | None = None,
) -> dict[str, ServerRecord]:
    """Adopt every node's running server (each by the PID on its node's port); pid/port/log name
    one server and so go with a one-node target only.  A node whose server cannot be adopted refuses
    the whole attach, naming the node."""
    from specdebug.core.control.actions import attach

    records: dict[str, ServerRecord] = {}
    for node in target.nodes:
        try:
            records[node.host] = await attach(
                target.remote(node), node.profile, pid=pid, port=port, log=log, journal=journal
            )
        except LaunchRefused as exc:
            if not target.multi:
                raise
            raise LaunchRefused(target.named(node, exc), holder=exc.holder, record=exc.record) from None
    return records


async def watch_target(
    target: Target,
    records: Mapping[str, ServerRecord],
    *,
    timeout_s: float | None = None,
    deadline: float | None = None,
    journal: EventJournal | None = None,
    clock: Any = time.time,
) -> AsyncIterator[NodeEvent | DeploymentVerdict]:
    """Every node's startup events (tagged with the node) and, last, the target's verdict (a
    one-node target's is its node's own verdict, which the node's watch journals already)."""
    from specdebug.core.control.watch import watch

    deployment = target.deployment

    started = min(r.started_at for r in records.values())
    tracker = DeploymentTracker(deployment, started_at=started)
    queue: asyncio.Queue[tuple[Node, Any]] = asyncio.Queue()
    for node in deployment.nodes:
        rec = records[node.host]
        tracker.launched(node.host, pid=rec.pid, pgid=rec.pgid, log_file=rec.log_file)

    async def one(node: Node) -> None:
        async for ev in watch(
            target.remote(node),
            records[node.host],
            node.profile,
            timeout_s=timeout_s,
            deadline=deadline,
            journal=journal,
            clock=clock,
        ):
            await queue.put((node, ev))

    async def rendezvous() -> None:
        spec = deployment.profile.deployment
        if spec is None:
            return
        while True:
            await asyncio.sleep(RENDEZVOUS_CHECK_S)
            for host, pids in tracker.at_rendezvous():
                try:
                    got = await target.remote(host).box_op(
                        "connected_to", {"port": spec.dist_init_port, "pids": pids}, timeout=10
                    )
                except RemoteError:  # an older box helper, a drop: no conclusion this round
                    continue
                await queue.put((deployment.node(host) or deployment.leader, _Joined(bool(got.get("pids")))))
            if tracker.store_unproven():  # nobody joined: is the leader's store up at all?
                try:
                    got = await target.leader_remote.box_op(
                        "port_holder", {"port": spec.dist_init_port}, timeout=10
                    )
                except RemoteError:
                    continue
                pids = [int(p) for p in got.get("pids") or []]
                await queue.put((deployment.leader, _Store(bool(got.get("listening")), pids)))

    tasks = [asyncio.create_task(one(n)) for n in deployment.nodes]
    tasks.append(asyncio.create_task(rendezvous()))
    try:
        while True:
            node, ev = await queue.get()
            if isinstance(ev, _Joined):
                verdict = tracker.rendezvous(node.host, ev.connected, clock())
            elif isinstance(ev, _Store):
                verdict = tracker.store(ev.listening, ev.pids, clock())
            else:
                yield NodeEvent(host=node.host, rank=node.rank, event=ev)
                verdict = tracker.feed(node.host, ev, clock())
            if verdict is not None:
                if journal is not None and target.multi:
                    journal.append(DeploymentVerdictRecord(outcome=verdict), sync=True)
                if verdict.verdict == "failed":
                    await _keep_failed(target, records, verdict)
                yield verdict
                return
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks, timeout=5)


SAVE_TIMEOUT_S = 15.0


async def _keep_failed(
    target: Target, records: Mapping[str, ServerRecord], verdict: DeploymentVerdict
) -> None:
    """Write the failed verdict into every node's record: its groups may all live on (a hung leader,
    a worker waiting for it), and `status` must not call that deployment running.  A node whose
    record cannot be written keeps its old one (status then judges by its group, as before)."""
    from specdebug.core.control.records import FailedLaunch, save_record

    failed = FailedLaunch(reason=cap_text(verdict.reason, 2000), node=verdict.failed_node, at=verdict.at)

    async def one(node: Node) -> None:
        record = records.get(node.host)
        if record is None or node.host not in target.remotes:
            return
        try:
            await asyncio.wait_for(
                save_record(target.remote(node), record.model_copy(update={"failed_launch": failed})),
                SAVE_TIMEOUT_S,
            )
        except (RemoteError, SpecdebugError, TimeoutError):
            pass

    await asyncio.gather(*(one(n) for n in target.nodes))


class DeploymentStop(Model):
    """`stop` on a target: every node's StopResult; stopped only when nothing is left on any
    (`results`, rank order: a one-node target's verbs print its one StopResult as it is)."""

    type: Literal["deployment_stopped"] = "deployment_stopped"
    profile: str
    stopped: bool
    nodes: list[dict[str, Any]] = Field(default_factory=list)
    message: str = ""
    results: list[StopResult] = Field(default_factory=list, exclude=True)


async def stop_target(
    target: Target,
    *,
    grace_s: float = 10.0,
    journal: EventJournal | None = None,
    only: set[str] | None = None,
    records: Mapping[str, ServerRecord] | None = None,
) -> DeploymentStop:
    """Stop every node at once, each by its proven process group (`only`: these hosts).  records:
    the servers the caller launched (host -> record), stopped as launched (a trial's), instead of
    as each node's record on its box now says."""
    from specdebug.core.control.actions import stop, stop_record

    nodes = [n for n in target.nodes if only is None or n.host in only]

    async def one(node: Node) -> StopResult:
        if node.host not in target.remotes:
            return StopResult(profile=node.profile.name, refused=True, message="not stopped: not connected")
        remote = target.remote(node)
        try:
            if records is not None and node.host in records:
                return await stop_record(remote, records[node.host], grace_s=grace_s, journal=journal)
            return await stop(remote, node.profile, grace_s=grace_s, journal=journal)
        except RemoteError as exc:
            return StopResult(profile=node.profile.name, refused=True, message=f"not stopped: {exc}")

    results = await asyncio.gather(*(one(n) for n in nodes))
    rows = [
        {"host": n.host, "rank": n.rank, **r.model_dump(mode="json")}
        for n, r in zip(nodes, results, strict=True)
    ]
    ok = all(r.stopped for r in results)
    lines = [target.named(n, r.message) for n, r in zip(nodes, results, strict=True)]
    return DeploymentStop(
        profile=target.profile.name, stopped=ok, nodes=rows, message="; ".join(lines), results=list(results)
    )
