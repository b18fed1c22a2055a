"""Headless server lifecycle: `launch`, `stop`, `status`, `restart`, `attach` (same core as the startup pane).

Each verb opens the profile's one target (verbs.common.open_target: a one-box profile is one node on
HOST, a profile with `[deployment]` every node) and hands it to core.deployment.control; what it
prints is the target's: a one-node target's lines and JSON are one server's (the record, the
verdict, the status), a multi-node target's name each node (`nodes`: `host`, `rank`, `pid`, `pgid`,
`state`, `reason`).

Before `launch` and `restart` start (or stop) anything they ask who else holds the GPUs the target
would use (core.control.neighbours.target_neighbours, the TUI's Startup pane asks the same): another
running server of this box user whose CUDA_VISIBLE_DEVICES meets the profile's (or where either
names none), or a running bisection.  They refuse then, naming each (profile, PID, GPUs, how to stop
it), unless `--force`: a second server on those GPUs fails for memory, or makes a bisection's trial
fail for memory and cost the bisection a data point (issue 41); a warning a script never reads would
not prevent that.  `--json` gives them as `neighbours` (null: the check could not be made).

Exit codes: 0 ready / stopped / running, 1 failed / refused / not running, 2 usage or profile error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TYPE_CHECKING

from specdebug.verbs.common import (
    VerbExit,
    box_session,
    err,
    fail,
    interrupted_lines,
    load_profile_or_exit,
    open_target,
    out,
    print_json,
    run_verb,
    session_journal,
)
from specdebug.verbs.gpu_check import add_force_arg, gpus_free_or_forced, with_neighbours
from specdebug.verbs.signals import on_term

# Each verb imports what it runs, in its body: `status` (a question asked many times a day) paid
# ~0.6 s for the launch path's imports (the watch, the log stack, the journal's records) it never used.
if TYPE_CHECKING:
    from specdebug.core.control.events import Verdict
    from specdebug.core.control.launch import Launching
    from specdebug.core.control.records import ServerRecord
    from specdebug.core.deployment.tracker import DeploymentVerdict
    from specdebug.core.journal import EventJournal
    from specdebug.core.profiles import Profile
    from specdebug.core.target import Target


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from specdebug.verbs.common import add_host_args

    def common(p: argparse.ArgumentParser, *, session: bool = True) -> None:
        add_host_args(p, required=False)  # a profile with [deployment] names its nodes
        p.add_argument("-c", "--profile", required=True, metavar="PROFILE", help="server profile (TOML)")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        if session:
            p.add_argument(
                "--session",
                metavar="DIR",
                help="journal folder to record launches and verdicts in, or box:NAME on HOST",
            )

    p = subparsers.add_parser("launch")
    common(p)
    p.add_argument("--wait", action="store_true", help="watch the startup and print the verdict")
    p.add_argument("--timeout", type=float, metavar="S", help="override the profile's ready.timeout_s")
    add_force_arg(p)
    p.set_defaults(func=cmd_launch)

    p = subparsers.add_parser("restart")
    common(p)
    p.add_argument("--wait", action="store_true", help="watch the startup and print the verdict")
    p.add_argument("--timeout", type=float, metavar="S", help="override the profile's ready.timeout_s")
    add_force_arg(p)
    p.add_argument("--grace", type=float, default=10.0, metavar="S", help="seconds between TERM and KILL")
    p.set_defaults(func=cmd_restart)

    p = subparsers.add_parser("stop")
    common(p)
    p.add_argument("--grace", type=float, default=10.0, metavar="S", help="seconds between TERM and KILL")
    p.set_defaults(func=cmd_stop)

    p = subparsers.add_parser("status")
    common(p, session=False)
    p.set_defaults(func=cmd_status)

    p = subparsers.add_parser("attach")
    common(p)
    p.add_argument("--pid", type=int, help="server PID (default: the PID listening on the profile's port)")
    p.add_argument("--port", type=int, help="port to find the server by (default: the profile's)")
    p.add_argument("--log", metavar="PATH", help="log file on the box (default: the profile's log_file)")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds to wait for ready from now")
    p.set_defaults(func=cmd_attach)


def _profile(args: argparse.Namespace, verb: str) -> Profile:
    box_session(getattr(args, "session", None))  # a bad box:NAME before connecting
    return load_profile_or_exit(args.profile, verb)


def _say(args: argparse.Namespace, text: str) -> None:
    """Progress for humans: stdout normally, stderr under --json (stdout holds one JSON object)."""
    out(text, file=sys.stderr if args.json else sys.stdout, newlines=False)


async def _watch_and_report(
    args: argparse.Namespace,
    target: Target,
    records: dict[str, ServerRecord],
    journal: EventJournal | None,
    *,
    deadline: float | None = None,
) -> int:
    """Watch every node as one (core.deployment.control.watch_target); the verdict printed as the
    target's: a one-node target's is its server's own (phase, reason, log excerpt)."""
    from specdebug.core.control.events import ConnectionNote, ServerPhase, Verdict
    from specdebug.core.deployment.control import NodeEvent, watch_target

    verdict: DeploymentVerdict | None = None
    own: Verdict | None = None  # the (one) node's own verdict
    said_ready: set[str] = set()
    timeout = getattr(args, "timeout", None)
    async for ev in watch_target(target, records, timeout_s=timeout, deadline=deadline, journal=journal):
        if not isinstance(ev, NodeEvent):
            verdict = ev
            continue
        inner = ev.event
        if isinstance(inner, ServerPhase):
            _say(args, f"  {inner.elapsed_s:7.1f}s  " + target.named(ev.host, inner.name))
            said_ready.update([ev.host] if inner.name == "ready" else [])
        elif isinstance(inner, ConnectionNote):
            _say(args, "  " + target.named(ev.host, f"connection {inner.state}: {inner.detail}"))
        elif isinstance(inner, Verdict):
            own = inner
            if target.multi and inner.verdict == "ready" and ev.host not in said_ready:
                _say(args, f"  {inner.elapsed_s:7.1f}s  {ev.host}: ready")
    assert verdict is not None
    if target.multi or own is None:
        _report_nodes(args, target, verdict)
    else:
        _report_one(args, own)
    return 0 if verdict.verdict == "ready" else 1


