"""The pure deployment state machine: every node's startup events in, one deployment verdict out.

Why apart from the one-box tracker: readiness of a deployment is not any one node's.  The leader
must be ready (health and its ready line), and every other node's group alive and past the
rendezvous (SGLang's worker `/health` is a dummy server that says nothing about the group, vLLM's
headless workers serve no HTTP at all: shared/notes/multinode.md section 1.2).  A node's failure is
the deployment's, named by the node, with where the other nodes are (a node that never reached the
rendezvous while the rest wait at init is the classic multi-node hang).  No I/O; time passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from specdebug.core.control.events import GroupChange, HealthChange, ServerPhase, Verdict
from specdebug.core.deployment.place import Deployment, Node
from specdebug.core.model import Model

INIT_PHASE = "init_distributed"  # both packs' rendezvous milestone (SGLang `Init torch distributed begin`)
RENDEZVOUS_GRACE_S = 5.0  # a node at init with no connection to the rendezvous this long, others joined
# the leader at init with no store listening this long, a worker waiting: SGLang sets the CUDA device
# between its init line and the store (the CUDA context of a busy 8-GPU box can take seconds), so
# more than the workers' grace; still seconds, not the ready timeout
STORE_GRACE_S = 10.0
NodeState = Literal[
    "starting", "ready", "failed", "exited", "running", "stopped", "not_launched", "unverified"
]


class NodeSummary(Model):
    """One node as the verbs report it (JSON `nodes`)."""

    host: str
    rank: int
    pid: int | None = None
    pgid: int | None = None
    state: NodeState = "starting"
    reason: str = ""
    last_phase: str | None = None
    log_file: str | None = None
    port: int | None = None
    phases: dict[str, float] = Field(default_factory=dict)  # phase -> seconds after the deployment's launch


class DeploymentVerdict(Model):
    """How a deployment's startup ended: ready as one, or failed naming the node and its reason."""

    type: Literal["deployment_verdict"] = "deployment_verdict"
    verdict: Literal["ready", "failed"]
    profile: str
    reason: str = ""
    failed_node: str | None = None
    at: float = 0.0
    elapsed_s: float = 0.0
    nodes: list[NodeSummary] = Field(default_factory=list)
    leader: dict[str, Any] | None = None  # the leader's own Verdict.summary() when it has one

    def summary(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"type"})
        data["elapsed_s"] = round(self.elapsed_s, 3)
        return data


@dataclass
class _NodeWatch:
    node: Node
    pid: int | None = None
    pgid: int | None = None
    log_file: str | None = None
    phases: list[str] = field(default_factory=list)
    phase_at: dict[str, float] = field(default_factory=dict)
    pids: list[int] | None = None
    health: int | None = None
    verdict: Verdict | None = None
    joined: bool = False  # its processes held a connection to the leader's rendezvous port
    unjoined_since: float | None = None
    store_down_since: float | None = None  # the leader: nothing of its group listened on the port since

    def past_init(self, pack_order: list[str]) -> bool:
        if INIT_PHASE not in self.phases or INIT_PHASE not in pack_order:
            return False
        after = set(pack_order[pack_order.index(INIT_PHASE) + 1 :])
        return any(p in after for p in self.phases)


def _order(kind: str) -> list[str]:
    from specdebug.engines import PACKS

    pack = PACKS.get(kind)
    return [name for name, _ in pack.milestones] if pack is not None else []


