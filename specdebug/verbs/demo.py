"""`specdebug demo`: open the TUI on the simulated GPU box, with nothing to set up."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="open the TUI on the simulated speculative-decoding box")
    p.add_argument(
        "-c",
        "--profile",
        default="eagle3-2step-nccl.toml",
        help="example profile to launch (name in examples/ or a path)",
    )
    p.add_argument("--layout", default="default")
    p.add_argument("--no-launch", action="store_true", help="do not launch the simulated server at start")
    p.add_argument("--time-scale", type=float, help="sim startup speed (1.0 = a realistic few minutes)")
    p.add_argument("--session", metavar="DIR", help="session folder for the journal")
    p.set_defaults(func=demo)


def demo(args: argparse.Namespace) -> int:
    from specdebug.demo.run import run_demo

    return run_demo(
        args.profile,
        layout=args.layout,
        autolaunch=not args.no_launch,
        time_scale=args.time_scale,
        session=args.session,
    )
