"""One benchmark run end to end: conditions before, the run, conditions after, the journal.

The pane's "run benchmark" key, `specdebug bench` and a bisection trial all iterate `bench_events`
(progress, output lines, then the result: core.bench.events); `run_benchmark` is the thin helper
for callers that only want the result. Around the
measurement it records what makes a number trustworthy later: the profile fingerprint (the one
definition in specdebug.core.fingerprint; the version the server reports is kept beside it), GPU
state before/after, the server's own log figures during the run, and warnings (server not ready yet, GPU throttling, failed requests, error lines).
A run where more than 5 % of the requests failed is recorded as failed with its reason: failed
work is not a result.  Secrets (the profile's values, URL credentials, bearer values) are masked
in everything recorded or shown.  The result is appended to the session journal with fsync
before the function returns.  Its parts: core.bench.serverstate (health, version, ready line before
the run), core.bench.command (the profile's own benchmark command), core.bench.conditions (the
warnings the conditions give).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Literal

import httpx

from specdebug.capability import require_write
from specdebug.core.bench import cpuwait, gpu, prom, serverlog
from specdebug.core.bench.builtin import BuiltinParams, run_builtin
from specdebug.core.bench.command import run_external, substitute
from specdebug.core.bench.conditions import node_warnings, run_warnings
from specdebug.core.bench.events import BenchDone, BenchEvent, BenchLine
from specdebug.core.bench.holder import NotOurServer, check_port_holder
from specdebug.core.bench.models import BenchProgress, BenchResult, NodeGpus, judge_failures
from specdebug.core.bench.serverstate import has_ready_line, server_state
from specdebug.core.control.records import file_size
from specdebug.core.drift.report import drift_warning
from specdebug.core.drift.snapshot import snapshot_or_error
from specdebug.core.fingerprint import url_host
from specdebug.core.journal import EventJournal
from specdebug.core.model import Model
from specdebug.core.profiles import Profile
from specdebug.core.profiles.paths import box_path
from specdebug.core.records import BenchResultRecord
from specdebug.core.secrets import Scrubber, mask_argv, mask_env, scrub_tree
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote, RemoteError

if TYPE_CHECKING:
    from specdebug.core.deployment import Deployment
    from specdebug.core.target import Target

logger = logging.getLogger(__name__)

MAX_LOG_SLICE = 8 << 20  # scan at most the last 8 MiB the server wrote during the run
EmitFn = Callable[[BenchEvent], None]


class BenchError(SpecdebugError):
    """The benchmark could not run at all (no profile command, server unreachable...)."""


class BenchRequest(Model):
    """What the user asked for; None fields come from the profile's [bench] table."""

    kind: Literal["builtin", "external"] = "builtin"
    requests: int | None = None
    concurrency: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    seed: int | None = None
    label: str | None = None


async def read_slice(remote: Remote, path: str, start: int | None, end: int | None) -> bytes:
    """The bytes the server appended between two sizes (the tail, when there is a lot)."""
    if start is None or end is None or end <= start:
        return b""
    offset = max(start, end - MAX_LOG_SLICE)
    try:
        return await remote.read_file(path, offset=offset, max_bytes=end - offset)
    except RemoteError:
        return b""


async def bench_events(
    remote: Remote,
    profile: Profile,
    request: BenchRequest | None = None,
    *,
    journal: EventJournal | None = None,
    host: str | None = None,
    nodes: Mapping[str, Remote] | None = None,
    deployment: Deployment | None = None,
) -> AsyncGenerator[BenchEvent, None]:
    """Measure, record the conditions, append the result to the journal (fsync): BenchProgress and
    BenchLine events while it runs, then one BenchDone.  BenchError / RemoteError propagate.

    Closing the iterator (or cancelling its consumer) stops the run (HTTP streams or the remote
    command end) and records nothing.  `nodes`: a deployment's every node (host -> connection,
    the benchmarked leader `remote` among them): their GPUs are recorded too (`gpus_by_node`).
    `deployment` (with `nodes`): a deployment with a dead or failed node is refused before the run
    (BenchError naming the node), and a node that fails during it marks the result failed."""
    require_write("benchmark", remote, journal)
    queue: asyncio.Queue[BenchEvent] = asyncio.Queue()
    task = asyncio.create_task(
        _measure(remote, profile, request, journal, queue.put_nowait, host, nodes, deployment)
    )
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
                continue
            getter.cancel()
            break
        while not queue.empty():
            yield queue.get_nowait()
        yield BenchDone(result=task.result())
    finally:
        if not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # its result is not wanted any more; the reason is kept for --debug
                logger.debug("the abandoned benchmark ended with an error", exc_info=True)


