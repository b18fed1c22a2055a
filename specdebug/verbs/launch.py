"""Headless server lifecycle: `launch`, `stop`, `status`, `restart`, `attach` (same core as the startup pane).

Exit codes: 0 ready / stopped / running, 1 failed / refused / not running, 2 usage or profile error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TYPE_CHECKING

from specdebug.verbs.common import (
    box_session,
    err,
    fail,
    interrupted_lines,
    load_profile_or_exit,
    open_remote,
    out,
    print_json,
    run_verb,
    session_journal,
)
from specdebug.verbs.signals import on_term

# Each verb imports what it runs, in its body: `status` (a question asked many times a day) paid
# ~0.6 s for the launch path's imports (the watch, the log stack, the journal's records) it never used.
if TYPE_CHECKING:
    from specdebug.core.control.records import ServerRecord
    from specdebug.core.journal import EventJournal
    from specdebug.core.profiles import Profile
    from specdebug.remote.api import Remote


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
    p.set_defaults(func=cmd_launch)

    p = subparsers.add_parser("restart")
    common(p)
    p.add_argument("--wait", action="store_true", help="watch the startup and print the verdict")
    p.add_argument("--timeout", type=float, metavar="S", help="override the profile's ready.timeout_s")
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
    from specdebug.verbs import deployment

    box_session(getattr(args, "session", None))  # a bad box:NAME before connecting
    profile = load_profile_or_exit(args.profile, verb)
    deployment.need_host(args, profile, verb)
    if profile.deployment is not None:
        deployment.placed(args, profile)  # a HOST that is not the leader: refused before connecting
    return profile


def _say(args: argparse.Namespace, text: str) -> None:
    """Progress for humans: stdout normally, stderr under --json (stdout holds one JSON object)."""
    out(text, file=sys.stderr if args.json else sys.stdout, newlines=False)


async def _watch_and_report(
    args: argparse.Namespace,
    remote: Remote,
    record: ServerRecord,
    profile: Profile,
    journal: EventJournal | None,
    *,
    deadline: float | None = None,
) -> int:
    from specdebug.core.control.events import ConnectionNote, ServerPhase, Verdict
    from specdebug.core.control.watch import watch

    verdict: Verdict | None = None
    timeout = getattr(args, "timeout", None)
    async for ev in watch(remote, record, profile, timeout_s=timeout, deadline=deadline, journal=journal):
        if isinstance(ev, ServerPhase):
            _say(args, f"  {ev.elapsed_s:7.1f}s  {ev.name}")
        elif isinstance(ev, ConnectionNote):
            _say(args, f"  connection {ev.state}: {ev.detail}")
        elif isinstance(ev, Verdict):
            verdict = ev
    assert verdict is not None
    if args.json:
        print_json(verdict.summary())
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
    return 0 if verdict.verdict == "ready" else 1


async def _launch(
    args: argparse.Namespace, remote: Remote, profile: Profile, journal: EventJournal | None
) -> int:
    from specdebug.core.control.actions import LaunchRefused
    from specdebug.core.control.launch import start_launch

    try:
        launching = await start_launch(remote, profile, journal=journal)
    except LaunchRefused as exc:
        fail(exc)  # the line and its hint (the port to change, the stop command)
        if args.json:
            holder = exc.holder.model_dump(mode="json") if exc.holder else None
            print_json(
                {
                    "verdict": "refused",
                    "reason": str(exc),
                    "port_holder": holder,
                    "pid": exc.holder.pid if exc.holder else (exc.record.pid if exc.record else None),
                }
            )
        return 1
    record = launching.record
    if not args.wait:
        await launching.finish()  # the drift snapshot, journaled with the launch
        if args.json:
            print_json(record)
        else:
            out(
                f"launched {profile.name}: PID {record.pid}, PGID {record.pgid}, log {record.log_file}",
                newlines=False,
            )
        return 0
    # the watch runs beside the drift snapshot: the startup time it reports is the server's alone.
    # Ctrl+C (130) or TERM (143) ends the watch, not the server: say what keeps running and how to stop it
    # (TERM's handler is in place before the launch is announced: a TERM right after the line is its)
    verdict = "its startup verdict (`specdebug status HOST -c PROFILE` reads it later)"
    left = "\n".join(interrupted_lines(args, profile, pid=record.pid, not_recorded=verdict))
    try:
        async with on_term(lambda: "launch: TERM: no verdict", after=lambda: left):
            _say(
                args, f"launched {profile.name}: PID {record.pid}, PGID {record.pgid}, log {record.log_file}"
            )
            code = await _watch_and_report(args, remote, record, profile, journal)
            await launching.finish()
    except asyncio.CancelledError:  # Ctrl+C (on_term turns TERM into its own exit)
        err(left)
        raise
    return code


@run_verb
async def cmd_launch(args: argparse.Namespace) -> int:
    profile = _profile(args, "launch")
    if profile.deployment is not None:
        from specdebug.verbs import deployment

        return await deployment.launch(args, profile)
    async with open_remote(args) as remote, session_journal(args.session, remote) as journal:
        return await _launch(args, remote, profile, journal)


@run_verb
async def cmd_restart(args: argparse.Namespace) -> int:
    from specdebug.core.control import actions as server_control

    profile = _profile(args, "restart")
    if profile.deployment is not None:
        from specdebug.verbs import deployment

        return await deployment.launch(args, profile, restart=True)
    async with open_remote(args) as remote, session_journal(args.session, remote) as journal:
        result = await server_control.stop(remote, profile, grace_s=args.grace, journal=journal)
        _say(args, result.message)
        if not result.stopped:
            err(result.message)
            return 1
        return await _launch(args, remote, profile, journal)


@run_verb
async def cmd_stop(args: argparse.Namespace) -> int:
    from specdebug.core.control import actions as server_control

    profile = _profile(args, "stop")
    if profile.deployment is not None:
        from specdebug.verbs import deployment

        return await deployment.stop(args, profile)
    async with open_remote(args) as remote, session_journal(args.session, remote) as journal:
        result = await server_control.stop(remote, profile, grace_s=args.grace, journal=journal)
    if args.json:
        print_json(result)
    else:
        out(result.message, newlines=False)
    return 0 if result.stopped else 1


@run_verb
async def cmd_status(args: argparse.Namespace) -> int:
    from specdebug.core.control import actions as server_control

    profile = _profile(args, "status")
    if profile.deployment is not None:
        from specdebug.verbs import deployment

        return await deployment.status(args, profile)
    async with open_remote(args) as remote:
        st = await server_control.status(remote, profile)
    if args.json:
        print_json(st)
    else:
        out(st.describe(), newlines=False)
    return 0 if st.state == "running" else 1


@run_verb
async def cmd_attach(args: argparse.Namespace) -> int:
    from specdebug.core.control import actions as server_control

    profile = _profile(args, "attach")
    if profile.deployment is not None:
        from specdebug.verbs import deployment

        return await deployment.attach(args, profile)
    async with open_remote(args) as remote, session_journal(args.session, remote) as journal:
        from specdebug.core.control.actions import LaunchRefused

        try:
            record = await server_control.attach(
                remote, profile, pid=args.pid, port=args.port, log=args.log, journal=journal
            )
        except LaunchRefused as exc:
            err(str(exc))
            return 1
        _say(args, f"attached to {profile.name}: PID {record.pid}, PGID {record.pgid}, log {record.log_file}")
        deadline = time.time() + (args.timeout or profile.ready.timeout_s)
        return await _watch_and_report(args, remote, record, profile, journal, deadline=deadline)