def _report_one(args: argparse.Namespace, verdict: Verdict) -> None:
    if args.json:
        print_json(with_neighbours(args, verdict.summary()))
    elif verdict.verdict == "ready":
        out(f"ready after {verdict.elapsed_s:.1f}s (PID {verdict.pid}, PGID {verdict.pgid})", newlines=False)
    else:
        out(
            f"failed after {verdict.elapsed_s:.1f}s in phase {verdict.last_phase}: {verdict.reason}",
            newlines=False,
        )
        if verdict.excerpt:
            out("--- log excerpt ---", newlines=False)
            for line in verdict.excerpt:
                out(line, newlines=False)


def _report_nodes(args: argparse.Namespace, target: Target, verdict: DeploymentVerdict) -> None:
    name = target.profile.name
    if args.json:
        print_json(with_neighbours(args, verdict.summary()))
    elif verdict.verdict == "ready":
        out(
            f"{name}: ready as one after {verdict.elapsed_s:.1f}s on {len(target.nodes)} nodes",
            newlines=False,
        )
        for n in verdict.nodes:
            out(f"  node {n.rank} {n.host}: PID {n.pid} PGID {n.pgid}", newlines=False)
    else:
        out(f"{name}: failed after {verdict.elapsed_s:.1f}s: {verdict.reason}", newlines=False)
        for n in verdict.nodes:
            out(
                f"  node {n.rank} {n.host}: {n.state}" + (f" ({n.reason})" if n.reason else ""),
                newlines=False,
            )


def _launched_nodes(target: Target, records: dict[str, ServerRecord]) -> list[dict[str, object]]:
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
        for n in target.nodes
        if n.host in records
    ]


