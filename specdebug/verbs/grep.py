"""`specdebug grep HOST:PATH -e REGEX ...`: matching lines of a log on the box, as they come.

With -c PROFILE the logs are its target's (core.logs.matches.follow_target_logs): without HOST:PATH
every node's log of a `[deployment]` at once, each line tagged with its node (JSON key `node`;
text `NODE: line`); with HOST:PATH that file on its node.

The regexes (Python syntax, named captures become `fields`) are applied on the box by the
follow agent, so only matching lines cross the network. `--follow` keeps following (like
`tail -F | grep`), resuming at the exact byte offset after a reconnect; without it the file is
read once. A local path is accepted too (read once).
Exit codes: 0 some line matched (or --follow ran until interrupted), 1 no match or the file cannot
be read, 2 usage/pattern error.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
from collections.abc import AsyncGenerator, AsyncIterator
from json.encoder import encode_basestring_ascii as _quote
from typing import TYPE_CHECKING, Any

from specdebug.core.limits import open_regular_file, truncation_note
from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.location import split_host_path
from specdebug.core.logs.parser import LogParser, PatternError, PlainMatch, PlainRun
from specdebug.core.logs.runtext import run_text
from specdebug.core.logs.scan import iter_capped_lines
from specdebug.core.sanitize import visible
from specdebug.core.secrets import Scrubber
from specdebug.engines import ENGINES, PACK_NAMES
from specdebug.remote.api import RemoteError
from specdebug.verbs.common import (
    VerbExit,
    add_ssh_args,
    err,
    json_text,
    load_profile_or_exit,
    open_remote,
    open_target,
    out,
    out_block,
    print_json,
    run_verb,
)
from specdebug.verbs.scan import LOG_HELP, match_json

if TYPE_CHECKING:
    from specdebug.remote.api import Remote


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("grep")
    p.add_argument(
        "log",
        metavar="HOST:PATH",
        nargs="?",
        help=LOG_HELP
        + "; left out with -c of a profile with [deployment]: every node's log, lines tagged by node",
    )
    p.add_argument(
        "-e",
        "--regexp",
        dest="patterns",
        action="append",
        metavar="REGEX",
        default=[],
        help="Python regex; repeat for several (any may match); default: the pack's lines",
    )
    p.add_argument(
        "--pack",
        choices=PACK_NAMES,
        default=None,
        help="also parse matches with this pattern pack (fields, metrics, events)",
    )
    p.add_argument(
        "-c",
        "--profile",
        metavar="PROFILE",
        help="profile TOML: its [patterns] and pack parse the matched lines; its secret values are masked",
    )
    p.add_argument("--follow", action="store_true", help="keep following the file (tail -F)")
    p.add_argument(
        "--from-start", action="store_true", help="with --follow: start at the beginning, not the end"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per match: offset, line, fields, ...")
    add_ssh_args(p)
    p.set_defaults(func=grep)


def _report_cut(parser: LogParser, said: set[str]) -> None:
    for name, why in parser.cut_patterns.items():
        if name not in said:
            said.add(name)
            err(f"pattern {name!r} was cut off: {why}")


def _write(lines: list[str]) -> None:
    out_block(lines)
    lines.clear()


def _match_text(m: LogMatch | PlainMatch | PlainRun, as_json: bool) -> str:
    """One output line. Plain matches (no pack fields) are formatted directly: the same text as
    json.dumps(match_json(m)), without building the dict (grep --follow --json at high rates)."""
    if isinstance(m, PlainRun):
        return run_text(m, as_json)
    if not as_json:  # box text: control characters shown, never emitted
        if m.truncated is not None:
            return f"{visible(m.line, newlines=False)} {truncation_note(len(m.line.encode()), m.truncated)}\n"
        return visible(m.line, newlines=False) + "\n"
    if m.event == "match" and m.offset is not None and m.lineno is None and not m.metrics:
        if not (m.also or m.ts or m.phase or m.warmup or m.truncated is not None):
            fields = json.dumps(m.fields, default=str) if m.fields else "{}"
            return (
                f'{{"offset": {m.offset}, "event": "match", "line": {_quote(m.line)}, '
                f'"fields": {fields}, "metrics": {{}}, "warmup": false}}\n'
            )
    return json_text(match_json(m)) + "\n"  # strict: a pack's figure may be inf


def _emit(item: LogMatch | PlainMatch | LogEvent, as_json: bool) -> bool:
    if isinstance(item, LogEvent):
        if item.kind in ("opened", "ended", "resumed"):
            return False
        if as_json:
            print_json(item)
        else:
            err(f"{item.path}: {item.kind}" + (f": {item.detail}" if item.detail else ""))
        return False
    if as_json:
        print_json(match_json(item))
    elif item.truncated is not None:
        out(f"{item.line} {truncation_note(len(item.line.encode()), item.truncated)}", newlines=False)
    else:
        out(item.line, newlines=False)
    return True


@run_verb
async def grep(args: argparse.Namespace) -> int:
    """`specdebug grep ... | head` ending early is handled once for every verb in cli._finish."""
    if not args.patterns and not args.pack:
        err("grep: give at least one -e REGEX (or --pack to select the pack's lines)")
        raise VerbExit(2)
    prof = load_profile_or_exit(args.profile, "grep") if args.profile else None
    kind = prof.server.kind if prof is not None else None
    pack = args.pack or (kind if kind in ENGINES else "none")
    named = dict(prof.patterns) if prof is not None else {}

    def make_parser() -> LogParser:
        # without --pack or -c nothing but the patterns' named groups is parsed (the fast path);
        # with -c the profile's pack and [patterns] parse the lines -e selects, as `scan -c` does,
        # so the number a user greps for is in the JSON
        return LogParser(
            pack,
            patterns=named,
            grep=args.patterns,
            from_start=args.from_start or not args.follow,
            scrub=Scrubber.for_profile(prof) if prof is not None else Scrubber(),
        )

    try:
        parser = make_parser()
    except PatternError as exc:
        err(str(exc))
        raise VerbExit(2, str(exc)) from exc
    host, path = split_host_path(args.log) if args.log is not None else (None, None)
    if args.log is None and prof is None:
        err("grep: give HOST:PATH (or -c PROFILE of a profile with [deployment]: every node's log)")
        raise VerbExit(2)
    if host is None and path is not None:
        return _grep_local(args, parser, path)
    gc.freeze()  # what import left behind is never garbage: keep collections of new matches cheap
    if prof is None:
        assert host is not None and path is not None
        async with open_remote(args, host) as remote:
            return await _show(args, _one_file(remote, path, parser, args), multi=False)
    # the profile's target: every node's log (no HOST:PATH), or the file HOST:PATH on its node
    from specdebug.core.logs.matches import follow_target_logs

    async with open_target(args, prof, host=host, one_node=host is not None) as target:
        stream = follow_target_logs(
            target,
            make_parser,
            from_start=args.from_start or not args.follow,
            once=not args.follow,
            path=path,
            runs=True,
        )
        return await _show(args, stream, multi=target.multi)


def _grep_local(args: argparse.Namespace, parser: LogParser, path: str) -> int:
    if args.follow:
        err("grep --follow needs HOST:PATH (a file on a box)")
        raise VerbExit(2)
    try:
        f = open_regular_file(path)
    except OSError as exc:
        err(f"cannot read {path}: {exc.strerror or exc}")
        return 1
    found = False
    with f:
        chunks = iter(lambda: f.read(1 << 20), b"")
        for lineno, (offset, line, full) in enumerate(iter_capped_lines(chunks), 1):
            m = parser.parse(line, offset=offset, lineno=lineno, truncated=full)
            if m is not None:
                found |= _emit(m, args.json)
    _report_cut(parser, set())
    return 0 if found else 1


async def _one_file(
    remote: Remote, path: str, parser: LogParser, args: argparse.Namespace
) -> AsyncGenerator[tuple[str, list[Any] | RemoteError], None]:
    """A file on a box named without a profile: its blocks, as the target's stream gives them."""
    from specdebug.core.logs.matches import follow_match_batches
    from specdebug.core.profiles.paths import box_path

    try:
        path = await box_path(remote, path)  # `~/...` as every verb reads it
        async for batch in follow_match_batches(
            remote,
            path,
            parser,
            from_start=args.from_start or not args.follow,
            once=not args.follow,
            runs=True,
        ):
            yield remote.name, batch
    except RemoteError as exc:
        yield remote.name, exc


