"""Placing a deployment for the verbs not yet on verbs.common.open_target."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from specdebug.core.deployment import Deployment, DeploymentError, place
from specdebug.verbs.common import VerbExit, err, open_remote

# the multi-node control (and through it the journal's records) only where a deployment runs:
# `status` of a one-box profile checks need_host here and should not pay for them
if TYPE_CHECKING:
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