def _refused(args: argparse.Namespace, target: Target, exc: Exception) -> int:
    """A launch that started nothing: the line (and its hint), and the refusal as JSON."""
    from specdebug.core.control.actions import LaunchRefused
    from specdebug.errors import SpecdebugError

    if isinstance(exc, SpecdebugError):
        fail(exc)  # the line and its hint (the port to change, the stop command)
    else:
        err(str(exc))
    if not args.json:
        return 1
    if target.multi:
        print_json(
            with_neighbours(
                args, {"verdict": "refused", "profile": target.profile.name, "reason": str(exc), "nodes": []}
            )
        )
        return 1
    holder = exc.holder if isinstance(exc, LaunchRefused) else None
    record = exc.record if isinstance(exc, LaunchRefused) else None
    print_json(
        with_neighbours(
            args,
            {
                "verdict": "refused",
                "reason": str(exc),
                "port_holder": holder.model_dump(mode="json") if holder else None,
                "pid": holder.pid if holder else (record.pid if record else None),
            },
        )
    )
    return 1


def _say_launched(args: argparse.Namespace, target: Target, records: dict[str, ServerRecord]) -> None:
    name = target.profile.name
    if not target.multi:
        r = records[target.leader.host]
        _say(args, f"launched {name}: PID {r.pid}, PGID {r.pgid}, log {r.log_file}")
        return
    for host, r in records.items():  # in launch order: workers first
        node = target.node(host)
        _say(
            args,
            f"launched {name} node {node.rank if node else '?'} on {host}: PID {r.pid}, log {r.log_file}",
        )


async def _launch(
    args: argparse.Namespace, target: Target, journal: EventJournal | None, *, restart: bool = False
) -> int:
    """Launch every node of the target (restart: stop them first), and with --wait watch them as one."""
    from specdebug.core.control.actions import LaunchRefused
    from specdebug.core.deployment.control import finish_launches, launch_target, records_of, stop_target
    from specdebug.remote.api import RemoteError

    if not await gpus_free_or_forced(args, target, "restart" if restart else "launch"):
        return 1  # before a restart stops anything: its server keeps running
    if restart:
        stopped = await stop_target(target, grace_s=args.grace, journal=journal)
        _say(args, stopped.message)
        if not stopped.stopped:
            err(stopped.message)
            return 1
    # a deployment's node that fails to start is a refusal naming it; one box's error is the verb's
    refusals: tuple[type[Exception], ...] = (LaunchRefused, RemoteError) if target.multi else (LaunchRefused,)
    try:
        launched = await launch_target(target, journal=journal)
    except refusals as exc:
        return _refused(args, target, exc)
    records = records_of(launched)
    if not args.wait:
        await finish_launches(launched)  # the drift snapshots, journaled with the launches
        _no_wait(args, target, records)
        return 0
    return await _wait(args, target, launched, journal)


def _no_wait(args: argparse.Namespace, target: Target, records: dict[str, ServerRecord]) -> None:
    if target.multi:
        _say_launched(args, target, records)
        if args.json:
            print_json(
                with_neighbours(
                    args,
                    {
                        "verdict": "launched",
                        "profile": target.profile.name,
                        "nodes": _launched_nodes(target, records),
                    },
                )
            )
    elif args.json:
        print_json(with_neighbours(args, records[target.leader.host]))
    else:
        r = records[target.leader.host]
        out(f"launched {target.profile.name}: PID {r.pid}, PGID {r.pgid}, log {r.log_file}", newlines=False)