def target_bench_events(
    target: Target, request: BenchRequest | None = None, *, journal: EventJournal | None = None
) -> AsyncGenerator[BenchEvent, None]:
    """`bench_events` on the target's leader (the node that serves the API): on a multi-node target
    every node's GPUs are recorded and a dead or failed node refuses or fails the run (the `bench`
    verb, the Bench pane and a bisection's trials all measure this way)."""
    multi = target.multi
    return bench_events(
        target.leader_remote,
        target.leader.profile,
        request,
        journal=journal,
        host=target.leader.host,
        nodes=dict(target.remotes) if multi else None,
        deployment=target.deployment if multi else None,
    )


async def run_benchmark(
    remote: Remote,
    profile: Profile,
    request: BenchRequest | None = None,
    *,
    journal: EventJournal | None = None,
    host: str | None = None,
    nodes: Mapping[str, Remote] | None = None,
    deployment: Deployment | None = None,
) -> BenchResult:
    """`bench_events` for callers that only want the result."""
    async for ev in bench_events(
        remote, profile, request, journal=journal, host=host, nodes=nodes, deployment=deployment
    ):
        if isinstance(ev, BenchDone):
            return ev.result
    raise BenchError("the benchmark ended without a result")  # pragma: no cover - bench_events ends in one


async def _measure(
    remote: Remote,
    profile: Profile,
    request: BenchRequest | None,
    journal: EventJournal | None,
    emit: EmitFn,
    host: str | None,
    nodes: Mapping[str, Remote] | None = None,
    deployment: Deployment | None = None,
) -> BenchResult:
    """The run itself; what it reports goes to `emit` (bench_events' queue)."""
    request = request or BenchRequest()
    others = {h: r for h, r in (nodes or {}).items() if r is not remote}  # the leader is `remote`
    whole = deployment if deployment is not None and nodes else None
    unproven = await _nodes_before(nodes or {}, whole) if whole is not None else None
    srv = profile.server
    scrub = Scrubber.for_profile(profile)  # output lines, errors and warnings are shown and stored
    started = time.time()
    log_file = await box_path(remote, srv.log_file)  # `~/...` as every verb reads it (core.profiles.paths)
    try:  # the listener must be the recorded server, not whoever took the port (core/bench/holder.py)
        holder_note, measured = await check_port_holder(remote, profile)
    except NotOurServer as exc:
        raise BenchError(str(exc)) from None
    fwd = await remote.forward_local_port(srv.port, srv.listen_host)
    base_url = f"http://{url_host(fwd.local_host)}:{fwd.local_port}"
    window = None
    try:
        async with httpx.AsyncClient(base_url=base_url, trust_env=False) as client:
            (
                (gpus_before, gpu_err),
                others_before,
                size_before,
                state,
                ready,
                drift_snap,
            ) = await asyncio.gather(
                gpu.snapshot(remote),
                gpu.snapshot_nodes(others),
                file_size(remote, log_file),
                server_state(client, profile.ready.health),
                has_ready_line(remote, log_file, srv.kind, profile.name)
                if profile.ready.require_ready_line
                else _none(),
                snapshot_or_error(remote, profile),  # what can move the number besides the profile
            )
        # the run's window opens here, on every node of a deployment (the leader first)
        box_cpu_before = await cpuwait.box_readings([remote, *others.values()])
        state.ready_line = ready
        if state.health_status is None:
            raise BenchError(f"server not reachable on port {srv.port}: {state.health_error}")
        window = prom.start(base_url, srv.kind)  # /metrics over the run's window (second source)

        if request.kind == "external":
            command = profile.bench.command
            if not command:
                raise BenchError(f"profile {profile.name!r} has no [bench] command for an external benchmark")
            argv = substitute(list(command), srv.port)
            emit(BenchProgress(phase="running"))

            def line_cb(text: str) -> None:
                emit(BenchLine(text=scrub(text)))

            result = await run_external(remote, argv, cwd=srv.cwd, on_line=line_cb)
        else:
            params = BuiltinParams.from_spec(
                profile.bench,
                requests=request.requests,
                concurrency=request.concurrency,
                input_len=request.input_len,
                output_len=request.output_len,
                seed=request.seed,
            )
            client_cpu_before = cpuwait.local_reading()  # the built-in client runs here
            result = await run_builtin(base_url, params, progress=emit)
            result.client_cpu_wait = cpuwait.share(client_cpu_before, cpuwait.local_reading())

        (gpus_after, _), others_after, size_after, _, box_cpu_after = await asyncio.gather(
            gpu.snapshot(remote),
            gpu.snapshot_nodes(others),
            file_size(remote, log_file),
            prom.attach(result, window),
            cpuwait.box_readings([remote, *others.values()]),
        )
        cpu_shares = [cpuwait.share(b, a) for b, a in zip(box_cpu_before, box_cpu_after, strict=True)]
        log_slice = await read_slice(remote, log_file, size_before, size_after)
    finally:
        prom.cancel(window)
        try:
            await fwd.close()
        except Exception:  # the connection may be gone already
            logger.debug("closing the bench forward failed", exc_info=True)

    result.label = request.label
    result.profile = profile.name
    result.server_version = state.version
    result.fingerprint = profile.fingerprint()  # one definition; the version is its own field
    result.host = host or remote.name
    by_node = dict(zip([result.host, *others], cpu_shares, strict=True))
    result.box_cpu_wait = cpuwait.worst(cpu_shares)
    result.cpu_wait_by_node = by_node if nodes else {}
    result.started_at = started
    result.finished_at = time.time()
    result.argv = mask_argv(list(srv.argv), scrub.values)
    result.env = mask_env(dict(srv.env), scrub.values)
    result.gpu_before = gpus_before
    result.gpu_after = gpus_after
    leader = result.host if nodes else None  # in a deployment every GPU warning names its node
    if nodes:
        result.gpus_by_node = {result.host: NodeGpus(before=gpus_before, after=gpus_after, error=gpu_err)}
        for h in others:
            (before, err), (after, _) = others_before[h], others_after[h]
            result.gpus_by_node[h] = NodeGpus(before=before, after=after, error=err)
    result.drift = drift_snap
    if whole is not None:
        await _nodes_after(nodes or {}, whole, result, unproven)
    log_errors: list[str] = []
    if size_before is not None and size_after is not None:
        result.server, log_errors = serverlog.server_metrics(log_slice, profile.patterns, srv.kind)
    prom.fill_server(result)
    result.warnings = [
        *([holder_note] if holder_note else []),
        *run_warnings(state, gpus_before, gpus_after, gpu_err, log_errors, size_before, size_after, leader),
        *node_warnings(result.gpus_by_node, leader),
        *(w for h, s in by_node.items() for w in cpuwait.warnings(s, None, h)),
        *cpuwait.warnings(None, result.client_cpu_wait, result.host),
        *result.warnings,
    ]
    if journal is not None and (
        moved := drift_warning(journal.records({"bench_result"}), result.fingerprint, drift_snap)
    ):
        result.warnings.append(moved)
    if result.status == "done" and not result.successful_requests and result.kind == "builtin":
        result.status = "failed"
    judge_failures(result)  # above 5 % failed requests: failed, with the reason, never a baseline
    scrubbed = BenchResult.model_validate(scrub_tree(result.model_dump(mode="json"), scrub))
    if journal is not None:
        source = measured.source if measured is not None else None  # the commit proven measured
        journal.append(BenchResultRecord(result=scrubbed, source=source), sync=True)
    return scrubbed


