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
before the function returns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import httpx

from specdebug.capability import require_write
from specdebug.core.bench import external, gpu, prom, serverlog
from specdebug.core.bench.builtin import BuiltinParams, run_builtin
from specdebug.core.bench.events import BenchDone, BenchEvent, BenchLine
from specdebug.core.bench.holder import NotOurServer, check_port_holder
from specdebug.core.bench.models import BenchProgress, BenchResult, NodeGpus, judge_failures
from specdebug.core.control.records import file_size, this_run_offset
from specdebug.core.drift.report import drift_warning
from specdebug.core.drift.snapshot import snapshot_or_error
from specdebug.core.httpread import SMALL_BODY, get_bounded
from specdebug.core.journal import EventJournal
from specdebug.core.model import Model
from specdebug.core.profiles import Profile
from specdebug.core.profiles.paths import box_path
from specdebug.core.records import BenchResultRecord
from specdebug.core.secrets import Scrubber, mask_argv, mask_env, scrub_tree
from specdebug.engines import ENGINES, engine_of
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote, RemoteError

if TYPE_CHECKING:
    from specdebug.core.deployment import Deployment
    from specdebug.core.target import Target

logger = logging.getLogger(__name__)

# HTTP paths that answer {"version": ...}: every engine's, tried in turn (the kind may be custom)
VERSION_PATHS = tuple(path for engine in ENGINES.values() for path in engine.version_paths)
MAX_LOG_SLICE = 8 << 20  # scan at most the last 8 MiB the server wrote during the run
MAX_OUTPUT_LINES = 5000  # external output kept for parsing (the result block is at the end)
LineFn = Callable[[str], None]
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


class ServerState(Model):
    health_status: int | None = None  # None: no answer at all
    health_error: str | None = None
    version: str | None = None
    version_note: str | None = None  # why no version was read, where a probe was cut
    ready_line: bool | None = None  # None: not checked (custom kind, or no log)


HEALTH_DEADLINE_S = 10.0  # the whole health answer
VERSION_DEADLINE_S = 10.0  # every version path together


async def server_state(client: httpx.AsyncClient, health_path: str) -> ServerState:
    """Health status and server version through the forward (both optional), each read with a
    whole-request deadline and a byte cap (core.httpread): a server that streams its /version
    forever costs VERSION_DEADLINE_S, never the benchmark."""
    st = ServerState()
    try:
        got = await get_bounded(client, health_path, deadline_s=HEALTH_DEADLINE_S, read_body=False)
        st.health_status = got.status
    except httpx.HTTPError as exc:
        st.health_error = f"{type(exc).__name__}: {exc}"
        return st
    try:
        async with asyncio.timeout(VERSION_DEADLINE_S):
            for path in VERSION_PATHS:
                st.version, note = await _version_at(client, path)
                st.version_note = note or st.version_note
                if st.version is not None:
                    break
    except TimeoutError:
        st.version_note = f"the version paths gave no whole answer within {VERSION_DEADLINE_S:g} s"
    if st.version is not None:
        st.version_note = None
    return st


async def _version_at(client: httpx.AsyncClient, path: str) -> tuple[str | None, str | None]:
    """(the version a path answers, or None with why when the answer was cut)."""
    try:
        got = await get_bounded(client, path, deadline_s=VERSION_DEADLINE_S)
    except httpx.HTTPError:
        return None, None
    if got.cut:
        return None, f"{path} answered more than {SMALL_BODY} bytes (not read)"
    if got.status != 200:
        return None, None
    try:
        data = json.loads(got.body)
    except ValueError:
        return None, None
    version = data.get("version") if isinstance(data, dict) else None
    return (version[:200], None) if isinstance(version, str) else (None, None)


async def has_ready_line(
    remote: Remote, path: str, kind: str, profile_name: str | None = None
) -> bool | None:
    """Did the *current* run print its ready line?  Launch appends to the log, so the search starts
    at the run's offset from the launch record (an earlier run's ready line proves nothing)."""
    engine = engine_of(kind)
    line = engine.ready_line if engine is not None else None
    if not line or not path:
        return None
    offset = await this_run_offset(remote, profile_name, path) if profile_name else 0
    script = 'tail -c +"$1" -- "$2" | grep -m 1 -c -F -- "$3"'
    try:
        res = await remote.run(["sh", "-c", script, "sh", str(offset + 1), path, line], timeout=30)
    except RemoteError:
        return None
    if res.exit_status not in (0, 1):
        return None
    return res.exit_status == 0


