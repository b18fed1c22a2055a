"""Parsed matches of a followed file: the follower's lines through a LogParser, in blocks.

What the Logs pane and `grep` consume. The agent's selection on the box is exact per line, so a
plain grep (no pack, no named groups) takes its lines as they come; without the agent (tail
fallback) the parser selects every line itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import Follower
from specdebug.core.logs.parser import LogParser, PlainMatch, PlainRun
from specdebug.remote.api import Remote, RemoteError

if TYPE_CHECKING:
    from specdebug.core.deployment import Node
    from specdebug.core.target import Target

Match = LogMatch | PlainMatch


async def follow_matches(
    remote: Remote,
    path: str,
    parser: LogParser,
    *,
    from_start: bool = False,
    offset: int | None = None,
    once: bool = False,
    follower: Follower | None = None,
) -> AsyncIterator[Match | LogEvent]:
    """Parsed matches (and follow events) of a remote file: what the pane and `grep` show.

    Pass your own `follower` (built with `parser.candidate_patterns()` as prefilter) to read its
    offset/inode/resolved path while following. A user pattern cut off for taking too long (on the
    box or here) is reported once as a "pattern_cut" event."""
    batches = follow_match_batches(
        remote, path, parser, from_start=from_start, offset=offset, once=once, follower=follower
    )
    try:
        async for batch in batches:
            for item in batch:
                assert not isinstance(item, PlainRun)  # (asked for none: lines one by one)
                yield item
    finally:
        await batches.aclose()


def parser_follower(
    remote: Remote, path: str, parser: LogParser, *, offset: int | None, once: bool, runs: bool
) -> Follower:
    """A follower that selects on the box what `parser` wants (its patterns, named for the cut
    report; runs only for a plain grep parser)."""
    return Follower(
        remote,
        path,
        prefilter=parser.candidate_patterns(),
        offset=offset,
        once=once,
        names=parser.pattern_names(),
        runs=runs and parser.takes_runs(),
    )


async def follow_match_batches(
    remote: Remote,
    path: str,
    parser: LogParser,
    *,
    from_start: bool = False,
    offset: int | None = None,
    once: bool = False,
    follower: Follower | None = None,
    runs: bool = False,
) -> AsyncGenerator[list[Match | PlainRun | LogEvent], None]:
    """`follow_matches` in lists of what arrived together (high line rates: one await per block).

    runs: the caller takes PlainRun items too (a block of plain grep lines, printed as they are:
    no match object, no scrub call per line); only a plain grep parser (`takes_runs`) makes them."""
    if follower is None:
        follower = parser_follower(
            remote, path, parser, offset=0 if from_start else offset, once=once, runs=runs
        )
    cut_seen = len(parser.cut_patterns)
    batches = follower.batches()
    try:
        async for batch in batches:
            # the agent's selection is exact; without it (tail fallback) parse() selects every line
            out = parser.parse_batch(batch, not follower.fallback)
            if len(parser.cut_patterns) > cut_seen:
                for name, detail in list(parser.cut_patterns.items())[cut_seen:]:
                    out.append(LogEvent(kind="pattern_cut", path=path, detail=f"{name}: {detail}"))
                cut_seen = len(parser.cut_patterns)
            if out:
                yield out
    finally:
        await batches.aclose()


async def follow_target_logs(
    target: Target,
    make_parser: Callable[[], LogParser],
    *,
    from_start: bool = False,
    once: bool = False,
    path: str | None = None,
    runs: bool = False,
    this_run: bool = False,
    on_follower: Callable[[Node, Follower], None] | None = None,
) -> AsyncGenerator[tuple[Node, list[Match | PlainRun | LogEvent] | RemoteError], None]:
    """Every node's log of the target at once (`grep -c PROFILE`, the Logs pane): one follower per
    node, on its own connection with its own parser, their blocks tagged with the node as they
    arrive.  A node whose log cannot be read gives its RemoteError and the others go on.
    path: this file instead of the node's log (`grep HOST:PATH -c PROFILE`: a one-node target).
    runs: a plain grep's consecutive lines come as one PlainRun (follow_match_batches).
    this_run: each node's log from where its recorded server's run began (the Logs pane: earlier
    runs' numbers never mix in); on_follower: each node's Follower as it starts (its offset, inode
    and resolved path, read while following)."""
    from specdebug.core.control.records import this_run_offset
    from specdebug.core.profiles.paths import box_path

    done = object()
    queue: asyncio.Queue[tuple[Node, Any]] = asyncio.Queue()

    async def one(node: Node) -> None:
        remote = target.remote(node)
        try:
            where = await box_path(remote, path or node.profile.server.log_file)
            parser = make_parser()
            offset = await this_run_offset(remote, node.profile.name) if this_run else None
            follower = parser_follower(
                remote, where, parser, offset=0 if from_start else offset, once=once, runs=runs
            )
            if on_follower is not None:
                on_follower(node, follower)
            async for batch in follow_match_batches(
                remote, where, parser, from_start=from_start, once=once, follower=follower
            ):
                await queue.put((node, batch))
        except RemoteError as exc:
            await queue.put((node, exc))
        finally:
            await queue.put((node, done))

    tasks = [asyncio.create_task(one(n)) for n in target.reachable()]
    try:
        left = len(tasks)
        while left:
            node, got = await queue.get()
            if got is done:
                left -= 1
            else:
                yield node, got
    finally:
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
