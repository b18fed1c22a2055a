"""`specdebug stacks`: where each worker of the server is now (py-spy on the box), grouped by stack.

    specdebug stacks [-F FILE] HOST -c PROFILE [--json] [--py-spy PATH]
    specdebug stacks [-F FILE] HOST -c PROFILE --record S [--save FILE] [--json]
    specdebug stacks --compare A.json B.json [--json]

A dump groups identical main-thread stacks across ranks, marks the ranks whose stack differs (one
rank stuck while the rest wait in a collective) and names the phase.  Only workers are ranks (TP/PP/DP
from vLLM's `VLLM::Worker_PP0_TP1` titles); a vLLM engine core or API server is grouped with its own
role and never held against the workers.  --record S samples every
worker for S seconds and shows the share of time per path (draft, verify, decode, NCCL wait, idle)
and function; --save keeps it for --compare, which sets two records side by side.  py-spy runs on
the box as the box user (missing: `python3 -m pip install --user py-spy` there).
The workers are the profile's recorded server's only: a server that is not running is said so
(never replaced by other processes that match its [workers] match).
Exit 0, 1 no stacks (not running, no workers, no py-spy), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from specdebug.core.stacks import collect
from specdebug.core.stacks.group import dump_lines
from specdebug.core.stacks.record import compare
from specdebug.verbs.common import (
    VerbExit,
    add_host_args,
    err,
    load_profile_or_exit,
    open_target,
    out,
    positive_int,
    print_json,
    run_verb,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "stacks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_host_args(p, required=False)
    p.add_argument("-c", "--profile", metavar="PROFILE", help="server profile (TOML)")
    p.add_argument("--record", type=positive_int, metavar="S", help="sample the workers for S seconds")
    p.add_argument(
        "--rate", type=positive_int, default=97, metavar="HZ", help="samples per second (--record)"
    )
    p.add_argument("--save", metavar="FILE", help="write the record as JSON to FILE (for --compare)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two saved records")
    p.add_argument("--py-spy", metavar="PATH", help="py-spy on the box (default: on PATH or ~/.local/bin)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_stacks)


def _pct(x: float) -> str:
    return f"{x * 100:5.1f} %"


def show_dump(d: dict[str, Any]) -> None:
    for line in dump_lines(d):
        out(line)


def show_record(r: dict[str, Any]) -> None:
    out(f"{r['profile']}: {r['ranks']} worker(s), {r['seconds']} s at {r['rate']} Hz, {r['total']} samples")
    for path, share in r["paths"].items():
        out(f"  {path:<18} {_pct(share)}")
    out("  top functions:")
    for label, share in list(r["functions"].items())[:15]:
        out(f"    {_pct(share)}  {label}")


def show_compare(a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]) -> None:
    out(f"from {a.get('profile')} to {b.get('profile')} (share of the ranks' time)")
    for row in c["paths"]:
        out(f"  {row['path']:<18} {_pct(row['a'])} -> {_pct(row['b'])}  ({row['delta_pp']:+.1f} pp)")
    out("  functions that moved most:")
    for row in c["functions"][:15]:
        out(f"    {_pct(row['a'])} -> {_pct(row['b'])}  ({row['delta_pp']:+.1f} pp)  {row['function']}")


def _load(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        err(f"stacks: {path}: not a saved record: {exc}")
        raise VerbExit(2) from exc
    if not isinstance(data, dict) or "functions" not in data:
        err(f"stacks: {path}: not a saved record (no functions)")
        raise VerbExit(2)
    return data


@run_verb
async def cmd_stacks(args: argparse.Namespace) -> int:
    if args.compare:
        a, b = (_load(p) for p in args.compare)
        c = compare(a, b)
        print_json({"a": a.get("profile"), "b": b.get("profile"), **c}) if args.json else show_compare(
            a, b, c
        )
        return 0
    if not args.host or not args.profile:
        err("stacks: give HOST and -c PROFILE (or --compare A B)")
        return 2
    profile = load_profile_or_exit(args.profile, "stacks")
    # the node on HOST (any node of a deployment), with the profile as it runs it there
    async with open_target(args, profile, one_node=True) as target:  # the resident helper lists /proc
        remote, profile = target.leader_remote, target.leader.profile
        try:
            if args.record:
                data = await collect.record(remote, profile, args.record, rate=args.rate, py_spy=args.py_spy)
            else:
                data = await collect.dump(remote, profile, py_spy=args.py_spy)
        except collect.StacksError as exc:
            err(f"stacks: {exc}")
            return 1
    if "error" in data:
        print_json(data) if args.json else err(f"stacks: {data['error']}: {data['hint']}")
        return 1
    if args.save and args.record:
        Path(args.save).write_text(json.dumps(data), encoding="utf-8")
    if args.json:
        print_json(data)
    else:
        show_record(data) if args.record else show_dump(data)
    return 0