async def read_slice(remote: Remote, path: str, start: int | None, end: int | None) -> bytes:
    """The bytes the server appended between two sizes (the tail, when there is a lot)."""
    if start is None or end is None or end <= start:
        return b""
    offset = max(start, end - MAX_LOG_SLICE)
    try:
        return await remote.read_file(path, offset=offset, max_bytes=end - offset)
    except RemoteError:
        return b""


def substitute(argv: list[str], port: int) -> list[str]:
    """``{port}`` in the external command names the server's port on the box (data, no shell)."""
    return [a.replace("{port}", str(port)) for a in argv]


async def run_external(
    remote: Remote,
    argv: list[str],
    *,
    cwd: str | None = None,
    on_line: LineFn | None = None,
) -> BenchResult:
    """Run the profile's benchmark command on the box, stream its output, parse its result block."""
    lines: list[str] = []
    t0 = time.time()
    async with remote.stream(argv, cwd=cwd, stderr=True) as stream:
        async for line in stream:
            text = line if isinstance(line, str) else line.decode("utf-8", "replace")
            text = text.rstrip("\n")
            lines.append(text)
            if len(lines) > MAX_OUTPUT_LINES:
                del lines[: len(lines) - MAX_OUTPUT_LINES]
            if on_line is not None:
                on_line(text)
        status = stream.exit_status
    parsed = external.parse_output("\n".join(lines))
    if parsed is None:
        res = BenchResult(kind="external", source_format="unknown", status="failed")
        tail = [x for x in lines if x.strip()][-5:]
        res.errors = [f"no result block in the output (exit {status})", *tail]
        res.unparsed_lines = lines[-50:]
    else:
        res = parsed
        res.kind = "external"
        if status not in (0, None):
            res.warnings.append(f"benchmark command exited with status {status}")
    res.config.command = mask_argv(list(argv))
    if res.duration_s is None:
        res.duration_s = time.time() - t0
    return res


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
    fwd = await remote.forward_local_port(srv.port)
    base_url = f"http://127.0.0.1:{fwd.local_port}"
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
            result = await run_builtin(base_url, params, progress=emit)

        (gpus_after, _), others_after, size_after, _ = await asyncio.gather(
            gpu.snapshot(remote),
            gpu.snapshot_nodes(others),
            file_size(remote, log_file),
            prom.attach(result, window),
        )
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
        *_warnings(state, gpus_before, gpus_after, gpu_err, log_errors, size_before, size_after, leader),
        *_node_warnings(result.gpus_by_node, leader),
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
    from specdebug.core.deployment.control import target_status
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
    from specdebug.core.deployment.control import target_status
    from specdebug.core.target import target_of

    st = await target_status(target_of(deployment, nodes))
    if st.state not in ("running", "unverified"):
        why = f"a node failed during the benchmark: {deployment.profile.name} is {st.state}: {st.reason}"
        result.status, result.failure_reason = "failed", why
        result.warnings.append(why)
    elif st.state == "unverified" or unproven:
        result.warnings.append(unproven or f"not every node proven running after the run: {st.reason}")


def _node_warnings(by_node: dict[str, NodeGpus], leader: str | None) -> list[str]:
    """The other nodes' GPU warnings (the leader's are _warnings'), each naming its node."""
    out: list[str] = []
    for h, g in by_node.items():
        if h == leader:
            continue
        out += gpu.gpu_warnings(g.before, g.after, h)
        if g.error:
            out.append(f"no GPU state on {h}: {g.error}")
    return out


async def _none() -> None:
    return None


def _warnings(
    state: ServerState,
    before: list[Any],
    after: list[Any],
    gpu_err: str | None,
    log_errors: list[str],
    size_before: int | None,
    size_after: int | None,
    node: str | None = None,
) -> list[str]:
    out: list[str] = []
    if state.health_status != 200:
        out.append(f"server not ready: health answered HTTP {state.health_status} (still in warmup?)")
    if state.ready_line is False:
        out.append("server not ready: no ready line in the log yet (still in warmup?)")
    if state.version_note:
        out.append(f"server version unknown: {state.version_note}")
    out += gpu.gpu_warnings(before, after, node)
    if gpu_err:
        out.append(f"no GPU state{f' on {node}' if node else ''}: {gpu_err}")
    if size_before is None:
        out.append("server log not readable: no server-side metrics")
    elif size_after is not None and size_after < size_before:
        out.append("server log shrank during the run (truncated or rotated): no server-side metrics")
    if log_errors:
        out.append(f"{len(log_errors)} error line(s) in the server log during the run: {log_errors[0]}")
    return out
