"""One server on several nodes, watched as one (issue 24; the seam of issue 23 section 4).

A `Deployment` is a profile placed on its nodes (`place`): each `Node` carries the profile as that
node runs it (the engine's multi-node flags, its own log and record), so the one-box services work
on a node unchanged.  The one-node case (no `[deployment]`) is today's behaviour.

Layout: place (Deployment, Node, the engines' node flags), nccl (the transport proof from each
rank's NCCL lines), nccl_intent (the workers' NCCL env against what the lines show).
"""

from __future__ import annotations

from specdebug.core.deployment.place import (
    Deployment,
    DeploymentError,
    Node,
    default_leader_address,
    node_args,
    node_record_name,
    place,
    place_one,
    slug,
    with_flags,
)

__all__ = [
    "Deployment",
    "DeploymentError",
    "Node",
    "default_leader_address",
    "node_args",
    "node_record_name",
    "place",
    "place_one",
    "slug",
    "with_flags",
]
