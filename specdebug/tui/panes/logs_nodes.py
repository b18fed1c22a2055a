"""The Logs pane on a deployment: every node's log followed at once, each line with its node column.

Why apart from logs.py: the one-box pane follows one file on one host; a deployment's log is one
file per node (core.deployment.place names them), each followed on its node's own connection from
where this run began (its node record's offset), like `specdebug grep -c PROFILE --follow` does
(every line tagged with its `node`).  Lines come in as each node prints them; the node column is
part of the line's text, so the filter (`/`) narrows to a node too (`^node1`).  Mixed into LogsPane.
"""

from __future__ import annotations

import asyncio

from rich.style import Style

from specdebug.core.control.records import this_run_offset
from specdebug.core.deployment import Deployment, Node
from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import Follower
from specdebug.core.logs.matches import follow_matches
from specdebug.core.logs.parser import LogParser
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.remote.api import Remote, RemoteError
from specdebug.tui.panes.logs_boxes import LogsBoxes
from specdebug.tui.widgets.logview import Entry

NODE_STYLE = Style(color="cyan", bold=True)
SEP = " │ "


def tagged(entry: Entry, node: str, width: int) -> Entry:
    """The entry with its node column in front (highlights move with the text)."""
    name = visible(node)
    head = f"{name:<{width}}{SEP}"
    spans = [(0, len(name), NODE_STYLE)] + [(s + len(head), e + len(head), st) for s, e, st in entry.spans]
    return Entry(entry.kind, head + entry.text, entry.match, entry.style, spans, node=node)


class LogsNodes(LogsBoxes):
    """Every node's log for the Logs pane (its base: LogsPane feeds, renders and says what it follows)."""

    node_followers: dict[str, Follower]

    def _new_parser(self) -> LogParser:
        """LogsPane builds the profile's parser (one per node: a parser keeps a stream's state)."""
        raise NotImplementedError

    def feed_match(self, m: LogMatch, node: str | None = None, width: int = 0) -> None:
        """LogsPane accounts for a match and queues it (tagged with its node)."""

    def feed_event(self, ev: LogEvent, node: str | None = None, width: int = 0) -> None:
        """LogsPane shows a follow event (tagged with its node)."""

    def prom_target(self, remote: Remote, profile: Profile | None) -> tuple[Remote, Profile | None]:
        """Whose /metrics the panel shows: the host's profile, or a deployment's leader (it serves)."""
        dep = self.ctx.deployment()
        if dep is None:
            return remote, profile
        return self.ctx.remotes[dep.leader.host], dep.leader.profile

    def nodes_where(self, dep: Deployment) -> str:
        return f"{len(dep.nodes)} nodes' logs ({', '.join(n.host for n in dep.nodes)})"

    async def follow_nodes(self, dep: Deployment) -> None:
        """Follow every node's log at once (inside the pane's follow worker); a node whose log
        cannot be read says so on its own line while the others go on."""
        width = max(len(visible(n.host)) for n in dep.nodes)
        self.node_followers = {}
        await asyncio.gather(*(self._follow_node(node, width) for node in dep.nodes))

    async def _follow_node(self, node: Node, width: int) -> None:
        remote = self.ctx.remotes[node.host]
        parser = self._new_parser()
        path = node.profile.server.log_file
        try:
            offset = await this_run_offset(remote, node.profile.name)
            follower = Follower(remote, path, prefilter=parser.candidate_patterns(), offset=offset)
            self.node_followers[node.host] = follower
            n = 0
            async for item in follow_matches(remote, path, parser, follower=follower):
                if isinstance(item, LogEvent):
                    self.feed_event(item, node.host, width)
                elif isinstance(item, LogMatch):
                    self.feed_match(item, node.host, width)
                n += 1
                if n % 64 == 0:  # a flood on one node must not starve the UI or the other nodes
                    await asyncio.sleep(0.005)
        except (RemoteError, OSError) as exc:
            self.feed_event(LogEvent(kind="error", path=path, detail=str(exc)), node.host, width)
