"""What a front end knows about a deployment: one ServerMonitor per node, and the deployment's state.

Why apart from control.py: the TUI (and any other front end) folds the deployment's stream here,
without a screen and without I/O (time passed in), the way `core.control.monitor.ServerMonitor`
does for one box.  Each node keeps its own phases, PIDs, health and log lines; the deployment's
state is the tracker's verdict while starting, and after ready a node whose group is gone turns the
whole deployment FAILED naming that node, even while the leader still answers (a worker that died
leaves the leader serving nothing useful: shared/notes/multinode.md section 1.4).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from specdebug.core.control.events import NOTHING_RUNNING, Launched, LogLine, ServerState
from specdebug.core.control.monitor import (
    LOG_LINES_KEPT,
    Liveness,
    ServerMonitor,
    StateChanged,
    leftovers,
    record_now,
)
from specdebug.core.control.records import ServerRecord, StopResult, main_process_exit
from specdebug.core.deployment.control import DeploymentStop, NodeEvent
from specdebug.core.deployment.place import Deployment
from specdebug.core.deployment.status import DeploymentStatus
from specdebug.core.deployment.tracker import DeploymentVerdict
from specdebug.core.sanitize import visible
from specdebug.remote.api import Remote, RemoteError

_SUMMARY_STATE = {
    "ready": ServerState.READY,
    "failed": ServerState.FAILED,
    "exited": ServerState.EXITED,
    "starting": ServerState.STARTING,
    "running": ServerState.RUNNING,
    "stopped": ServerState.STOPPED,
}
LIVE = (ServerState.READY, ServerState.RUNNING)


@dataclass(frozen=True)
class NodeRow:
    """One node as a front end lists it (the Startup pane's phase row)."""

    host: str
    rank: int
    state: ServerState
    phase: str  # the last phase the node reached ("" before any)
    phase_at: float | None  # seconds after its launch
    pid: int | None
    processes: int
    health: int | None
    reason: str

    @property
    def role(self) -> str:
        return "leader" if self.rank == 0 else "worker"


class DeploymentMonitor:
    """A deployment as one front end sees it: every node's ServerMonitor and the verdict as one."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.nodes = {n.host: ServerMonitor() for n in deployment.nodes}
        self.log_lines: deque[str] = deque(maxlen=LOG_LINES_KEPT)  # `host: line`, as they came
        self.reset_run(ServerState.IDLE)

    def reset_run(self, state: ServerState) -> None:
        self.state = state
        self.verdict: DeploymentVerdict | None = None
        self.found: DeploymentStatus | None = None  # running when we looked: not watched from launch
        self.failed_node: str | None = None
        self.message = ""
        for m in self.nodes.values():
            m.reset_run(state)

    @property
    def leader_record(self) -> ServerRecord | None:
        return self.nodes[self.deployment.leader.host].record

    def records(self) -> dict[str, ServerRecord]:
        return {h: m.record for h, m in self.nodes.items() if m.record is not None}

    # inputs ---------------------------------------------------------------------------------

    def launched(self, records: Mapping[str, ServerRecord]) -> None:
        self.reset_run(ServerState.STARTING)
        self.log_lines.clear()
        for host, rec in records.items():
            self.nodes[host].apply(Launched(record=rec))

    def apply(self, ev: NodeEvent | DeploymentVerdict) -> StateChanged | None:
        """One item of `watch_target`'s stream; the change to announce once the verdict comes."""
        if isinstance(ev, NodeEvent):
            node = self.nodes.get(ev.host)
            if node is not None:
                node.apply(ev.event)
                if isinstance(ev.event, LogLine):
                    self.log_lines.append(f"{visible(ev.host)}: {visible(ev.event.text, tab=' ')}")
            return None
        self.verdict = ev
        self.state = ServerState.READY if ev.verdict == "ready" else ServerState.FAILED
        self.failed_node = ev.failed_node
        self.message = ev.reason
        for summary in ev.nodes:
            node = self.nodes.get(summary.host)
            if node is not None and summary.state in _SUMMARY_STATE:
                node.state = _SUMMARY_STATE[summary.state]
        return StateChanged(self.state, self.leader_record)

    def stopped(self, result: DeploymentStop) -> StateChanged:
        for row in result.nodes:
            node = self.nodes.get(str(row.get("host")))
            if node is not None:
                node.apply(
                    StopResult.model_validate({k: v for k, v in row.items() if k in StopResult.model_fields})
                )
        self.state = ServerState.STOPPED if result.stopped else ServerState.FAILED
        self.message, self.found = result.message, None
        return StateChanged(self.state, self.leader_record)

    def apply_status(self, st: DeploymentStatus) -> StateChanged | None:
        """What `status` found on open: every node running is RUNNING (READY once the leader's
        health answers 200); one node gone while another runs is FAILED naming it."""
        self.reset_run(ServerState.IDLE)
        for node, ns in zip(self.deployment.nodes, st.node_status, strict=False):
            self.nodes[node.host].apply_status(ns)
        if st.state == "running":
            self.found = st
            self.state = ServerState.READY if st.health == 200 else ServerState.RUNNING
        elif st.state == "failed":
            self.state = ServerState.FAILED
            self.failed_node = next((n.host for n in st.nodes if n.state != "running"), None)
            self.message = st.reason
            for n in st.nodes:  # its group is gone (or unproven) while another node runs
                if n.state != "running" and n.host in self.nodes:
                    self.nodes[n.host].state = ServerState.EXITED
        elif st.state in ("exited", "unverified"):
            self.message = st.reason
        return StateChanged(self.state, self.leader_record) if self.state is ServerState.READY else None

    def liveness(
        self, host: str, pids: list[int], health: int | None, record_now: ServerRecord | None = None
    ) -> StateChanged | None:
        """One node's liveness answer after ready (or found running); `record_now`: that node's
        record on the box, read once its group went (ServerMonitor.liveness)."""
        node = self.nodes.get(host)
        if node is None or self.state not in LIVE:
            return None
        node.liveness(pids, health, record_now)
        if node.state is ServerState.STOPPED:  # another specdebug session stopped (or relaunched) it
            self.state, self.found = ServerState.STOPPED, None
            self.message = node.message if not self.deployment.multi else f"{host}: {node.message}"
            return StateChanged(self.state, self.leader_record)
        if node.state is ServerState.EXITED:
            self.state, self.failed_node, self.found = ServerState.FAILED, host, None
            self.message = self._failed_message(host)
            return StateChanged(self.state, self.leader_record)
        leader = self.nodes[self.deployment.leader.host]
        if self.state is ServerState.RUNNING and leader.health == 200:
            self.state = ServerState.READY
            return StateChanged(self.state, self.leader_record)
        return None

    def leftover(self, host: str, pids: list[int], health: int | None) -> None:
        """After the deployment failed: a node's group as its box lists it now (the processes a dead
        node left, or a node still running beside it), so no PID that is gone stays in view."""
        node = self.nodes.get(host)
        if node is None or self.state is not ServerState.FAILED:
            return
        if node.state is ServerState.EXITED:
            node.leftover(pids, health)
        else:  # a node still running beside the failed one
            node.pids, node.health = pids, health
        if self.failed_node is not None and self.failed_node in self.nodes:
            self.message = self._failed_message(self.failed_node)

    def _failed_message(self, host: str) -> str:
        running = [h for h, m in self.nodes.items() if h != host and m.pids]
        return f"{host}: {self.nodes[host].message}" + (
            f"; {', '.join(running)} still running (x stops every node)" if running else ""
        )

    # questions ------------------------------------------------------------------------------

    def nothing_running(self) -> bool:
        return self.state in NOTHING_RUNNING and all(
            m.nothing_running() or not m.pids for m in self.nodes.values()
        )

    def alive(self) -> bool:
        return self.state in (*LIVE, ServerState.STARTING, ServerState.STOPPING) or any(
            m.pids for m in self.nodes.values()
        )

    def started_at(self) -> float | None:
        starts = [m.record.started_at for m in self.nodes.values() if m.record is not None]
        return min(starts) if starts else None

    def elapsed(self, now: float) -> float | None:
        if self.verdict is not None:
            return self.verdict.elapsed_s
        start = self.started_at()
        return None if start is None else max(0.0, now - start)

    def rows(self) -> list[NodeRow]:
        out = []
        for n in self.deployment.nodes:
            m = self.nodes[n.host]
            last = m.phases[-1] if m.phases else None
            reason = ""
            if self.verdict is not None:
                reason = next((s.reason for s in self.verdict.nodes if s.host == n.host), "")
            elif self.failed_node == n.host:
                reason = m.message
            out.append(
                NodeRow(
                    host=n.host,
                    rank=n.rank,
                    state=m.state,
                    phase=last.name if last is not None else "",
                    phase_at=last.elapsed_s if last is not None else None,
                    pid=m.record.pid if m.record is not None else None,
                    processes=len(m.pids),
                    health=m.health,
                    reason=reason,
                )
            )
        return out


async def watch_deployment_liveness(
    monitor: DeploymentMonitor,
    remotes: Mapping[str, Remote],
    *,
    liveness: Liveness,
    interval: float,
) -> AsyncIterator[StateChanged | None]:
    """After ready (or found running), ask every node at once each `interval`: yields each change
    (or None) while the deployment is ready or running; once it failed, a tick per re-ask of the
    processes its nodes still list, until none is left (a dead main process's workers exit after it)."""
    nodes = [n for n in monitor.deployment.nodes if n.host in remotes]

    async def one(host: str) -> tuple[list[int], int | None, ServerRecord | None] | None:
        rec = monitor.nodes[host].record
        node = monitor.deployment.node(host)
        if rec is None or node is None:
            return None
        try:
            pids, health = await liveness(remotes[host], rec, node.profile)
        except RemoteError:
            return None  # connection trouble is the header's news; ask again next time
        gone = monitor.nodes[host].gone(pids)  # who ended it: the record's stop mark, or a newer run
        return pids, health, await record_now(remotes[host], node.profile.name) if gone else None

    # each node's main process watched on its box (a pidfd in the resident helper): its end asks
    # at once, not at the next interval (a kill -9 named in a round trip; issue 43)
    leaders = [
        asyncio.create_task(main_process_exit(remotes[n.host], rec))
        for n in nodes
        if (rec := monitor.nodes[n.host].record) is not None
    ]
    was_live = monitor.state in LIVE
    try:
        while monitor.state in LIVE:
            waiting = [t for t in leaders if not t.done()]
            if waiting:
                await asyncio.wait(waiting, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(interval)
            answers = await asyncio.gather(*(one(n.host) for n in nodes))
            for node, got in zip(nodes, answers, strict=True):
                if got is not None:
                    yield monitor.liveness(node.host, *got)

        def left() -> list[ServerMonitor]:
            ended = was_live and monitor.state is ServerState.FAILED
            return [m for n in nodes if (m := monitor.nodes[n.host]).pids] if ended else []

        async for _ in leftovers(left, interval):
            for node in [n for n in nodes if monitor.nodes[n.host].pids]:
                rec = monitor.nodes[node.host].record
                if rec is None:
                    continue
                try:
                    pids, health = await liveness(remotes[node.host], rec, node.profile)
                except RemoteError:
                    continue
                monitor.leftover(node.host, pids, health)
            yield None
    finally:
        for t in leaders:
            t.cancel()
