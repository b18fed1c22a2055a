"""`specdebug sim [flags]`: run the simulated box in the foreground (same as `python -m specdebug.sim`);
`specdebug sim --engine vllm serve MODEL ...` runs it as vLLM; `specdebug sim install-box [--user]`, run on
a machine, makes it a simulated GPU box for this user behind its own sshd (specdebug/sim/box/install.py)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # prefix_chars that never occur: every argument (even --tp, --help) goes to the sim's own parser
    parser = subparsers.add_parser(
        "sim",
        add_help=False,
        prefix_chars="\x00",
    )
    parser.add_argument(
        "sim_args",
        nargs=argparse.REMAINDER,
        help="the sim's flags (the engine's own names; `specdebug sim --help`)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.sim_args[:1] == ["install-box"]:
        from specdebug.sim.box.install import main as install_box

        try:
            return install_box(list(args.sim_args[1:]))
        except SystemExit as exc:  # argparse errors / --help
            return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    from specdebug.sim.server.sglang.launcher import main

    try:
        return main(list(args.sim_args), prog="specdebug sim")
    except SystemExit as exc:  # argparse errors / --help inside the sim's parser
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
