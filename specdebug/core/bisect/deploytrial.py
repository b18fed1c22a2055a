"""One trial of a deployment (a profile with `[deployment]`): the whole deployment is the config.

A knob of the bisection is the profile's (an env var or flag in `[server]`), so placing the
candidate on its nodes applies it on every node at once.  A trial is what `specdebug launch
--wait; bench; stop` do on a deployment: clear every node's port of this bisection's leftovers,
launch every node (workers first, core.deployment.control), wait until the deployment is READY as
one, optionally gate on the leader's log, benchmark the leader with every node's GPUs recorded,
and stop every node whatever happens.  A node that never joins or dies is a failed start whose
reason names the node (the deployment tracker's reason); so is one that dies during the bench.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping

from specdebug.core.bisect.gate import check_gate
from specdebug.core.bisect.models import (
    Measurement,
    Phase,
    Status,
    TrialProgress,
)
from specdebug.core.bisect.trial import (
    ARGS_REJECTED,
    STOP_GRACE_S,
    Nodes,
    TrialError,
    TrialSpec,
    begin,
    bench,
    clear_port,
    launch_journal,
    take_result,
)
from specdebug.core.control.actions import LaunchRefused
from specdebug.core.control.events import ServerPhase
from specdebug.core.control.records import ServerRecord, forget_record
from specdebug.core.deployment.control import (
    NodeEvent,
    finish_launches,
    launch_target,
    records_of,
    stop_target,
    watch_target,
)
from specdebug.core.deployment.place import Deployment
from specdebug.core.deployment.status import target_status
from specdebug.core.deployment.tracker import DeploymentVerdict
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.records import BisectLaunchRecord, BisectStopRecord, BisectTrialRecord
from specdebug.core.target import target_of
from specdebug.remote.api import Remote, RemoteError

Clock = Callable[[], float]


def refusal(good: Profile, bad: Profile) -> str | None:
    """Why these two profiles cannot be bisected as deployments (None: they can).  A bisection
    moves knobs, not placement: both ends on the same nodes with the same rendezvous.  What
    `node_env` / `node_args` set differently on a node is a knob of that node (core.bisect.nodeknobs)."""
    a, b = good.deployment, bad.deployment
    if a is None and b is None:
        return None
    if a is None or b is None:
        has, lacks = ("bad", "good") if a is None else ("good", "bad")
        return f"the {has} profile has [deployment] and the {lacks} one does not: both must run on the same nodes"
    if a.nodes != b.nodes:
        return (
            f"the deployments' nodes differ (good: {', '.join(a.nodes)}; bad: {', '.join(b.nodes)}): "
            "a bisection moves knobs on the same nodes, not nodes"
        )
    for field in ("dist_init_port", "leader_address"):
        if getattr(a, field) != getattr(b, field):
            return f"[deployment].{field} differs ({getattr(a, field)} vs {getattr(b, field)}): make it equal"
    return None


async def run_deployment_trial(
    nodes: Nodes, spec: TrialSpec, *, journal: EventJournal | None = None, clock: Clock = time.time
) -> AsyncIterator[TrialProgress | Measurement]:
    """Measure one config of a deployment once; yields progress, then the Measurement (journaled)."""
    dep = nodes.place(spec.profile)
    leader = dep.leader
    remotes = nodes.remotes
    m, progress = begin(spec, clock)
    own = launch_journal(spec, journal)
    records: dict[str, ServerRecord] = {}
    try:
        for node in dep.nodes:  # this bisection's leftovers stopped; anything else on a port refuses
            yield progress(Phase.PORT, f"{node.host}: port {node.profile.server.port}")
            try:
                stopped = await clear_port(
                    remotes[node.host], node.profile, nodes.record_names(spec.ours, node.rank)
                )
            except TrialError as exc:
                raise TrialError(f"{node.host}: {exc}") from None
            if stopped:
                yield progress(Phase.PORT, f"stopped {node.host}: {', '.join(stopped)}")
        yield progress(Phase.LAUNCH, spec.profile.name, 0.0)
        try:
            started = await launch_target(target_of(dep, remotes), journal=own)
            await finish_launches(started)
            records = records_of(started)
        except (RemoteError, LaunchRefused) as exc:  # the message names the node
            m.status, m.reason = Status.FAILED_START, f"launch failed: {exc}"
        if records and journal is not None:
            launched = BisectLaunchRecord(
                profile=spec.profile.name,
                pid=records[leader.host].pid,
                port=leader.profile.server.port,
                bisect=spec.bisect,
                host=leader.host,
            )
            journal.append(launched, sync=True)
        if records:
            verdict = None
            async for ev in watch_target(target_of(dep, remotes), records, journal=own, clock=clock):
                if isinstance(ev, NodeEvent) and isinstance(ev.event, ServerPhase):
                    frac = None
                    if spec.expected_startup_s:
                        frac = min(0.99, ev.event.elapsed_s / spec.expected_startup_s)
                    yield progress(Phase.READY, f"{ev.host}: {ev.event.name}", frac)
                elif isinstance(ev, DeploymentVerdict):
                    verdict = ev
            assert verdict is not None
            m.startup_s = verdict.elapsed_s
            if verdict.verdict == "ready":
                yield progress(Phase.READY, "ready")
            else:
                excerpt = (verdict.leader or {}).get("excerpt") or []
                rejected = any(ARGS_REJECTED.search(str(line)) for line in excerpt)
                m.status = Status.INVALID if rejected else Status.FAILED_START
                m.reason = f"{'rejected its arguments' if rejected else 'failed to start'}: {verdict.reason}"
        if m.status is Status.OK and spec.gate is not None:
            yield progress(Phase.GATE, spec.gate.expr)
            m.gate = await check_gate(remotes[leader.host], leader.profile, records[leader.host], spec.gate)
            if m.gate.passed is False and spec.gate_judges:
                m.status = Status.GATED
                m.reason = f"gate {spec.gate.expr}: {m.gate.name} = {m.gate.value:.2f}"
            elif m.gate.passed is None:
                m.warnings.append(
                    f"gate {spec.gate.expr}: no {spec.gate.name} in the log, benchmarked instead"
                )
        if m.status is Status.OK:
            async for item in bench(remotes[leader.host], spec, progress, leader.profile, remotes):
                if isinstance(item, TrialProgress):
                    yield item
                else:
                    take_result(m, item)
            await _still_one(remotes, dep, m)
        m.finished_at = clock()
        if journal is not None:
            journal.append(BisectTrialRecord(trial=m), sync=True)
        yield progress(Phase.STOP, spec.profile.name)
    finally:
        if records:
            with contextlib.suppress(RemoteError, OSError):
                res = await stop_target(target_of(dep, remotes), grace_s=STOP_GRACE_S, journal=own)
                if journal is not None and res.stopped:
                    journal.append(
                        BisectStopRecord(
                            profile=spec.profile.name, pid=records[leader.host].pid, host=leader.host
                        )
                    )
                if spec.forget:
                    for node in dep.nodes:
                        await forget_record(remotes[node.host], node.profile.name)
    yield m


async def _still_one(remotes: Mapping[str, Remote], dep: Deployment, m: Measurement) -> None:
    """A node that died during the benchmark makes the figure not the deployment's: a failed start
    naming the node (the leader of SGLang keeps serving when a worker node dies)."""
    try:
        st = await target_status(target_of(dep, remotes))
    except RemoteError:
        return
    if st.state != "running":
        m.status = Status.FAILED_START
        m.reason = f"a node died during the benchmark: {st.reason or st.state}"