async def _wait(
    args: argparse.Namespace, target: Target, launched: dict[str, Launching], journal: EventJournal | None
) -> int:
    """The watch runs beside the drift snapshots: the startup time it reports is the server's alone.
    Ctrl+C (130) or TERM (143) ends the watch, not the server: say what keeps running and how to stop
    it (TERM's handler is in place before the launch is announced: a TERM right after the line is its)."""
    from specdebug.core.deployment.control import finish_launches, records_of

    records = records_of(launched)
    verdict = "its startup verdict (`specdebug status HOST -c PROFILE` reads it later)"
    pid = records[target.leader.host].pid if target.leader.host in records else None
    left = "\n".join(interrupted_lines(args, target.profile, pid=pid, not_recorded=verdict))
    try:
        async with on_term(lambda: "launch: TERM: no verdict", after=lambda: left):
            _say_launched(args, target, records)
            code = await _watch_and_report(args, target, records, journal)
            await finish_launches(launched)
    except asyncio.CancelledError:  # Ctrl+C (on_term turns TERM into its own exit)
        err(left)
        raise
    return code


async def _launch_verb(args: argparse.Namespace, verb: str, *, restart: bool = False) -> int:
    profile = _profile(args, verb)
    started = False
    try:
        async with (
            open_target(args, profile) as target,
            session_journal(args.session, target.leader_remote) as journal,
        ):
            started = True
            return await _launch(args, target, journal, restart=restart)
    except VerbExit as exc:  # a deployment's node that cannot be reached: nothing was started on any
        if args.json and not started and exc.code == 1 and profile.deployment is not None:
            print_json(
                {"verdict": "refused", "profile": profile.name, "reason": exc.message or "", "nodes": []}
            )
        raise


@run_verb
async def cmd_launch(args: argparse.Namespace) -> int:
    return await _launch_verb(args, "launch")


@run_verb
async def cmd_restart(args: argparse.Namespace) -> int:
    return await _launch_verb(args, "restart", restart=True)


@run_verb
async def cmd_stop(args: argparse.Namespace) -> int:
    from specdebug.core.deployment.control import stop_target

    profile = _profile(args, "stop")
    async with open_target(args, profile, partial=True) as target:
        leader = target.remotes.get(target.leader.host)
        async with session_journal(args.session, leader) as journal:
            result = await stop_target(target, grace_s=args.grace, journal=journal)
    if args.json:
        print_json(result if target.multi else result.results[0])
    elif target.multi:
        for row in result.nodes:
            out(f"{row['host']}: {row['message']}", newlines=False)
    else:
        out(result.message, newlines=False)
    return 0 if result.stopped else 1


@run_verb
async def cmd_status(args: argparse.Namespace) -> int:
    from specdebug.core.deployment.status import target_status

    profile = _profile(args, "status")
    async with open_target(args, profile, partial=True) as target:
        st = await target_status(target)
    shown = st if target.multi else st.node_status[0]  # one node: its server's own status
    if args.json:
        print_json(shown)
    else:
        out(shown.describe(), newlines=target.multi)
    return 0 if shown.state == "running" else 1


@run_verb
async def cmd_attach(args: argparse.Namespace) -> int:
    """Adopt the server of every node (each by the PID on its node's port) and watch them as one."""
    from specdebug.core.control.actions import LaunchRefused
    from specdebug.core.deployment.control import attach_target

    profile = _profile(args, "attach")
    async with (
        open_target(args, profile) as target,
        session_journal(args.session, target.leader_remote) as journal,
    ):
        if target.multi and (args.pid is not None or args.port is not None or args.log is not None):
            err("attach: --pid, --port and --log name one server; a deployment's nodes come from its profile")
            raise VerbExit(2)
        try:
            records = await attach_target(target, pid=args.pid, port=args.port, log=args.log, journal=journal)
        except LaunchRefused as exc:
            err(str(exc))
            return 1
        for node in target.nodes:
            r = records[node.host]
            _say(
                args,
                f"attached to {profile.name} node {node.rank} on {node.host}: PID {r.pid}"
                if target.multi
                else f"attached to {profile.name}: PID {r.pid}, PGID {r.pgid}, log {r.log_file}",
            )
        deadline = time.time() + (args.timeout or profile.ready.timeout_s)
        return await _watch_and_report(args, target, records, journal, deadline=deadline)
