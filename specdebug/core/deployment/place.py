"""Placing a profile on its nodes: the `Deployment` and its `Node`s.

A Node is the profile as one node runs it: the engine's multi-node flags for its rank, its own log
file (the node's name in it) and record name (the rank in it), the node's extra env and flags.
A node's profile is an ordinary one-box profile, so everything that launches, watches, stops or
reads one server works on a node unchanged.  A profile without `[deployment]` is placed as one
node on the verb's HOST with the profile as it is: today's behaviour is the one-node case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from specdebug.core.fingerprint import split_argv
from specdebug.core.profiles import Profile
from specdebug.core.profiles.model import default_log_dir
from specdebug.engines import engine_of
from specdebug.errors import SpecdebugError


class DeploymentError(SpecdebugError):
    """A deployment that cannot be placed as asked (a HOST that is not its leader, no HOST at all)."""


def node_args(kind: str, nnodes: int, rank: int, leader: str, port: int) -> list[tuple[str, list[str]]]:
    """The engine's multi-node flags for one rank, as (flag, values) pairs (`Engine.node_args`:
    the engine owns its spelling); a kind with no engine (a custom server) gets none."""
    engine = engine_of(kind)
    if engine is None or nnodes < 2:
        return []
    return _pairs(engine.node_args(nnodes, rank, leader, port))


def with_flags(argv: list[str], flags: list[tuple[str, list[str]]]) -> list[str]:
    """argv with each flag set to its values: an existing flag is replaced in place, a new one appended."""
    if not flags:
        return list(argv)
    prefix, have = split_argv(argv)
    merged = dict(have)
    order = [name for name, _ in have]
    for name, values in flags:
        if name not in merged:
            order.append(name)
        merged[name] = list(values)
    out = list(prefix)
    for name in order:
        out += [name, *merged[name]]
    return out


def _pairs(args: list[str]) -> list[tuple[str, list[str]]]:
    return split_argv(["_", *args])[1]


def slug(host: str) -> str:
    """A host spec as a file-name part (`slurm:12:n1` -> `slurm_12_n1`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", host).strip("._") or "node"


def _argv_port(argv: list[str]) -> int | None:
    for name, values in split_argv(argv)[1]:
        if name == "--port" and len(values) == 1 and values[0].isdigit():
            return int(values[0])
    return None


@dataclass(frozen=True)
class Node:
    """One node of a deployment: its host spec, rank, and the profile as that node runs it."""

    host: str
    rank: int
    nnodes: int
    profile: Profile

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    @property
    def name(self) -> str:
        """The node as the user named it (its host spec)."""
        return self.host


@dataclass(frozen=True)
class Deployment:
    """A profile placed on its nodes (rank order; the first is the leader)."""

    profile: Profile
    nodes: tuple[Node, ...]
    leader_address: str | None = None

    @property
    def leader(self) -> Node:
        return self.nodes[0]

    @property
    def multi(self) -> bool:
        """Placed by `[deployment]` (even on one node): records and logs are per node."""
        return self.profile.deployment is not None

    def node(self, host: str) -> Node | None:
        return next((n for n in self.nodes if n.host == host), None)


def default_leader_address(host: str, ssh_config: str | Path | None = None) -> str:
    """Where the other nodes reach the leader: the HostName ssh config gives its alias, the host of
    a `user@host:port` spec, the NodeAddr Slurm gives the node of `slurm:JOBID[:NODE]` (the
    node's name, a Slurm label that need not resolve, only when Slurm cannot say)."""
    if host.startswith("slurm:"):
        from specdebug.remote.api import HostSpecError
        from specdebug.remote.factory import slurm_node_address

        try:
            addr = slurm_node_address(host)
        except HostSpecError:
            addr = None
        parts = host.split(":")
        return addr or (parts[2] if len(parts) > 2 and parts[2] else parts[1])
    from specdebug.remote.api import HostSpecError
    from specdebug.remote.factory import ssh_hostname

    try:
        name = ssh_hostname(host, ssh_config)
        if name is None:
            raise ValueError(f"{host}: not an ssh address")
        return name
    except (HostSpecError, OSError, ValueError):
        m = re.fullmatch(r"(?:[^@]+@)?(\[[^\]]+\]|[^:]+)(?::\d+)?", host)
        return (m.group(1) if m else host).strip("[]")


def _node_log(profile: Profile, host: str) -> str:
    """The node's log path: `{node}` in log_file is replaced; otherwise the node's name goes before
    the extension (`x.log` -> `x.node1.log`), so nodes that share a file system never share a log."""
    log = profile.server.log_file
    if "{node}" in log:
        return log.replace("{node}", slug(host))
    if log == f"{default_log_dir()}/{profile.name}.log":
        return f"{default_log_dir()}/{profile.name}.{slug(host)}.log"
    head, dot, ext = log.rpartition(".")
    if dot and "/" not in ext:
        return f"{head}.{slug(host)}.{ext}"
    return f"{log}.{slug(host)}"


def node_record_name(profile_name: str, rank: int) -> str:
    """The name of a node's server record on its box (nodes that share a box never share one)."""
    return f"{profile_name}.node{rank}"


def _node_profile(profile: Profile, host: str, rank: int, nnodes: int, leader: str) -> Profile:
    spec = profile.deployment
    assert spec is not None
    srv = profile.server
    flags = node_args(srv.kind, nnodes, rank, leader, spec.dist_init_port)
    flags += _pairs(spec.node_args.get(host, []))
    argv = with_flags(srv.argv, flags)
    port = _argv_port(argv) if _argv_port(argv) is not None else srv.port
    server = srv.model_copy(
        update={
            "argv": argv,
            "env": {**srv.env, **spec.node_env.get(host, {})},
            "log_file": _node_log(profile, host),
            "port": port,
        }
    )
    ready = profile.ready
    if rank >= 1:  # workers never print the ready line (only node 0 serves the API)
        ready = ready.model_copy(update={"require_ready_line": False})
    return profile.model_copy(
        update={
            "name": node_record_name(profile.name, rank),
            "server": server,
            "ready": ready,
            "deployment": None,
        }
    )


def place(profile: Profile, host: str | None = None, *, ssh_config: str | Path | None = None) -> Deployment:
    """The profile placed on its nodes.  Without `[deployment]`: one node on `host` (required).
    With it: its nodes; a `host` other than the leader is refused (a verb's HOST may name the leader)."""
    spec = profile.deployment
    if spec is None:
        if not host:
            raise DeploymentError(f"{profile.name}: give the HOST (the profile has no [deployment])")
        return Deployment(profile=profile, nodes=(Node(host=host, rank=0, nnodes=1, profile=profile),))
    if host and host != spec.nodes[0]:
        raise DeploymentError(
            f"{profile.name}: HOST {host!r} is not the deployment's leader {spec.nodes[0]!r}; "
            "leave HOST out (the profile's [deployment] names every node)"
        )
    leader = spec.leader_address or default_leader_address(spec.nodes[0], ssh_config)
    n = len(spec.nodes)
    nodes = tuple(
        Node(host=h, rank=i, nnodes=n, profile=_node_profile(profile, h, i, n, leader))
        for i, h in enumerate(spec.nodes)
    )
    return Deployment(profile=profile, nodes=nodes, leader_address=leader)


def place_one(
    profile: Profile, host: str | None = None, *, ssh_config: str | Path | None = None
) -> Deployment:
    """The profile placed and narrowed to the one node on `host`, for what acts on one node (stacks,
    metrics, spec, drift): a one-box profile's one node on `host`; a deployment's node named `host`,
    any of them (none: the leader).  A `host` that is no node of the deployment is refused."""
    spec = profile.deployment
    whole = place(profile, host if spec is None else None, ssh_config=ssh_config)
    node = whole.node(host) if host else whole.leader
    if node is None:
        names = ", ".join(n.host for n in whole.nodes)
        raise DeploymentError(f"{host!r} is not a node of {profile.name}'s deployment ({names})")
    return Deployment(profile=profile, nodes=(node,), leader_address=whole.leader_address)
