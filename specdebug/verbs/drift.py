"""`specdebug drift`: what the box looks like now to the profile's server, beyond the profile's knobs.

    specdebug drift [-F FILE] HOST -c PROFILE [--json]

A snapshot under the server's own interpreter and env: package versions, installed files that differ
from their wheel's RECORD, start-up code (sitecustomize, usercustomize, .pth lines that run code),
NCCL config files, driver/CUDA versions, GPU clocks, power limits, persistence and ECC, processes
on the GPUs, CPU governor and load.  Every benchmark records the same snapshot with its result;
`history --compare A B` and `report` say what changed between two results.  Exit 0, 1 no snapshot
(the box could not run it), 2 usage error.
"""

from __future__ import annotations

import argparse

from specdebug.core.drift.describe import describe
from specdebug.core.drift.snapshot import take_snapshot
from specdebug.verbs.common import add_host_args, load_profile_or_exit, open_target, out, print_json, run_verb


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "drift",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_host_args(p)
    p.add_argument("-c", "--profile", required=True, metavar="PROFILE", help="server profile (TOML)")
    p.add_argument("--json", action="store_true", help="the snapshot as one JSON object")
    p.set_defaults(func=cmd_drift)


@run_verb
async def cmd_drift(args: argparse.Namespace) -> int:
    profile = load_profile_or_exit(args.profile, "drift")
    # the node on HOST (any node of a deployment), with the profile as it runs it there
    async with open_target(args, profile, one_node=True, helper=False) as target:
        snap = await take_snapshot(target.leader_remote, target.leader.profile)
    if args.json:
        print_json(snap)
    else:
        for line in describe(snap):
            out(line)
    return 0
