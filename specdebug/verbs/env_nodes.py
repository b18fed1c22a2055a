"""`env -c PROFILE` on a deployment: node x worker PID x variable, and the NCCL transport proof.

Apart from env.py because it joins two halves per node: each node's own env check (the one-box
code on that node's connection, its node profile: the node's own env is what is expected there),
and that node's NCCL lines of this run (from the record's log offset on), which together with the
workers' environ give the transport verdict (core.deployment.nccl).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from specdebug.core.deployment.nccl import TransportProof, prove_transport
from specdebug.core.env.events import EnvDone
from specdebug.core.env.model import EnvReport
from specdebug.core.env.probe import env_events, query_for_profile
from specdebug.core.sanitize import visible
from specdebug.remote.api import RemoteError
from specdebug.verbs.common import VerbExit, err, out, print_json
from specdebug.verbs.deployment import open_nodes, placed

if TYPE_CHECKING:
    from specdebug.core.deployment import Node
    from specdebug.core.profiles import Profile
    from specdebug.remote.api import Remote

NCCL_RX = r"NCCL (?:INFO|WARN) "
MAX_NCCL_LINES = 20000  # per node: a comm init prints tens of lines per rank


async def nccl_lines(remote: Remote, node: Node) -> list[str]:
    """This run's NCCL lines in the node's log (from its record's offset), selected on the box."""
    from specdebug.core.logs.matches import follow_match_batches
    from specdebug.core.logs.parser import LogParser
    from specdebug.core.profiles.paths import box_path
    from specdebug.core.servers import this_run_offset

    path = await box_path(remote, node.profile.server.log_file)
    offset = await this_run_offset(remote, node.profile.name, path)
    parser = LogParser("none", grep=[NCCL_RX], from_start=True)
    lines: list[str] = []
    async for batch in follow_match_batches(remote, path, parser, offset=offset, once=True):
        lines += [m.line for m in batch if hasattr(m, "line")]
        if len(lines) >= MAX_NCCL_LINES:
            break
    return lines[:MAX_NCCL_LINES]


def _environ(report: EnvReport) -> dict[int, dict[str, str]]:
    """PID -> the NCCL-ish variables the worker really has (its checked vars and the shown extras)."""
    out: dict[int, dict[str, str]] = {}
    for w in report.workers:
        if w.environ_state != "readable" and not w.extra:
            continue
        env = {k: v.actual for k, v in w.vars.items() if v.actual is not None and v.source == "environ"}
        out[w.pid] = {**env, **w.extra}
    return out


async def run_env_nodes(
    args: argparse.Namespace, profile: Profile, expect: dict[str, str], prefixes: list[str]
) -> int:
    dep = placed(args, profile)

    async def one(node: Node, remote: Remote) -> tuple[EnvReport | None, list[str], str | None]:
        try:
            query = await query_for_profile(
                remote,
                node.profile,
                expect=expect,
                expect_from_launcher=args.expect_from_launcher,
                prefixes=prefixes,
                log_path=None,  # each node's own log, from its record
                show_secrets=args.show_secrets,
            )
        except LookupError as exc:
            return None, [], str(exc)
        report: EnvReport | None = None
        async for ev in env_events(remote, query):
            if isinstance(ev, EnvDone):
                report = ev.report
        try:
            lines = await nccl_lines(remote, node)
        except RemoteError as exc:
            return report, [], f"NCCL lines not read: {exc}"
        return report, lines, None

    async with open_nodes(args, dep) as remotes:
        got = await asyncio.gather(*(one(n, remotes[n.host]) for n in dep.nodes))
    proof = prove_transport(
        {n.host: lines for n, (_, lines, _) in zip(dep.nodes, got, strict=True)},
        {n.host: _environ(r) for n, (r, _, _) in zip(dep.nodes, got, strict=True) if r is not None},
    )
    for node, (report, _, _) in zip(dep.nodes, got, strict=True):
        files = (
            sorted({env["NCCL_DEBUG_FILE"] for env in _environ(report).values() if "NCCL_DEBUG_FILE" in env})
            if report
            else []
        )
        if files:  # NCCL writes its lines there, not to the server log this proof reads
            proof.findings.append(
                f"{node.host}: NCCL_DEBUG_FILE={files[0]} sends its NCCL lines to those files, not the server log "
                "(not read here: the proof of that node is incomplete)"
            )
    rows: list[dict[str, Any]] = []
    code = 0
    for node, (report, _, problem) in zip(dep.nodes, got, strict=True):
        row: dict[str, Any] = {"host": node.host, "rank": node.rank, "problem": problem}
        if report is not None:
            row.update(report.model_dump(mode="json"))
            code = max(code, report.summary.exit_code)
        else:
            code = max(code, 1)
        rows.append(row)
    if args.json:
        print_json(
            {
                "profile": profile.name,
                "exit_code": code,
                "nodes": rows,
                "transport": proof.model_dump(mode="json"),
            }
        )
    else:
        from specdebug.verbs.env import format_report

        for node, (report, _, problem) in zip(dep.nodes, got, strict=True):
            out(f"== node {node.rank} {node.host}")
            out(format_report(report, node.host) if report is not None else f"  {problem}")
            out()
        out(format_transport(proof))
    for node, (report, _, problem) in zip(dep.nodes, got, strict=True):
        if problem:
            err(f"env: {node.host}: {problem}")
        for reason in report.summary.reasons if report is not None else []:
            err(f"env: {node.host}: {reason}")
    if code == 2:
        raise VerbExit(2)
    return code


def format_transport(proof: TransportProof) -> str:
    lines = [f"transport: {proof.verdict} ({visible(proof.reason)})  [{proof.source}]"]
    for e in proof.edges[:40]:
        where = f"{e.src_node or '?'} -> {e.dst_node or '?'}"
        lines.append(
            f"  {e.node} pid {e.pid}: {e.src}->{e.dst} ({where}) {e.direction or ''} via {visible(e.via)}"
        )
    if len(proof.edges) > 40:
        lines.append(f"  ... {len(proof.edges) - 40} more edges (--json has them all)")
    lines += [f"  finding: {visible(f)}" for f in proof.findings]
    if proof.hint:
        lines.append(f"  to prove it: {proof.hint}")
    return "\n".join(lines)