async def _nodes_before(nodes: Mapping[str, Remote], deployment: Deployment) -> str | None:
    """Before a deployment's run: a dead or failed node refuses it (its leader may still answer,
    serving nothing a benchmark should measure); a node that cannot be proven is a warning."""
    from specdebug.core.deployment.status import target_status
    from specdebug.core.target import target_of

    st = await target_status(target_of(deployment, nodes))
    if st.state == "unverified":
        return f"not every node proven running before the run: {st.reason}"
    if st.state != "running":
        raise BenchError(f"not benchmarked: {deployment.profile.name} is {st.state}: {st.reason}")
    return None


async def _nodes_after(
    nodes: Mapping[str, Remote], deployment: Deployment, result: BenchResult, unproven: str | None
) -> None:
    """After the run: a node that died or failed meanwhile makes the figures a broken deployment's."""
    from specdebug.core.deployment.status import target_status
    from specdebug.core.target import target_of

    st = await target_status(target_of(deployment, nodes))
    if st.state not in ("running", "unverified"):
        why = f"a node failed during the benchmark: {deployment.profile.name} is {st.state}: {st.reason}"
        result.status, result.failure_reason = "failed", why
        result.warnings.append(why)
    elif st.state == "unverified" or unproven:
        result.warnings.append(unproven or f"not every node proven running after the run: {st.reason}")


async def _none() -> None:
    return None
