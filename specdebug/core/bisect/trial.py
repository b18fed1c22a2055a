"""One trial: the candidate placed on the bisection's target and run there: clear the ports,
launch, wait ready (bounded), optional verify gate, benchmark, stop.

Built from the core services a user drives by hand over a target (core.deployment.control's
launch/watch/stop, the bench runner's target_bench_events), so a trial is exactly what `specdebug
launch --wait; specdebug bench; specdebug stop` would do, on one box (the common case: a one-node
target) or on every node of a `[deployment]` at once.  A knob of the bisection is the profile's, so
placing the candidate on its nodes applies it on every node.  It streams TrialProgress events and
ends with one Measurement, which is journaled (fsync) the moment the measuring is over, before the
stop: a kill -9 after that point costs no repeat.  Whatever happens (failure, cancel = the user's
abort), every node's server is stopped.  A node that never joins or dies (during the bench too) is
a failed start whose reason names the node (the deployment tracker's reason).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specdebug.core.bench.events import BenchDone
from specdebug.core.bench.models import BenchProgress, BenchResult
from specdebug.core.bench.runner import BenchError, BenchRequest, target_bench_events
from specdebug.core.bisect.gate import Gate, check_gate
from specdebug.core.bisect.judge import metrics_of
from specdebug.core.bisect.knobs import NAME_SUFFIX
from specdebug.core.bisect.models import (
    Measurement,
    Phase,
    Role,
    Settings,
    Status,
    TrialProgress,
)
from specdebug.core.control import actions as server_control
from specdebug.core.control.actions import LaunchRefused
from specdebug.core.control.events import ServerPhase, Verdict
from specdebug.core.control.records import (
    ServerRecord,
    find_port_holder,
    forget_record,
    group_members,
    load_record,
)
from specdebug.core.deployment.control import (
    NodeEvent,
    finish_launches,
    launch_target,
    records_of,
    stop_target,
    watch_target,
)
from specdebug.core.deployment.place import Deployment, node_record_name, place
from specdebug.core.deployment.status import target_status
from specdebug.core.deployment.tracker import DeploymentVerdict
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.records import BisectLaunchRecord, BisectStopRecord, BisectTrialRecord
from specdebug.core.target import Target, target_of
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote, RemoteError

logger = logging.getLogger(__name__)

Clock = Callable[[], float]
# what an argument parser prints when it rejects the command line (argparse, click, vLLM's)
ARGS_REJECTED = re.compile(
    r"error: (unrecognized arguments|argument |invalid choice|the following arguments are required)"
    r"|^usage: |No such option|Got unexpected extra argument",
    re.MULTILINE,
)
STOP_GRACE_S = 10.0


class TrialError(SpecdebugError):
    """The bisection cannot go on (the port is held by something that is not ours)."""


@dataclass
class TrialSpec:
    bisect: str
    index: int
    role: Role
    profile: Profile
    fingerprint: str
    applied: list[str]
    settings: Settings
    gate: Gate | None = None
    gate_judges: bool = True  # False for the ends: the gate is only observed, the bench always runs
    ours: list[str] = field(default_factory=list)  # profile names this bisection may have left running
    expected_startup_s: float | None = None
    forget: bool = False  # remove the server record after the stop (candidates)


@dataclass(frozen=True)
class Nodes:
    """Where a bisection's trials run: every node's connection (host -> Remote, in rank order) and
    how a candidate is placed on them (the verb's `place`, with its ssh config for the leader's
    address): each trial's target is the candidate placed on these same nodes.  `one` is one box's."""

    remotes: Mapping[str, Remote]
    place: Callable[[Profile], Deployment]

    @classmethod
    def one(cls, remote: Remote) -> Nodes:
        """One box (a profile without `[deployment]`): the candidate is one node on this connection."""
        return cls(remotes={remote.name: remote}, place=lambda p: place(p, remote.name))

    def target(self, profile: Profile) -> Target:
        return target_of(self.place(profile), self.remotes)

    def record_names(self, names: list[str], rank: int) -> list[str]:
        """The records these bisection profiles left on the node of this rank."""
        return [node_record_name(n, rank) for n in names]


def gpu_summary(gpus: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "index": g.index,
            "temperature_c": g.temperature_c,
            "clocks_sm_mhz": g.clocks_sm_mhz,
            "throttle_reasons": list(g.throttle_reasons or []),
        }
        for g in gpus
    ]


def begin(spec: TrialSpec, clock: Clock) -> tuple[Measurement, Callable[..., TrialProgress]]:
    """A trial's Measurement, stamped with its config and start, and its progress events (elapsed
    since then)."""
    m = Measurement(
        bisect=spec.bisect,
        config=spec.profile.name,
        fingerprint=spec.fingerprint,
        settings=spec.settings.key(),
        role=spec.role,
        applied=list(spec.applied),
        started_at=clock(),
    )
    t0 = clock()

    def progress(phase: Phase, detail: str = "", fraction: float | None = None) -> TrialProgress:
        return TrialProgress(
            index=spec.index, phase=phase, detail=detail, fraction=fraction, elapsed_s=clock() - t0
        )

    return m, progress


def launch_journal(spec: TrialSpec, journal: EventJournal | None) -> EventJournal | None:
    """Where a trial's launch, verdict and stop are journaled.  The ends are the user's profiles: as
    any launch's (they feed the startup ETA); a candidate's are the bisection's own business
    (bisect_launch/stop), so None."""
    return journal if spec.role in (Role.GOOD, Role.BAD, Role.DRIFT) else None


async def clear_port(remote: Remote, profile: Profile, ours: list[str]) -> list[str]:
    """Stop servers this bisection launched that are still up (`ours`: by profile name); refuse when
    anything else holds the port, the profile's own server launched by hand included (never stopped
    without asking).  Returns what was stopped."""
    stopped: list[str] = []
    procs = await remote.processes()
    for name in dict.fromkeys(ours):
        record = await load_record(remote, name)
        if record is None or record.stopped_at is not None:
            continue
        if name != profile.name and record.port != profile.server.port:
            continue
        if group_members(procs, record):
            await server_control.stop_record(remote, record, grace_s=STOP_GRACE_S)
            whose = (
                "a server left running by this bisection"
                if NAME_SUFFIX in name
                else "the profile's own server"
            )
            stopped.append(f"{name} (pid {record.pid}, {whose})")
            procs = await remote.processes()
    holder = await find_port_holder(remote, profile.server.port)
    if holder.listening:
        raise TrialError(
            f"{holder.describe()}: not a server of this bisection, so it is left alone; stop it first"
        )
    return stopped


async def stop_leftovers(remote: Remote, names: list[str], journal: EventJournal | None = None) -> list[str]:
    """Stop every server of these records (this bisection's, left by a run that was killed) that
    still runs, whatever port it holds; returns each one stopped, named.  A resume that needs no
    launch (everything cached) must not leave the killed run's server holding the GPUs."""
    stopped: list[str] = []
    procs = await remote.processes()
    for name in dict.fromkeys(names):
        record = await load_record(remote, name)
        if record is None or record.stopped_at is not None or not group_members(procs, record):
            continue
        result = await server_control.stop_record(remote, record, grace_s=STOP_GRACE_S)
        if journal is not None and result.stopped:
            journal.append(BisectStopRecord(profile=name, pid=record.pid, host=record.host or None))
        stopped.append(f"{name} (pid {record.pid}, port {record.port})")
        procs = await remote.processes()
    return stopped


async def run_trial(
    remote: Remote,
    spec: TrialSpec,
    *,
    journal: EventJournal | None = None,
    clock: Clock = time.time,
    nodes: Nodes | None = None,
) -> AsyncIterator[TrialProgress | Measurement]:
    """Measure one config once on its target (the candidate placed on `nodes`, else one node on
    `remote`); yields progress, then the Measurement (already journaled)."""
    target = (nodes or Nodes.one(remote)).target(spec.profile)
    m, progress = begin(spec, clock)
    own = launch_journal(spec, journal)
    records: dict[str, ServerRecord] = {}
    try:
        async for step in _clear_ports(target, spec, progress):
            yield step
        yield progress(Phase.LAUNCH, spec.profile.name, 0.0)
        try:
            launched = await launch_target(target, journal=own, clock=clock)
            records = records_of(launched)  # from here on the finally stops them, whatever follows
            await finish_launches(launched)
        except (RemoteError, LaunchRefused) as exc:  # a deployment's message names the node
            m.status, m.reason = Status.FAILED_START, f"launch failed: {exc}"
        if records and journal is not None:  # the ends' too: what a resume may stop as its own
            journal.append(_launch_record(target, spec, records), sync=True)
        if records and m.status is Status.OK:
            async for step in _wait_ready(target, spec, records, m, progress, own, clock):
                yield step
        leader = target.leader
        if m.status is Status.OK and spec.gate is not None:
            yield progress(Phase.GATE, spec.gate.expr)
            m.gate = await check_gate(target.leader_remote, leader.profile, records[leader.host], spec.gate)
            if m.gate.passed is False and spec.gate_judges:
                m.status = Status.GATED
                m.reason = f"gate {spec.gate.expr}: {m.gate.name} = {m.gate.value:.2f}"
            elif m.gate.passed is None:
                m.warnings.append(
                    f"gate {spec.gate.expr}: no {spec.gate.name} in the log, benchmarked instead"
                )
        if m.status is Status.OK:
            async for got in bench(target, spec, progress):
                if isinstance(got, TrialProgress):
                    yield got
                else:
                    take_result(m, got)
            if target.multi:
                await _still_one(target, m)
        m.finished_at = clock()
        if journal is not None:
            journal.append(BisectTrialRecord(trial=m), sync=True)
        yield progress(Phase.STOP, spec.profile.name)
    finally:
        if records:
            await _stop(target, spec, records, journal, own)
    yield m


async def _clear_ports(
    target: Target, spec: TrialSpec, progress: Callable[..., TrialProgress]
) -> AsyncIterator[TrialProgress]:
    """This bisection's leftovers stopped on every node; anything else on a port refuses."""
    for node in target.nodes:
        yield progress(Phase.PORT, target.named(node, f"port {node.profile.server.port}"))
        try:
            stopped = await clear_port(
                target.remote(node), node.profile, target.record_names(spec.ours, node)
            )
        except TrialError as exc:
            raise TrialError(target.named(node, exc)) from None
        if stopped:
            yield progress(Phase.PORT, "stopped " + target.named(node, ", ".join(stopped)))


def _launch_record(
    target: Target, spec: TrialSpec, records: Mapping[str, ServerRecord]
) -> BisectLaunchRecord:
    leader = records[target.leader.host]
    return BisectLaunchRecord(
        profile=spec.profile.name,
        pid=leader.pid,
        port=leader.port,
        bisect=spec.bisect,
        host=_host(target, leader),
    )


def _host(target: Target, record: ServerRecord) -> str | None:
    """The host a journal record names: a deployment's leader by its node, one box as its record says."""
    return target.leader.host if target.multi else (record.host or None)


async def _wait_ready(
    target: Target,
    spec: TrialSpec,
    records: dict[str, ServerRecord],
    m: Measurement,
    progress: Callable[..., TrialProgress],
    own: EventJournal | None,
    clock: Clock,
) -> AsyncIterator[TrialProgress]:
    """Every node's startup as progress; a target that is not ready is a failed start (or an invalid
    config, when the server rejected its arguments).  One node's verdict is its server's own."""
    verdict: DeploymentVerdict | None = None
    node_verdict: Verdict | None = None
    async for ev in watch_target(target, records, journal=own, clock=clock):
        if isinstance(ev, DeploymentVerdict):
            verdict = ev
        elif isinstance(ev, NodeEvent) and isinstance(ev.event, ServerPhase):
            frac = None
            if spec.expected_startup_s:
                frac = min(0.99, ev.event.elapsed_s / spec.expected_startup_s)
            yield progress(Phase.READY, target.named(ev.host, ev.event.name), frac)
        elif isinstance(ev, NodeEvent) and isinstance(ev.event, Verdict):
            node_verdict = ev.event
    assert verdict is not None
    if not target.multi and node_verdict is not None:
        m.startup_s = node_verdict.elapsed_s
        excerpt: list[str] = list(node_verdict.excerpt)
        ready, reason = node_verdict.verdict == "ready", node_verdict.reason
    else:
        m.startup_s = verdict.elapsed_s
        excerpt = [str(line) for line in (verdict.leader or {}).get("excerpt") or []]
        ready, reason = verdict.verdict == "ready", verdict.reason
        if ready:
            yield progress(Phase.READY, "ready")
    if not ready:
        rejected = any(ARGS_REJECTED.search(line) for line in excerpt)
        m.status = Status.INVALID if rejected else Status.FAILED_START
        m.reason = f"{'rejected its arguments' if rejected else 'failed to start'}: {reason}"


async def _stop(
    target: Target,
    spec: TrialSpec,
    records: Mapping[str, ServerRecord],
    journal: EventJournal | None,
    own: EventJournal | None,
) -> None:
    """Every node's server stopped (and its record forgotten for a candidate), whatever happened."""
    leader = records.get(target.leader.host)
    with contextlib.suppress(RemoteError, OSError):
        res = await stop_target(target, grace_s=STOP_GRACE_S, journal=own, records=records)
        if journal is not None and res.stopped and leader is not None:
            journal.append(
                BisectStopRecord(profile=spec.profile.name, pid=leader.pid, host=_host(target, leader))
            )
        if spec.forget:
            for node in target.reachable():
                await forget_record(target.remote(node), node.profile.name)


async def _still_one(target: Target, m: Measurement) -> None:
    """A node that died during the benchmark makes the figure not the deployment's: a failed start
    naming the node (the leader of SGLang keeps serving when a worker node dies)."""
    try:
        st = await target_status(target)
    except RemoteError:
        return
    if st.state != "running":
        m.status = Status.FAILED_START
        m.reason = f"a node died during the benchmark: {st.reason or st.state}"


async def bench(
    target: Target, spec: TrialSpec, progress: Callable[..., TrialProgress]
) -> AsyncIterator[TrialProgress | BenchResult | Exception]:
    """The bench stream on the target's leader (core.bench.runner.target_bench_events): its progress
    becomes TrialProgress events, then the result (or the error that kept it from running)."""
    total = spec.settings.requests
    request = BenchRequest(
        requests=spec.settings.requests,
        output_len=spec.settings.output_len,
        concurrency=spec.settings.concurrency,
        input_len=spec.settings.input_len,
    )
    yield progress(Phase.BENCH, f"0/{total} requests", 0.0)
    events = target_bench_events(target, request, journal=None)
    result: BenchResult | Exception | None = None
    try:
        async for ev in events:
            if isinstance(ev, BenchProgress) and ev.total_requests:
                detail = f"{ev.done_requests}/{ev.total_requests} requests"
                if ev.tok_s:
                    detail += f", {ev.tok_s:.1f} tok/s"
                yield progress(Phase.BENCH, detail, ev.done_requests / ev.total_requests)
            elif isinstance(ev, BenchDone):
                result = ev.result
    except (BenchError, RemoteError) as exc:
        result = exc
    finally:
        await events.aclose()  # an abandoned run (the trial was cancelled) ends here, recording nothing
    if result is not None:
        yield result


def take_result(m: Measurement, item: BenchResult | Exception) -> None:
    if isinstance(item, Exception):
        m.status, m.reason = Status.BENCH_FAILED, f"benchmark failed: {item}"
        return
    m.bench_s = item.duration_s
    m.metrics = metrics_of(item)
    m.gpu_before, m.gpu_after = gpu_summary(item.gpu_before), gpu_summary(item.gpu_after)
    m.warnings += [w for w in item.warnings if w.startswith("GPU")]
    # kept as figures, said once for the whole bisection (finish.py): a warning per run was a line per launch
    m.box_cpu_wait, m.client_cpu_wait = item.box_cpu_wait, item.client_cpu_wait
    if item.status != "done":
        m.status = Status.BENCH_FAILED
        m.reason = f"benchmark {item.status}: {'; '.join(item.errors[:2]) or 'no request succeeded'}"


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
    for name in ("dist_init_port", "leader_address"):
        if getattr(a, name) != getattr(b, name):
            return f"[deployment].{name} differs ({getattr(a, name)} vs {getattr(b, name)}): make it equal"
    return None