def _tagged(host: str, item: Any, as_json: bool) -> str:
    if isinstance(item, PlainRun):  # a block of plain lines: each line names its node
        text = run_text(item, as_json).splitlines(keepends=True)
        head = '{"node": ' + json.dumps(host) + ", " if as_json else f"{visible(host)}: "
        return "".join(head + (line[1:] if as_json else line) for line in text)
    if as_json:
        return json_text({"node": host, **match_json(item)}) + "\n"
    return f"{visible(host)}: {visible(item.line, newlines=False)}\n"


async def _show(
    args: argparse.Namespace, stream: AsyncGenerator[tuple[Any, Any], None], *, multi: bool
) -> int:
    """Print the blocks as they come; on a multi-node target every line and event names its node."""
    async with contextlib.aclosing(stream):
        return await _show_all(args, stream, multi=multi)


async def _show_all(args: argparse.Namespace, stream: AsyncIterator[tuple[Any, Any]], *, multi: bool) -> int:
    found = failed = False
    async for who, batch in stream:
        host = who if isinstance(who, str) else who.host
        if isinstance(batch, RemoteError):
            err(f"{host}: {batch}" if multi else str(batch))
            if not multi:
                return 1
            failed = True
            continue
        lines: list[str] = []
        for item in batch:
            if isinstance(item, LogEvent):
                failed |= item.kind == "error"
                if lines:  # keep stdout and stderr in order
                    _write(lines)
                if not multi:
                    _emit(item, args.json)
                elif item.kind in ("opened", "ended", "resumed"):
                    continue
                elif args.json:
                    print_json({"node": host, **item.model_dump(mode="json")})
                else:
                    err(f"{host}: {item.path}: {item.kind}" + (f": {item.detail}" if item.detail else ""))
                continue
            lines.append(_tagged(host, item, args.json) if multi else _match_text(item, args.json))
            found = True
        if lines:
            _write(lines)
    if failed and not found:
        return 1
    return 0 if (found or args.follow) else 1
