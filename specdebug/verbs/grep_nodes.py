"""`grep -c PROFILE -e PAT [--follow]` on a deployment: every node's log at once, each line tagged.

Apart from grep.py because it is the fan-in: one follower per node (each on its node's own
connection and its own parser), their blocks merged as they arrive, every match and follow event
carrying the `node` it came from (JSON key `node`; text lines start with `NODE: `).  A node whose log
cannot be read is reported by name while the others keep going.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from specdebug.core.logs.events import LogEvent
from specdebug.core.logs.matches import follow_match_batches
from specdebug.core.sanitize import visible
from specdebug.remote.api import RemoteError
from specdebug.verbs.common import err, out_block, print_json
from specdebug.verbs.deployment import open_nodes, placed
from specdebug.verbs.scan import match_json

if TYPE_CHECKING:
    from specdebug.core.deployment import Node
    from specdebug.core.logs.parser import LogParser
    from specdebug.core.profiles import Profile
    from specdebug.remote.api import Remote

_DONE = object()


def _tagged(host: str, item: Any, as_json: bool) -> str:
    if as_json:
        return json.dumps({"node": host, **match_json(item)}, default=str) + "\n"
    return f"{visible(host)}: {visible(item.line, newlines=False)}\n"


async def grep_nodes(args: argparse.Namespace, prof: Profile, make_parser: Callable[[], LogParser]) -> int:
    dep = placed(args, prof)
    from_start = args.from_start or not args.follow
    queue: asyncio.Queue[tuple[Node, Any]] = asyncio.Queue()

    async def one(node: Node, remote: Remote) -> None:
        from specdebug.core.profiles.paths import box_path

        try:
            path = await box_path(remote, node.profile.server.log_file)
            async for batch in follow_match_batches(
                remote, path, make_parser(), from_start=from_start, once=not args.follow
            ):
                await queue.put((node, batch))
        except RemoteError as exc:
            await queue.put((node, exc))
        finally:
            await queue.put((node, _DONE))

    found = failed = False
    async with open_nodes(args, dep) as remotes:
        tasks = [asyncio.create_task(one(n, remotes[n.host])) for n in dep.nodes]
        try:
            left = len(tasks)
            while left:
                node, batch = await queue.get()
                if batch is _DONE:
                    left -= 1
                    continue
                if isinstance(batch, RemoteError):
                    err(f"{node.host}: {batch}")
                    failed = True
                    continue
                lines: list[str] = []
                for item in batch:
                    if isinstance(item, LogEvent):
                        if item.kind in ("opened", "ended", "resumed"):
                            continue
                        failed |= item.kind == "error"
                        if lines:
                            out_block(lines)
                            lines.clear()
                        if args.json:
                            print_json({"node": node.host, **item.model_dump(mode="json")})
                        else:
                            err(
                                f"{node.host}: {item.path}: {item.kind}"
                                + (f": {item.detail}" if item.detail else "")
                            )
                        continue
                    lines.append(_tagged(node.host, item, args.json))
                    found = True
                if lines:
                    out_block(lines)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.wait(tasks, timeout=5)
    if failed and not found:
        return 1
    return 0 if (found or args.follow) else 1
