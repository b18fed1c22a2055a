"""`env` on a target: every node's workers' env check, and on a deployment this run's NCCL lines.

Why in the core: the `env` verb and the TUI's Env pane both call `target_env` with the profile's
target.  Per node it is the one-box env check (on that node's connection, with its node profile:
the node's own env is what is expected there); on a multi-node target each node's NCCL lines of
this run (from the record's log offset on) join it, and together with the workers' environ give
the transport verdict (core.deployment.nccl).  A one-box profile is the one-node case.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from specdebug.core.deployment.nccl import Expected, TransportProof, prove_transport
from specdebug.core.deployment.place import Node
from specdebug.core.env.events import EnvDone, EnvEvent
from specdebug.core.env.model import EnvReport
from specdebug.core.env.probe import ServerNotRunning, env_events, query_for_profile
from specdebug.core.target import Target
from specdebug.remote.api import Remote, RemoteError

NCCL_RX = r"NCCL (?:INFO|WARN) "
MAX_NCCL_LINES = 20000  # per node: a comm init prints tens of lines per rank


async def nccl_lines(remote: Remote, node: Node) -> list[str]:
    """This run's NCCL lines in the node's log (from its record's offset), selected on the box."""
    from specdebug.core.control.records import this_run_offset
    from specdebug.core.logs.matches import follow_match_batches
    from specdebug.core.logs.parser import LogParser
    from specdebug.core.profiles.paths import box_path

    path = await box_path(remote, node.profile.server.log_file)
    offset = await this_run_offset(remote, node.profile.name, path)
    parser = LogParser("none", grep=[NCCL_RX], from_start=True)
    lines: list[str] = []
    async for batch in follow_match_batches(remote, path, parser, offset=offset, once=True):
        lines += [m.line for m in batch if hasattr(m, "line")]
        if len(lines) >= MAX_NCCL_LINES:
            break
    return lines[:MAX_NCCL_LINES]


def worker_environ(report: EnvReport) -> dict[int, dict[str, str]]:
    """PID -> the NCCL-ish variables the worker really has (its checked vars and the shown extras)."""
    out: dict[int, dict[str, str]] = {}
    for w in report.workers:
        if w.environ_state != "readable" and not w.extra:
            continue
        env = {k: v.actual for k, v in w.vars.items() if v.actual is not None and v.source == "environ"}
        out[w.pid] = {**env, **w.extra}
    return out


@dataclass(frozen=True)
class NodeEnv:
    """One node's env check: its report (None when it could not run), its NCCL lines, the problem
    (`running` False: the node's recorded server is not running there, nothing was looked at; the
    `hint` says what to do)."""

    node: Node
    report: EnvReport | None
    nccl: list[str]
    problem: str | None = None
    running: bool = True
    hint: str | None = None


async def node_env(
    remote: Remote,
    node: Node,
    *,
    expect: Mapping[str, str] | None = None,
    expect_from_launcher: bool = False,
    prefixes: Sequence[str] | None = None,
    show_secrets: bool = False,
    all_matching: bool = False,
    log_path: str | None = None,
    nccl: bool = True,
    on_event: Callable[[Node, EnvEvent], None] | None = None,
) -> NodeEnv:
    """The node's env check with its node profile (the options are query_for_profile's; the log is
    `log_path`, else the node's own from its record), then (`nccl`) its NCCL lines of this run.  A
    node whose server is not running says so; `all_matching` is a box-wide look on the node (no
    NCCL lines: they are the server's, not those processes').  on_event: each step of the check."""
    try:
        query = await query_for_profile(
            remote,
            node.profile,
            expect=expect,
            expect_from_launcher=expect_from_launcher,
            prefixes=prefixes,
            log_path=log_path,
            show_secrets=show_secrets,
            all_matching=all_matching,
        )
    except ServerNotRunning as exc:
        return NodeEnv(node, None, [], str(exc), running=False, hint=exc.hint)
    report: EnvReport | None = None
    async for ev in env_events(remote, query):
        if on_event is not None:
            on_event(node, ev)
        if isinstance(ev, EnvDone):
            report = ev.report
    if all_matching or not nccl:
        return NodeEnv(node, report, [])
    try:
        lines = await nccl_lines(remote, node)
    except RemoteError as exc:
        return NodeEnv(node, report, [], f"NCCL lines not read: {exc}")
    return NodeEnv(node, report, lines)


async def target_env(
    target: Target,
    *,
    expect: Mapping[str, str] | None = None,
    expect_from_launcher: bool = False,
    prefixes: Sequence[str] | None = None,
    show_secrets: bool = False,
    all_matching: bool = False,
    log_path: str | None = None,
    on_event: Callable[[Node, EnvEvent], None] | None = None,
) -> tuple[list[NodeEnv], TransportProof | None]:
    """Every node's env check at once (the `env` verb and the Env pane both call this), and on a
    multi-node target the transport proof from all of them: None for one box, when the deployment
    runs on no node (nothing to prove), or for a box-wide look (those processes are not the server
    whose NCCL lines the logs hold).  log_path: the log of a one-node target's NCCL proof lines (a
    deployment's nodes each read their own, from their record)."""
    multi = target.multi

    async def one(node: Node) -> NodeEnv:
        if node.host not in target.remotes:
            return NodeEnv(node, None, [], "not connected")
        return await node_env(
            target.remote(node),
            node,
            expect=expect,
            expect_from_launcher=expect_from_launcher,
            prefixes=prefixes,
            show_secrets=show_secrets,
            all_matching=all_matching,
            log_path=None if multi else log_path,
            nccl=multi,
            on_event=on_event,
        )

    got = list(await asyncio.gather(*(one(n) for n in target.nodes)))
    proof = None if all_matching or not multi else transport_of(got, expected_transport(target))
    return got, proof


def expected_transport(target: Target) -> Expected | None:
    spec = target.profile.deployment
    return spec.expect_transport if spec is not None else None


def transport_of(got: list[NodeEnv], expect: Expected | None = None) -> TransportProof | None:
    """The proof from every node's NCCL lines and workers' environ, with what it could not read,
    checked against the deployment's expectation; None when no node's server is running."""
    if not any(g.running for g in got):
        return None
    proof = prove_transport(
        {g.node.host: g.nccl for g in got},
        {g.node.host: worker_environ(g.report) for g in got if g.report is not None},
        expect=expect,
    )
    proof.findings += debug_file_findings(got)
    return proof


def debug_file_findings(got: list[NodeEnv]) -> list[str]:
    """A node whose workers have NCCL_DEBUG_FILE: NCCL writes its lines there, not to the server log
    the proof reads, so that node's part of the proof is incomplete."""
    out = []
    for g in got:
        env = worker_environ(g.report) if g.report is not None else {}
        files = sorted({e["NCCL_DEBUG_FILE"] for e in env.values() if "NCCL_DEBUG_FILE" in e})
        if files:
            out.append(
                f"{g.node.host}: NCCL_DEBUG_FILE={files[0]} sends its NCCL lines to those files, not the "
                "server log (not read here: the proof of that node is incomplete)"
            )
    return out
