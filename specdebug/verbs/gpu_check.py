"""`launch` and `restart` ask who else holds the GPUs the target would use, before they start or stop
anything (core.control.neighbours.target_neighbours: the TUI's Startup pane asks the same).

They refuse where another running server of this box user or a bisection holds them, naming each
(profile, PID, GPUs, how to stop it), unless `--force`.  Refusing, not warning, is the default: a
server started on busy GPUs fails for memory, or makes a bisection's trial fail for memory and costs
it a data point (issue 41), and a warning in a script's stderr prevents neither.  Where the check
cannot be made (the box cannot list its records) the launch goes on and says so, as the TUI's does.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from specdebug.verbs.common import err, print_json

if TYPE_CHECKING:
    from specdebug.core.target import Target


def add_force_arg(p: argparse.ArgumentParser) -> None:
    """`--force` of `launch` and `restart`: the help says why refusing is the default."""
    p.add_argument(
        "--force",
        action="store_true",
        help="launch even where another running server of this box user or a bisection holds GPUs "
        "this launch would use (without it the launch is refused, naming them: a server started on "
        "busy GPUs fails for memory, or makes a bisection's trial fail and costs it a data point)",
    )


def with_neighbours(args: argparse.Namespace, obj: Any) -> Any:
    """A launch's JSON object with `neighbours` (what the GPU check found; null: it could not be made);
    other verbs' (attach) as they were."""
    if not hasattr(args, "gpu_neighbours"):
        return obj
    data = obj.model_dump(mode="json") if hasattr(obj, "model_dump") else dict(obj)
    return {**data, "neighbours": args.gpu_neighbours}


async def gpus_free_or_forced(args: argparse.Namespace, target: Target, verb: str) -> bool:
    """Whether to go on: no other server of this user and no bisection holds the GPUs the target
    would use, or --force.  Each holder is one stderr line; args.gpu_neighbours keeps them for
    --json (None where the check could not be made: then the launch goes on, saying so, as the TUI's)."""
    from specdebug.core.control.neighbours import NEIGHBOUR_CHECK_S, target_neighbours
    from specdebug.remote.api import RemoteError

    try:
        found = await asyncio.wait_for(target_neighbours(target), NEIGHBOUR_CHECK_S)
    except (RemoteError, OSError, TimeoutError) as exc:
        args.gpu_neighbours = None
        err(f"{verb}: could not check who else holds the GPUs ({str(exc) or type(exc).__name__}); going on")
        return True
    args.gpu_neighbours = [n.as_json() for n in found]
    if not found:
        return True
    for n in found:
        err(f"{verb}: {n.sentence}")
    name = target.profile.name
    if args.force:
        err(f"{verb}: {name} goes ahead anyway (--force)")
        return True
    err(
        f"{verb}: refused: {name} would share those GPUs (it would fail for memory, or make the other's "
        "work fail); nothing was started or stopped. Free them, give the profile other GPUs "
        f"([server] env {{ CUDA_VISIBLE_DEVICES = ... }}), or add --force to {verb} anyway"
    )
    if args.json:
        reason = f"GPUs held by: {', '.join(n.name for n in found)}"
        refusal: dict[str, Any] = {"verdict": "refused", "profile": name, "reason": reason}
        if target.multi:
            refusal["nodes"] = []
        else:
            refusal.update(port_holder=None, pid=None)
        print_json({**refusal, "neighbours": args.gpu_neighbours})
    return False
