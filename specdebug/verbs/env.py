"""`specdebug env`: did the env reach the workers?  Per worker PID, per variable, with proof.

With -c the workers are the profile's target's (verbs.common.open_target: one node on HOST, or
every node of a `[deployment]`), checked by core.deployment.node_env.target_env; a multi-node target
adds a block per node and the NCCL transport proof (JSON: `nodes`, `transport`).

Exit codes: 0 every expected variable is ok on every worker (from the worker's own environ or an
NCCL 'set by environment' line of that PID); 1 any is missing, different or unverifiable (a launcher
value alone is inference, not proof), no workers were found, or the profile's server is not
running; 2 usage or profile error.  With -c the workers are the profile's recorded server's, never
other processes that happen to match: `--all-matching` looks box-wide instead, labelled as such,
with no verdict (exit 0 when it found processes).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

from specdebug.remote.shell import is_env_name
from specdebug.verbs.common import (
    VerbExit,
    add_host_args,
    err,
    load_profile_or_exit,
    open_remote,
    open_target,
    out,
    print_json,
    progress,
    run_verb,
)

if TYPE_CHECKING:
    from specdebug.core.deployment import Node
    from specdebug.core.env.events import EnvEvent
    from specdebug.core.env.model import EnvReport
    from specdebug.core.profiles import Profile

# the env model, its events and the report's text are imported when the verb runs, not when its
# arguments are read: a cold `env` starts its connection in between (cli.run_verb), beside them
_TEXT_NAMES = frozenset({"format_report", "format_matrix", "format_nodes", "format_transport"})


def __getattr__(name: str) -> object:
    """verbs/env_text.py's formatters, as they were importable from here."""
    if name in _TEXT_NAMES:
        from specdebug.verbs import env_text

        return getattr(env_text, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _PrefixesHelp(str):
    """`--prefix`'s help, naming the default prefixes (core.env.model) only when help is shown."""

    __slots__ = ()

    def __mod__(self, params: object) -> str:
        from specdebug.core.env.model import DEFAULT_PREFIXES

        return str.__mod__(str(self).replace("{prefixes}", " ".join(DEFAULT_PREFIXES)), params)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "env",
        description="Compare each worker's /proc/PID/environ with the expected env; when environ is "
        "clobbered by setproctitle, use NCCL 'set by environment' log lines and the launcher's environ.",
        epilog="exit status: 0 all expected vars ok on every worker; 1 any missing/different/unverifiable; "
        "2 usage error",
    )
    add_host_args(p, required=False)  # -c of a profile with [deployment]: every node
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("-c", "--profile", metavar="PROFILE", help="profile TOML: its server env and workers")
    which.add_argument("--match", metavar="REGEX", help="workers: regex over /proc/PID/cmdline")
    which.add_argument("--pid", type=int, action="append", metavar="N", help="worker PID (repeatable)")
    p.add_argument(
        "--expect", action="append", default=[], metavar="K=V", help="expected variable (repeatable)"
    )
    p.add_argument(
        "--expect-from-launcher",
        action="store_true",
        help="expect what the launcher process has (variables with the shown prefixes)",
    )
    p.add_argument(
        "--prefix",
        action="append",
        metavar="P",
        help=_PrefixesHelp("prefixes of extra variables to show (repeatable; default {prefixes})"),
    )
    p.add_argument(
        "--all-matching",
        action="store_true",
        help="with -c: every process on the box matching [workers] match, whoever runs it (a box-wide "
        "look, not the profile's server: no verdict)",
    )
    p.add_argument("--log", metavar="PATH", help="server log on the box to search for NCCL proof lines")
    p.add_argument("--show-secrets", action="store_true", help="print secret-looking values in clear")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "-v",
        "--long",
        action="store_true",
        help="a block per process (every value, the evidence lines) instead of the variables x workers matrix",
    )
    p.set_defaults(func=run_env)


