"""One trial: clear the port, launch, wait ready (bounded), optional verify gate, benchmark, stop.

Built from the core services a user drives by hand (startup.launch/watch, the bench runner,
startup.stop_record), so a trial is exactly what `specdebug launch --wait; specdebug bench;
specdebug stop` would do.  It streams TrialProgress events and ends with one Measurement, which is
journaled (fsync) the moment the measuring is over, before the stop: a kill -9 after that point
costs no repeat.  Whatever happens (failure, cancel = the user's abort), the server is stopped.
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
from specdebug.core.bench.runner import BenchError, BenchRequest, bench_events
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
from specdebug.core.control.events import ServerPhase, Verdict
from specdebug.core.control.launch import launch
from specdebug.core.control.records import (
    ServerRecord,
    find_port_holder,
    forget_record,
    group_members,
    load_record,
)
from specdebug.core.control.watch import watch
from specdebug.core.deployment.place import Deployment, node_record_name
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.records import BisectLaunchRecord, BisectStopRecord, BisectTrialRecord
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
    """Where a deployment's trials run: every node's connection (host -> Remote, in rank order)
    and how a profile is placed on its nodes (the verb's `place`, with its ssh config for the
    leader's address)."""

    remotes: Mapping[str, Remote]
    place: Callable[[Profile], Deployment]

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
    since then); one trial or a deployment's (core.bisect.deploytrial)."""
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
    """Measure one config once; yields progress, then the Measurement (already journaled).
    A deployment's config (`nodes` given) is measured on every node: core.bisect.deploytrial."""
    if nodes is not None and spec.profile.deployment is not None:
        from specdebug.core.bisect.deploytrial import run_deployment_trial  # it builds on this module

        async for step in run_deployment_trial(nodes, spec, journal=journal, clock=clock):
            yield step
        return
    profile = spec.profile
    m, progress = begin(spec, clock)
    record: ServerRecord | None = None
    own = launch_journal(spec, journal)
    try:
        yield progress(Phase.PORT, f"port {profile.server.port}")
        stopped = await clear_port(remote, profile, spec.ours)
        if stopped:
            yield progress(Phase.PORT, f"stopped {', '.join(stopped)}")
        yield progress(Phase.LAUNCH, profile.name, 0.0)
        try:
            record = await launch(remote, profile, journal=own, clock=clock, check=False)
            if journal is not None:  # the ends' too: what a resume of this bisection may stop as its own
                launched = BisectLaunchRecord(
                    profile=profile.name,
                    pid=record.pid,
                    port=record.port,
                    bisect=spec.bisect,
                    host=record.host or None,
                )
                journal.append(launched, sync=True)
        except RemoteError as exc:
            m.status, m.reason = Status.FAILED_START, f"launch failed: {exc}"
        if record is not None:
            verdict = None
            async for ev in watch(remote, record, profile, journal=own, clock=clock):
                if isinstance(ev, ServerPhase):
                    frac = None
                    if spec.expected_startup_s:
                        frac = min(0.99, ev.elapsed_s / spec.expected_startup_s)
                    yield progress(Phase.READY, ev.name, frac)
                elif isinstance(ev, Verdict):
                    verdict = ev
            assert verdict is not None
            m.startup_s = verdict.elapsed_s
            if verdict.verdict != "ready":
                rejected = any(ARGS_REJECTED.search(line) for line in verdict.excerpt)
                m.status = Status.INVALID if rejected else Status.FAILED_START
                m.reason = f"{'rejected its arguments' if rejected else 'failed to start'}: {verdict.reason}"
        if m.status is Status.OK and spec.gate is not None and record is not None:
            yield progress(Phase.GATE, spec.gate.expr)
            m.gate = await check_gate(remote, profile, record, spec.gate)
            if m.gate.passed is False and spec.gate_judges:
                m.status = Status.GATED
                m.reason = f"gate {spec.gate.expr}: {m.gate.name} = {m.gate.value:.2f}"
            elif m.gate.passed is None:
                m.warnings.append(
                    f"gate {spec.gate.expr}: no {spec.gate.name} in the log, benchmarked instead"
                )
        if m.status is Status.OK:
            async for got in bench(remote, spec, progress):
                if isinstance(got, TrialProgress):
                    yield got
                else:
                    take_result(m, got)
        m.finished_at = clock()
        if journal is not None:
            journal.append(BisectTrialRecord(trial=m), sync=True)
        yield progress(Phase.STOP, profile.name)
    finally:
        if record is not None:
            with contextlib.suppress(RemoteError, OSError):
                stop_result = await server_control.stop_record(
                    remote, record, grace_s=STOP_GRACE_S, journal=own
                )
                if journal is not None and stop_result.stopped:
                    journal.append(
                        BisectStopRecord(profile=profile.name, pid=record.pid, host=record.host or None)
                    )
                if spec.forget:
                    await forget_record(remote, profile.name)
    yield m


async def bench(
    remote: Remote,
    spec: TrialSpec,
    progress: Callable[..., TrialProgress],
    profile: Profile | None = None,
    nodes: Mapping[str, Remote] | None = None,
) -> AsyncIterator[TrialProgress | BenchResult | Exception]:
    """The bench stream: its progress becomes TrialProgress events, then the result (or the error
    that kept it from running).  A deployment: `profile` is its leader's, `nodes` every node's."""
    total = spec.settings.requests
    request = BenchRequest(
        requests=spec.settings.requests,
        output_len=spec.settings.output_len,
        concurrency=spec.settings.concurrency,
        input_len=spec.settings.input_len,
    )
    yield progress(Phase.BENCH, f"0/{total} requests", 0.0)
    events = bench_events(remote, profile or spec.profile, request, journal=None, nodes=nodes)
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
    if item.status != "done":
        m.status = Status.BENCH_FAILED
        m.reason = f"benchmark {item.status}: {'; '.join(item.errors[:2]) or 'no request succeeded'}"
