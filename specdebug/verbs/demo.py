"""`specdebug demo`: open the TUI on the simulated GPU box, with nothing to set up.

`--check` runs the same path without a screen (box, launch, ready, one benchmark, stop) and exits
0 only when all of it worked: what CI runs against a freshly installed wheel.
"""

from __future__ import annotations

import argparse
import sys

from specdebug.verbs.common import out


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo")
    p.add_argument(
        "-c",
        "--profile",
        default="eagle3-2step-nccl.toml",
        help="example profile to launch (name in examples/ or a path; default %(default)s)",
    )
    p.add_argument("--layout", default="default", help="layout name from layouts/ (default: default)")
    p.add_argument("--no-launch", action="store_true", help="do not launch the simulated server at start")
    p.add_argument(
        "--time-scale",
        type=float,
        metavar="X",
        help="sim startup speed (1.0 = a realistic few minutes; default: the profile's)",
    )
    p.add_argument(
        "--session",
        metavar="DIR",
        help="session folder for the journal (default: a new one in the user data dir)",
    )
    p.add_argument(
        "--throttle-gpu",
        type=int,
        metavar="N",
        help="simulated GPU N thermal-throttles (see --throttle-after); the hosts pane and benchmarks show it",
    )
    p.add_argument(
        "--throttle-after",
        type=float,
        default=20.0,
        metavar="S",
        help="seconds after the server's start when --throttle-gpu begins (default %(default)s)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="no screen: start the box, launch, wait ready, one short benchmark, stop; exit 0 if all worked",
    )
    p.set_defaults(func=demo)


def demo(args: argparse.Namespace) -> int:
    sim_args = []
    if args.throttle_gpu is not None:
        sim_args = ["--throttle-gpu", str(args.throttle_gpu), "--throttle-after", str(args.throttle_after)]
    if args.check:
        from specdebug.demo.check import run_check

        return run_check(args.profile, time_scale=args.time_scale, session=args.session, sim_args=sim_args)
    from specdebug.verbs.tui import has_terminal

    if not has_terminal():
        out(
            "specdebug: the demo needs a terminal (stdin and stdout must be a tty); "
            "`specdebug demo --check` runs it without a screen",
            file=sys.stderr,
        )
        return 2
    from specdebug.core.profiles import ProfileError
    from specdebug.demo.run import run_demo

    try:
        return run_demo(
            args.profile,
            layout=args.layout,
            autolaunch=not args.no_launch,
            time_scale=args.time_scale,
            session=args.session,
            sim_args=sim_args,
        )
    except (FileNotFoundError, ProfileError) as exc:
        out(f"specdebug: {exc}", file=sys.stderr)
        return 2