def parse_expect(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not is_env_name(name):
            err(f"env: --expect wants NAME=VALUE, got {item!r}")
            raise VerbExit(2)
        out[name] = value
    return out


@run_verb
async def run_env(args: argparse.Namespace) -> int:
    from specdebug.core.env.events import EnvDone
    from specdebug.core.env.model import DEFAULT_PREFIXES, EnvQuery
    from specdebug.core.env.probe import env_events

    expect = parse_expect(args.expect)
    if args.match is not None:
        try:
            re.compile(args.match)
        except re.error as exc:
            err(f"env: invalid --match regex: {exc}")
            raise VerbExit(2) from exc
    profile = load_profile_or_exit(args.profile, "env") if args.profile else None
    if args.all_matching and profile is None:
        err("env: --all-matching goes with -c PROFILE (its [workers] match); --match REGEX names processes")
        raise VerbExit(2)
    if args.show_secrets:
        err("warning: --show-secrets prints secret-looking values (tokens, keys, passwords) in clear")
    prefixes = args.prefix or list(DEFAULT_PREFIXES)
    if profile is not None:
        return await _env_of_target(args, profile, expect, prefixes)
    if not args.host:
        err("env: give the HOST (or -c PROFILE of a profile with [deployment] naming its nodes)")
        raise VerbExit(2)
    query = EnvQuery(
        pids=args.pid or [],
        match=args.match,
        expected=expect,
        expect_from_launcher=args.expect_from_launcher,
        prefixes=prefixes,
        log_path=args.log,
        show_secrets=args.show_secrets,
    )
    report: EnvReport | None = None
    show_progress = sys.stderr.isatty()
    async with open_remote(args) as remote:
        async for ev in env_events(remote, query):
            _progress(show_progress, ev)
            if isinstance(ev, EnvDone):
                report = ev.report
    assert report is not None  # env_events ends in EnvDone
    return _one_report(args, report, show_progress)


def _progress(show: bool, ev: EnvEvent) -> None:
    from specdebug.core.env.events import EnvProcessesFound

    if show and isinstance(ev, EnvProcessesFound):
        progress(ev.describe())


def _one_report(args: argparse.Namespace, report: EnvReport, shown_progress: bool) -> int:
    from specdebug.verbs.env_text import format_report

    if shown_progress:
        out(file=sys.stderr)  # end the progress line
    if args.json:
        print_json(report)
    else:
        out(format_report(report, args.host, long=args.long))
    for warning in report.summary.warnings:
        err(f"warning: {warning}")
    for reason in report.summary.reasons:
        err(f"env: {reason}")
    return report.summary.exit_code


async def _env_of_target(
    args: argparse.Namespace, profile: Profile, expect: dict[str, str], prefixes: list[str]
) -> int:
    """The profile's target checked (core.deployment.node_env.target_env): one node's report as
    one box's, a deployment's per node with the transport proof."""
    from specdebug.core.deployment.node_env import target_env

    show_progress = sys.stderr.isatty()

    def on_event(node: Node, ev: EnvEvent) -> None:
        _progress(show_progress, ev)

    async with open_target(args, profile) as target:
        envs, proof = await target_env(
            target,
            expect=expect,
            expect_from_launcher=args.expect_from_launcher,
            prefixes=prefixes,
            show_secrets=args.show_secrets,
            all_matching=args.all_matching,
            log_path=args.log,
            on_event=on_event if not target.multi else None,
        )
    if target.multi:
        from specdebug.verbs.env_text import nodes_report

        return nodes_report(args, target, envs, proof)
    got = envs[0]
    if got.report is None:
        return not_running(args, profile.name, target.leader.host, got.problem or "", got.hint)
    return _one_report(args, got.report, show_progress)


def not_running(args: argparse.Namespace, profile: str, host: str, problem: str, hint: str | None) -> int:
    """The profile's server is not running: said so (JSON too), exit 1; nothing else is looked at."""
    if args.json:
        print_json(
            {
                "profile": profile,
                "host": host,
                "running": False,
                "error": problem,
                "hint": hint,
                "exit_code": 1,
            }
        )
    err(f"env: {problem}")
    if hint:
        err(f"hint: {hint}")
    return 1
