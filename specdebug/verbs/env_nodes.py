"""`env -c PROFILE` on a deployment: node x worker PID x variable, and the NCCL transport proof.

Apart from env.py because it joins two halves per node: each node's own env check (the one-box
code on that node's connection, its node profile: the node's own env is what is expected there),
and that node's NCCL lines of this run (from the record's log offset on), which together with the
workers' environ give the transport verdict (core.deployment.nccl).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from specdebug.core.deployment.nccl import TransportProof
from specdebug.core.deployment.node_env import deployment_env
from specdebug.core.env.probe import NOT_RUNNING_HINT
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
        envs, proof = await deployment_env(
            remotes,
            dep,
            expect=expect,
            expect_from_launcher=args.expect_from_launcher,
            prefixes=prefixes,
            show_secrets=args.show_secrets,
            all_matching=args.all_matching,
        )
    rows: list[dict[str, Any]] = []
    code = 0
    for g in envs:
        row: dict[str, Any] = {
            "host": g.node.host,
            "rank": g.node.rank,
            "running": g.running,
            "problem": g.problem,
        }
        if g.report is not None:
            row.update(g.report.model_dump(mode="json"))
            code = max(code, g.report.summary.exit_code)
        else:
            code = max(code, 1)
        rows.append(row)
    if proof is not None and proof.failures:
        code = max(code, 1)
    running = any(g.running for g in envs)
    if args.json:
        print_json(
            {
                "profile": profile.name,
                "exit_code": code,
                "running": running,
                "box_wide": bool(args.all_matching),
                "nodes": rows,
                "transport": proof.model_dump(mode="json") if proof is not None else None,
            }
        )
    elif running:
        from specdebug.verbs.env import format_report

        for g in envs:
            out(f"== node {g.node.rank} {g.node.host}")
            out(format_report(g.report, g.node.host) if g.report is not None else f"  {g.problem}")
            out()
        if proof is not None:
            out(format_transport(proof))
    if not running:
        err(f"env: {profile.name} is not running on any of its {len(envs)} nodes")
    for g in envs:
        if g.problem:
            err(f"env: {g.node.host}: {g.problem}")
        for reason in g.report.summary.reasons if g.report is not None else []:
            err(f"env: {g.node.host}: {reason}")
    for failure in proof.failures if proof is not None else []:
        err(f"env: transport: {failure}")
    if not running:
        err(f"hint: {NOT_RUNNING_HINT}")
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
    for node, counts in proof.intra_node.items():
        lines.append(
            f"  intra-node on {visible(node)}: " + ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
        )
    if proof.expected is not None:
        verdict = "FAILED" if proof.failures else "met"
        lines.append(f"  expected (profile [deployment] expect_transport): {proof.expected}: {verdict}")
        lines += [f"  expectation failed: {visible(f)}" for f in proof.failures]
    lines += [f"  finding: {visible(f)}" for f in proof.findings]
    if proof.hint:
        lines.append(f"  to prove it: {proof.hint}")
    return "\n".join(lines)
