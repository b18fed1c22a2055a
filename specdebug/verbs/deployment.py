"""The lifecycle verbs on a deployment (a profile with `[deployment]`): launch, stop, status, attach.

The verbs in launch.py hand a deployment's profile here: one connection per node (named by the
node), and the deployment's own JSON: `verdict`, `nodes` (each `host`, `rank`, `pid`, `pgid`,
`state`, `reason`).  A HOST given to such a verb must be the leader (core.deployment.place).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from specdebug.core.deployment import Deployment, DeploymentError, place
from specdebug.verbs.common import VerbExit, err, open_remote, out, print_json, session_journal

# the multi-node control (and through it the journal's records) only where a deployment runs:
# `status` of a one-box profile checks need_host here and should not pay for them
if TYPE_CHECKING:
    from specdebug.core.control.records import ServerRecord
    from specdebug.core.deployment.tracker import DeploymentVerdict
    from specdebug.core.profiles import Profile
    from specdebug.remote.api import Remote


def placed(args: argparse.Namespace, profile: Profile) -> Deployment:
    """The profile on its nodes, or one clear line and exit 2 (a HOST that is not the leader, none at all)."""
    try:
        return place(profile, getattr(args, "host", None), ssh_config=getattr(args, "ssh_config", None))
    except DeploymentError as exc:
        err(str(exc))
        raise VerbExit(2, str(exc)) from exc


def on_node(args: argparse.Namespace, profile: Profile, verb: str) -> Profile:
    """For a one-box verb given HOST and a profile with `[deployment]`: the profile as that node runs
    it (its log, record, port); a HOST that is no node of the deployment is one line and exit 2."""
    if profile.deployment is None:
        return profile
    try:
        dep = place(profile, profile.deployment.nodes[0], ssh_config=getattr(args, "ssh_config", None))
    except DeploymentError as exc:
        err(str(exc))
        raise VerbExit(2, str(exc)) from exc
    node = dep.node(getattr(args, "host", None) or dep.leader.host)
    if node is None:
        msg = f"{verb}: {args.host!r} is not a node of {profile.name}'s deployment ({', '.join(profile.deployment.nodes)})"
        err(msg)
        raise VerbExit(2, msg)
    return node.profile


def need_host(args: argparse.Namespace, profile: Profile, verb: str) -> None:
    """A verb on a profile without `[deployment]` needs its HOST (argparse leaves it optional)."""
    if profile.deployment is None and not getattr(args, "host", None):
        err(f"{verb}: give the HOST (the profile {profile.name} has no [deployment] naming its nodes)")
        raise VerbExit(2)


@asynccontextmanager
async def open_nodes(
    args: argparse.Namespace, dep: Deployment, *, partial: bool = False
) -> AsyncIterator[dict[str, Remote]]:
    """A connection to every node (each failure names its node: open_remote says `HOST: ...`).

    partial (stop, status): a node that cannot be reached is left out (its line is printed) and
    the others are still acted on; the core reports it as not stopped / unverified."""
    async with AsyncExitStack() as stack:
        remotes: dict[str, Remote] = {}
        for node in dep.nodes:
            try:
                remotes[node.host] = await stack.enter_async_context(open_remote(args, node.host))
            except VerbExit:
                if not partial:
                    raise
        yield remotes


def _say(args: argparse.Namespace, text: str) -> None:
    out(text, file=sys.stderr if args.json else sys.stdout, newlines=False)


def _launched(dep: Deployment, records: dict[str, ServerRecord]) -> list[dict[str, object]]:
    return [
        {
            "host": n.host,
            "rank": n.rank,
            "pid": records[n.host].pid,
            "pgid": records[n.host].pgid,
            "state": "starting",
            "reason": "",
            "log_file": records[n.host].log_file,
        }
        for n in dep.nodes
        if n.host in records
    ]


async def _watch(
    args: argparse.Namespace,
    remotes: dict[str, Remote],
    dep: Deployment,
    records: dict[str, ServerRecord],
    journal: object,
    deadline: float | None = None,
) -> int:
    from specdebug.core.control.events import ConnectionNote, ServerPhase, Verdict
    from specdebug.core.deployment.control import NodeEvent, watch_deployment

    verdict: DeploymentVerdict | None = None
    said_ready: set[str] = set()
    async for ev in watch_deployment(
        remotes,
        dep,
        records,
        timeout_s=getattr(args, "timeout", None),
        deadline=deadline,
        journal=journal,  # type: ignore[arg-type]
    ):
        if isinstance(ev, NodeEvent):
            inner = ev.event
            if isinstance(inner, ServerPhase):
                _say(args, f"  {inner.elapsed_s:7.1f}s  {ev.host}: {inner.name}")
                if inner.name == "ready":
                    said_ready.add(ev.host)
            elif isinstance(inner, ConnectionNote):
                _say(args, f"  {ev.host}: connection {inner.state}: {inner.detail}")
            elif isinstance(inner, Verdict) and inner.verdict == "ready" and ev.host not in said_ready:
                _say(args, f"  {inner.elapsed_s:7.1f}s  {ev.host}: ready")
        else:
            verdict = ev
    assert verdict is not None
    if args.json:
        print_json(verdict.summary())
    elif verdict.verdict == "ready":
        out(
            f"{dep.profile.name}: ready as one after {verdict.elapsed_s:.1f}s on {len(dep.nodes)} nodes",
            newlines=False,
        )
        for n in verdict.nodes:
            out(f"  node {n.rank} {n.host}: PID {n.pid} PGID {n.pgid}", newlines=False)
    else:
        out(f"{dep.profile.name}: failed after {verdict.elapsed_s:.1f}s: {verdict.reason}", newlines=False)
        for n in verdict.nodes:
            out(
                f"  node {n.rank} {n.host}: {n.state}" + (f" ({n.reason})" if n.reason else ""),
                newlines=False,
            )
    return 0 if verdict.verdict == "ready" else 1


async def launch(args: argparse.Namespace, profile: Profile, *, restart: bool = False) -> int:
    """Launch every node (restart: stop every node first), and with --wait watch them as one."""

    dep = placed(args, profile)
    started = False
    try:
        async with (
            open_nodes(args, dep) as remotes,
            session_journal(args.session, remotes[dep.leader.host]) as journal,
        ):
            started = True
            return await _launch_on(args, profile, dep, remotes, journal, restart=restart)
    except VerbExit as exc:  # a node that cannot be reached: nothing was started on any
        if args.json and not started and exc.code == 1:
            print_json(
                {"verdict": "refused", "profile": profile.name, "reason": exc.message or "", "nodes": []}
            )
        raise


async def _launch_on(
    args: argparse.Namespace,
    profile: Profile,
    dep: Deployment,
    remotes: dict[str, Remote],
    journal: Any,
    *,
    restart: bool,
) -> int:
    from specdebug.core.control.actions import LaunchRefused
    from specdebug.core.deployment.control import launch_deployment, stop_deployment
    from specdebug.remote.api import RemoteError

    if restart:
        stopped = await stop_deployment(remotes, dep, grace_s=args.grace, journal=journal)
        _say(args, stopped.message)
        if not stopped.stopped:
            err(stopped.message)
            return 1
    try:
        records = await launch_deployment(remotes, dep, journal=journal)
    except (LaunchRefused, RemoteError) as exc:
        err(str(exc))
        if args.json:
            print_json({"verdict": "refused", "profile": profile.name, "reason": str(exc), "nodes": []})
        return 1
    for n in sorted(_launched(dep, records), key=lambda n: list(records).index(str(n["host"]))):
        _say(  # in launch order: workers first
            args,
            f"launched {profile.name} node {n['rank']} on {n['host']}: PID {n['pid']}, log {n['log_file']}",
        )
    if not args.wait:
        if args.json:
            print_json({"verdict": "launched", "profile": profile.name, "nodes": _launched(dep, records)})
        return 0
    return await _watch(args, remotes, dep, records, journal)


async def stop(args: argparse.Namespace, profile: Profile) -> int:
    from specdebug.core.deployment.control import stop_deployment

    dep = placed(args, profile)
    async with (
        open_nodes(args, dep, partial=True) as remotes,
        session_journal(args.session, remotes.get(dep.leader.host)) as journal,
    ):
        result = await stop_deployment(remotes, dep, grace_s=args.grace, journal=journal)
    if args.json:
        print_json(result)
    else:
        for row in result.nodes:
            out(f"{row['host']}: {row['message']}", newlines=False)
    return 0 if result.stopped else 1


async def status(args: argparse.Namespace, profile: Profile) -> int:
    from specdebug.core.deployment.control import deployment_status

    dep = placed(args, profile)
    async with open_nodes(args, dep, partial=True) as remotes:
        st = await deployment_status(remotes, dep)
    if args.json:
        print_json(st)
    else:
        out(st.describe())
    return 0 if st.state == "running" else 1


async def attach(args: argparse.Namespace, profile: Profile) -> int:
    """Adopt every node's server (each by the PID on its node's port) and watch them as one."""
    from specdebug.core.control.actions import LaunchRefused
    from specdebug.core.control.actions import attach as attach_server

    if args.pid is not None or args.port is not None or args.log is not None:
        err("attach: --pid, --port and --log name one server; a deployment's nodes come from its profile")
        raise VerbExit(2)
    dep = placed(args, profile)
    async with (
        open_nodes(args, dep) as remotes,
        session_journal(args.session, remotes[dep.leader.host]) as journal,
    ):
        records: dict[str, ServerRecord] = {}
        for node in dep.nodes:
            try:
                records[node.host] = await attach_server(remotes[node.host], node.profile, journal=journal)
            except LaunchRefused as exc:
                err(f"{node.host}: {exc}")
                return 1
            _say(
                args,
                f"attached to {profile.name} node {node.rank} on {node.host}: PID {records[node.host].pid}",
            )
        deadline = time.time() + (args.timeout or profile.ready.timeout_s)
        return await _watch(args, remotes, dep, records, journal, deadline=deadline)
