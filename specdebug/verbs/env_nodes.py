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

from specdebug.core.deployment.nccl import TransportProof
from specdebug.core.deployment.node_env import node_env, transport_of
from specdebug.core.sanitize import visible
from specdebug.verbs.common import VerbExit, err, out, print_json
from specdebug.verbs.deployment import open_nodes, placed

if TYPE_CHECKING:
    from specdebug.core.profiles import Profile


async def run_env_nodes(
    args: argparse.Namespace, profile: Profile, expect: dict[str, str], prefixes: list[str]
) -> int:
    dep = placed(args, profile)
    async with open_nodes(args, dep) as remotes:
        envs = await asyncio.gather(
            *(
                node_env(
                    remotes[n.host],
                    n,
                    expect=expect,
                    expect_from_launcher=args.expect_from_launcher,
                    prefixes=prefixes,
                    show_secrets=args.show_secrets,
                )
                for n in dep.nodes
            )
        )
    proof = transport_of(list(envs))
    got = [(g.report, g.nccl, g.problem) for g in envs]
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