class DeploymentTracker:
    """Feeds on (node, startup event); says ready once the leader is ready and every worker is up."""

    def __init__(self, deployment: Deployment, *, started_at: float) -> None:
        self.deployment = deployment
        self.started_at = started_at
        self.nodes = {n.host: _NodeWatch(node=n) for n in deployment.nodes}
        self.order = _order(deployment.profile.server.kind)
        self.verdict: DeploymentVerdict | None = None

    def launched(self, host: str, *, pid: int, pgid: int, log_file: str) -> None:
        w = self.nodes[host]
        w.pid, w.pgid, w.log_file = pid, pgid, log_file

    def feed(self, host: str, event: Any, at: float) -> DeploymentVerdict | None:
        """One node's startup event; the deployment's verdict when this event decides it."""
        if self.verdict is not None:
            return None
        w = self.nodes[host]
        if isinstance(event, ServerPhase):
            if event.name not in w.phases:
                w.phases.append(event.name)
                w.phase_at[event.name] = event.at
        elif isinstance(event, GroupChange):
            w.pids = list(event.pids)
        elif isinstance(event, HealthChange):
            w.health = event.status
        elif isinstance(event, Verdict):
            w.verdict = event
            if event.verdict == "failed":
                return self._fail(host, self._why(w, event), at, blame=self._stuck_before(w, event))
        return self._check_ready(at)

    def _stuck_before(self, w: _NodeWatch, verdict: Verdict) -> str | None:
        """The node to blame for a node that timed out waiting at init: a live node (the leader
        too) that never printed its init line all that time hangs before the rendezvous."""
        if verdict.error_kind != "timeout" or INIT_PHASE not in w.phases or w.past_init(self.order):
            return None
        stuck = [o for o in self.nodes.values() if o is not w and o.pids and INIT_PHASE not in o.phases]
        return stuck[0].node.host if stuck else None

    # -- verdicts ---------------------------------------------------------------------------

    @staticmethod
    def _why(w: _NodeWatch, verdict: Verdict) -> str:
        """The node's reason, with NCCL's own warning from its excerpt (torch's exception alone says
        `Internal check failed`) and, for an interface problem, the pins the node was given."""
        reason = verdict.reason or verdict.error_kind or "failed"
        warn = next((line for line in reversed(verdict.excerpt) if " NCCL WARN " in line), None)
        if warn is not None:
            said = warn.split(" NCCL WARN ", 1)[1].strip()
            if said and said not in reason:
                reason += f"; NCCL WARN {said}"
            if "interface" in said.lower():
                env = w.node.profile.server.env
                pins = [f"{k}={env[k]}" for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if k in env]
                if pins:
                    reason += f" (the profile gives {w.node.host} {', '.join(pins)})"
        return reason

    def _worker_up(self, w: _NodeWatch) -> bool:
        if w.verdict is not None and w.verdict.verdict == "ready":
            return True
        if not w.pids:
            return False
        if w.past_init(self.order):
            return True
        # the leader is ready only after every rank passed the rendezvous: a live worker that
        # reached it is past it
        leader = self.nodes[self.deployment.leader.host]
        leader_ready = leader.verdict is not None and leader.verdict.verdict == "ready"
        return leader_ready and (INIT_PHASE in w.phases or not self.order)

    def _check_ready(self, at: float) -> DeploymentVerdict | None:
        leader = self.nodes[self.deployment.leader.host]
        if leader.verdict is None or leader.verdict.verdict != "ready":
            return None
        workers = [w for w in self.nodes.values() if not w.node.is_leader]
        if not all(self._worker_up(w) for w in workers):
            return None
        self.verdict = DeploymentVerdict(
            verdict="ready",
            profile=self.deployment.profile.name,
            at=at,
            elapsed_s=at - self.started_at,
            nodes=[self._summary(w, "ready") for w in self.nodes.values()],
            leader=leader.verdict.summary(),
        )
        return self.verdict

    def at_rendezvous(self) -> list[tuple[str, list[int]]]:
        """(host, live PIDs) of the nodes waiting at init: whose connection to the rendezvous to check."""
        if self.verdict is not None:
            return []
        return [
            (w.node.host, list(w.pids))
            for w in self.nodes.values()
            if w.pids and INIT_PHASE in w.phases and not w.past_init(self.order)
        ]

    def rendezvous(self, host: str, connected: bool, at: float) -> DeploymentVerdict | None:
        """A check of the node's processes' connections to the rendezvous: a node at init with none,
        for RENDEZVOUS_GRACE_S while another node joined, never reached it (the others wait in vain)."""
        if self.verdict is not None:
            return None
        w = self.nodes[host]
        if connected:
            w.joined, w.unjoined_since = True, None
            return None
        w.unjoined_since = w.unjoined_since if w.unjoined_since is not None else at
        joined = [o.node.host for o in self.nodes.values() if o.joined and o is not w]
        if not joined or at - w.unjoined_since < RENDEZVOUS_GRACE_S:
            return None
        spec = self.deployment.profile.deployment
        where = f" at {self.deployment.leader_address}:{spec.dist_init_port}" if spec is not None else ""
        waiting = [o for o in self.nodes.values() if o.joined and INIT_PHASE in o.phases]
        wait = "; ".join(
            f"{o.node.host} waiting at init for {at - o.phase_at[INIT_PHASE]:.0f} s" for o in waiting
        )
        reason = (
            f"{host}: never reached the rendezvous{where} (none of its {len(w.pids or [])} processes holds a "
            f"connection there for {at - w.unjoined_since:.0f} s, while {', '.join(joined)} joined)"
        )
        return self._fail(host, reason + (f"; {wait}" if wait else ""), at, whole=True)

    def store_unproven(self) -> bool:
        """Whether to ask the leader's box who listens on the rendezvous port: the leader is at init
        (it printed its init line, its store should be up) and no node has joined yet."""
        leader = self.nodes[self.deployment.leader.host]
        return (
            self.verdict is None
            and bool(leader.pids)
            and INIT_PHASE in leader.phases
            and not leader.past_init(self.order)
            and not any(w.joined for w in self.nodes.values())
        )

    def store(self, listening: bool, holders: list[int], at: float) -> DeploymentVerdict | None:
        """The leader's box said who listens on the rendezvous port.  Global rank 0, on the leader,
        hosts the store there (torch's TCPStore master); every other rank connects to it.  A leader
        at init whose group holds no listener there, for a grace while a worker waits at
        init, never reached the rendezvous: the workers' missing connections are its, not theirs
        (STORE_GRACE_S; measured from the first check that found no store)."""
        leader = self.nodes[self.deployment.leader.host]
        if self.verdict is None and listening and (not holders or set(holders) & set(leader.pids or [])):
            leader.store_down_since = None
            return None
        if not self.store_unproven():
            return None
        leader.store_down_since = leader.store_down_since if leader.store_down_since is not None else at
        waiting = self._waiting_at_init(exclude=leader)
        if not waiting or at - leader.store_down_since < STORE_GRACE_S:
            return None
        spec = self.deployment.profile.deployment
        port = spec.dist_init_port if spec is not None else 0
        held = "nothing listens there"
        if listening:  # a store of another run (a stale head): the workers may be talking to it
            held = (
                f"only PIDs {', '.join(map(str, holders))} listen there, none of {leader.node.host}'s server"
            )
        reason = (
            f"{leader.node.host}: never reached the rendezvous at {self.deployment.leader_address}:{port} "
            f"(rank 0 hosts the store on port {port}: {held} "
            f"{at - leader.phase_at[INIT_PHASE]:.0f} s after its init line)"
        )
        wait = "; ".join(
            f"{w.node.host} waiting at init for {at - w.phase_at[INIT_PHASE]:.0f} s" for w in waiting
        )
        return self._fail(leader.node.host, f"{reason}; {wait}", at, whole=True)

    def _waiting_at_init(self, *, exclude: _NodeWatch | None = None) -> list[_NodeWatch]:
        return [
            w
            for w in self.nodes.values()
            if w is not exclude and w.pids and INIT_PHASE in w.phases and not w.past_init(self.order)
        ]

    def rendezvous_note(self, at: float) -> str:
        """Where the nodes stand at the rendezvous: `node1: never reached the rendezvous; node0
        waiting at init for 40 s` (empty when every node is past it or none reached it)."""
        waiting = [
            w
            for w in self.nodes.values()
            if INIT_PHASE in w.phases and not w.past_init(self.order) and at - w.phase_at[INIT_PHASE] >= 1.0
        ]
        missing = [w for w in self.nodes.values() if INIT_PHASE not in w.phases]
        if not waiting:
            return ""
        parts = []
        if missing:
            parts.append(f"{', '.join(w.node.host for w in missing)}: never reached the rendezvous")
        parts += [f"{w.node.host} waiting at init for {at - w.phase_at[INIT_PHASE]:.0f} s" for w in waiting]
        return "; ".join(parts)

    def _fail(
        self, host: str, reason: str, at: float, *, whole: bool = False, blame: str | None = None
    ) -> DeploymentVerdict:
        """`blame`: the node the failure of `host` is laid to (it kept `host` waiting)."""
        note = "" if whole else self.rendezvous_note(at)
        text = reason if whole else f"{host}: {reason}"
        if note and "never reached" in note:
            text = f"{note} ({host}: {reason})"
        elif note:
            text += f" ({note})"
        leader = self.nodes[self.deployment.leader.host]
        self.verdict = DeploymentVerdict(
            verdict="failed",
            profile=self.deployment.profile.name,
            reason=text,
            failed_node=blame or host,
            at=at,
            elapsed_s=at - self.started_at,
            nodes=[
                self._summary(w, *self._failed_state(w, host, reason, blame)) for w in self.nodes.values()
            ],
            leader=leader.verdict.summary() if leader.verdict is not None else None,
        )
        return self.verdict

    def _failed_state(
        self, w: _NodeWatch, host: str, reason: str, blame: str | None
    ) -> tuple[NodeState, str]:
        if w.node.host == (blame or host):
            if blame is None:
                return "failed", reason
            return "failed", f"never reached the rendezvous (no init line while {host} waited at init)"
        state = self._state(w)
        return state, self._why(w, w.verdict) if state == "failed" and w.verdict is not None else ""

    def _state(self, w: _NodeWatch) -> NodeState:
        if w.verdict is not None:
            return "ready" if w.verdict.verdict == "ready" else "failed"
        if w.pids == []:
            return "exited"
        return "ready" if not w.node.is_leader and self._worker_up(w) else "starting"

    def _summary(self, w: _NodeWatch, state: NodeState, reason: str = "") -> NodeSummary:
        if state != "failed":
            reason = ""
            if state == "starting" and w.phases:
                reason = f"in phase {w.phases[-1]}"
        return NodeSummary(
            host=w.node.host,
            rank=w.node.rank,
            pid=w.pid,
            pgid=w.pgid,
            state=state,
            reason=reason,
            last_phase=w.phases[-1] if w.phases else None,
            log_file=w.log_file,
            port=w.node.profile.server.port,
            phases={p: round(w.phase_at[p] - self.started_at, 3) for p in w.phases},
        )
