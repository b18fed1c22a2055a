"""Parsed matches of a followed file: the follower's lines through a LogParser, in blocks.

What the Logs pane and `grep` consume. The agent's selection on the box is exact per line, so a
plain grep (no pack, no named groups) takes its lines as they come; without the agent (tail
fallback) the parser selects every line itself.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import Follower
from specdebug.core.logs.parser import LogParser, PlainMatch, PlainRun
from specdebug.remote.api import Remote

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
        follower = Follower(
            remote,
            path,
            prefilter=parser.candidate_patterns(),
            offset=0 if from_start else offset,
            once=once,
            names=parser.pattern_names(),
            runs=runs and parser.takes_runs(),
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
