"""The target: the server the user named, placed on its nodes, with a connection to each node.

Every front end (the verbs, the TUI, a bisection's trials, the agent) opens it with `open_target`,
handing over only *how* it connects (the verbs' `open_remote`, the TUI's kept connections); core
services take the `Target` and act on its nodes.  A profile without `[deployment]` is a one-node
target on the verb's HOST, so the one-box path is the one-node case of the same code, not a twin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from specdebug.core.deployment.place import Deployment, Node, node_record_name, place, place_one
from specdebug.core.profiles import Profile
from specdebug.remote.api import Remote

# how a front end opens one node's connection (host spec -> a connected Remote, closed on exit)
Connector = Callable[[str], AbstractAsyncContextManager[Remote]]


@dataclass(frozen=True)
class Target:
    """A placed profile and a connection to each of its nodes (rank order; the leader first).

    `unreachable` names the nodes left out by a partial open (stop/status act on the others and
    say so); every other node has its remote."""

    deployment: Deployment
    remotes: Mapping[str, Remote]
    unreachable: tuple[str, ...] = ()

    @property
    def profile(self) -> Profile:
        """The profile as the user wrote it (the nodes carry it as each node runs it)."""
        return self.deployment.profile

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.deployment.nodes

    @property
    def leader(self) -> Node:
        return self.deployment.leader

    @property
    def multi(self) -> bool:
        """Placed by `[deployment]`: records and logs are per node, output names the node."""
        return self.deployment.multi

    def remote(self, node: Node | str) -> Remote:
        """The connection of a node (by Node or host spec); KeyError for an unreachable one."""
        return self.remotes[node if isinstance(node, str) else node.host]

    @property
    def leader_remote(self) -> Remote:
        return self.remote(self.leader)

    def reachable(self) -> list[Node]:
        """The nodes with a connection, in rank order."""
        return [n for n in self.nodes if n.host in self.remotes]

    def node(self, host: str) -> Node | None:
        return self.deployment.node(host)

    def named(self, node: Node | str, text: object) -> str:
        """`NODE: text` on a multi-node target, `text` on one box: the one place output and errors
        decide whether to name the node (a one-box profile's read as they always did)."""
        host = node if isinstance(node, str) else node.host
        return f"{host}: {text}" if self.multi else str(text)

    def record_names(self, names: list[str], node: Node) -> list[str]:
        """The records these profiles' servers have on `node` (a deployment's: per rank, `NAME.nodeR`)."""
        return [node_record_name(n, node.rank) for n in names] if self.multi else list(names)


def target_of(deployment: Deployment, remotes: Mapping[str, Remote]) -> Target:
    """A target over connections a front end already holds (the TUI's kept remotes): a node with
    none is unreachable."""
    have = {n.host: remotes[n.host] for n in deployment.nodes if n.host in remotes}
    return Target(deployment, have, tuple(n.host for n in deployment.nodes if n.host not in remotes))


@asynccontextmanager
async def open_target(
    profile: Profile,
    host: str | None,
    connect: Connector,
    *,
    ssh_config: str | Path | None = None,
    partial: tuple[type[BaseException], ...] = (),
    one_node: bool = False,
) -> AsyncIterator[Target]:
    """The profile placed (`place`: HOST for a one-box profile, the leader or nothing for a
    deployment) and every node connected through `connect`; closed in reverse order on exit.

    partial: the errors of `connect` that leave a node out (recorded in `unreachable`) instead of
    failing the whole open; by default any failure to connect a node fails the target, and a
    one-node target always fails (there is no other node to act on).
    one_node: only the node on HOST (`place_one`: any node of a deployment; none: the leader), for
    what acts on one node (stacks, metrics, spec, drift)."""
    deployment = (place_one if one_node else place)(profile, host, ssh_config=ssh_config)
    if len(deployment.nodes) == 1:
        partial = ()
    async with AsyncExitStack() as stack:
        remotes: dict[str, Remote] = {}
        unreachable: list[str] = []
        for node in deployment.nodes:
            try:
                remotes[node.host] = await stack.enter_async_context(connect(node.host))
            except partial:
                unreachable.append(node.host)
        yield Target(deployment, remotes, tuple(unreachable))
