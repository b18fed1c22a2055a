"""`specdebug scan LOG`: after-the-fact analysis of a server log (local path or HOST:PATH).

Prints metric stats (n, mean, p50, p90, min, max, last) and event counts; the Logs pane shows
the same numbers live because both go through specdebug.core.logs.
Only regular files are read (a FIFO, device or directory is refused, saying what it is); lines
longer than 64 KiB are cut (counted in `truncated_lines`); on a terminal, progress goes to stderr.
Exit codes: 0 scanned, 1 the file cannot be read, 2 usage/profile/pattern error (a missing file too; also when a
profile pattern was cut off for running too long: the stats are printed, the pattern is named).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from specdebug.core.logs.events import LogMatch
from specdebug.core.logs.location import split_host_path
from specdebug.core.logs.parser import PatternError, PlainMatch
from specdebug.core.logs.scan import ScanResult, scan_file, scan_remote
from specdebug.core.logs.stats import metric_rank
from specdebug.core.secrets import Scrubber
from specdebug.engines import ENGINES, PACK_NAMES
from specdebug.remote.api import RemoteError
from specdebug.verbs.common import add_ssh_args, err, load_profile_or_exit, out, print_json, run_verb

LOG_HELP = "a local path, or HOST:PATH on a box (split at the last ':' before '/' or '~')"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scan")
    p.add_argument("log", metavar="LOG", help=LOG_HELP)
    p.add_argument(
        "--pack",
        choices=PACK_NAMES,
        default=None,
        help="pattern pack (default: the profile's kind, else auto)",
    )
    p.add_argument(
        "-c", "--profile", metavar="PROFILE", help="profile TOML: its named patterns become metrics"
    )
    p.add_argument("--include-warmup", action="store_true", help="count samples from before the ready marker")
    p.add_argument(
        "--last-run",
        action="store_true",
        help="only the last server run in the log (launches append to one log file)",
    )
    p.add_argument(
        "--events", action="store_true", help="also print every match (one JSON line each with --json)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_ssh_args(p)
    p.set_defaults(func=scan)


def profile_scrubber(args: argparse.Namespace, verb: str) -> Scrubber:
    """Masks the secret values of -c PROFILE (and whatever the shape rules find) in log text."""
    if not args.profile:
        return Scrubber()
    return Scrubber.for_profile(load_profile_or_exit(args.profile, verb))


def load_patterns(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """(pack, extra patterns) from --pack and -c PROFILE; profile problems raise VerbExit(2)."""
    pack = args.pack
    patterns: dict[str, str] = {}
    if args.profile:
        prof = load_profile_or_exit(args.profile, "scan")
        patterns = dict(prof.patterns)
        if pack is None and prof.server.kind in ENGINES:
            pack = prof.server.kind
    return pack or "auto", patterns


def profile_draft_tokens(args: argparse.Namespace) -> int | None:
    """The profile's --speculative-num-draft-tokens, for specdebug's own accept rate when the log has no
    server_args line (core.logs.acceptrate); None without the flag (the server's default depends on topk)."""
    if not args.profile:
        return None
    from specdebug.core.specflags import profile_spec_flags

    return profile_spec_flags(load_profile_or_exit(args.profile, "scan").server.argv)[1]


def scrubbed(m: LogMatch, scrub: Callable[[str], str]) -> LogMatch:
    """The match with its line and text fields passed through `scrub` (known secret values)."""
    line = scrub(m.line)
    fields = {k: scrub(v) if isinstance(v, str) else v for k, v in m.fields.items()}
    if line is m.line and fields == m.fields:
        return m
    return m.model_copy(update={"line": line, "fields": fields})


def match_json(m: LogMatch | PlainMatch) -> dict[str, Any]:
    d: dict[str, Any] = {"offset": m.offset}
    if m.lineno is not None:
        d["lineno"] = m.lineno
    d.update(event=m.event, line=m.line, fields=m.fields, metrics=m.metrics, warmup=m.warmup)
    if m.also:
        d["also"] = m.also
    if m.ts:
        d["ts"] = m.ts
    if m.phase:
        d["phase"] = m.phase
    if m.truncated is not None:
        d["truncated"] = m.truncated  # the line's full length; `line` is its first 64 KiB
    return d


def match_text(m: LogMatch) -> str:
    where = f"L{m.lineno}" if m.lineno is not None else f"@{m.offset}"
    events = "+".join([m.event, *m.also])
    nums = " ".join(f"{k}={_fmt(v)}" for k, v in m.metrics.items())
    extra = f" [{m.fields.get('error_kind') or m.phase}]" if m.event in ("error", "startup") else ""
    warm = " (warmup)" if m.warmup else ""
    return f"{where} {events}{extra}{warm} {nums}".rstrip()


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def print_result(res: ScanResult, *, include_warmup: bool) -> None:
    out(f"pack: {res.pack or '?'}   lines: {res.lines}")
    if res.warmup_marker and not include_warmup:
        out("warmup samples (before the ready marker) left out; --include-warmup counts them")
    if res.metrics:
        out(f"{'metric':<28}{'n':>7}{'mean':>11}{'p50':>11}{'p90':>11}{'min':>11}{'max':>11}{'last':>11}")
        for name, st in sorted(res.metrics.items(), key=lambda kv: metric_rank(kv[0])):
            cells = "".join(f"{_fmt(st[k]):>11}" for k in ("mean", "p50", "p90", "min", "max", "last"))
            out(f"{name:<28}{st['n']:>7}{cells}")
    else:
        out("no metric samples")
    for name, definition in res.rate_definitions.items():
        out(f"{name}: {definition}")
    if res.events:
        out("events: " + ", ".join(f"{k} {v}" for k, v in sorted(res.events.items())))
    if res.truncated_lines:
        out(f"{res.truncated_lines} line(s) longer than 64 KiB: only their first 64 KiB were parsed")


class TerminalProgress:
    """`scanned 312.0 MiB / 1.0 GiB (31%) 95.3 MB/s` on stderr, redrawn at most 5 times a second,
    only when stderr is a terminal (a pipe or a log file gets nothing)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if not self.on or now - self.last < 0.2:
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-6) / 1e6
        of = f" / {_mib(total)} ({100 * done // total}%)" if total else ""
        self.stream.write(f"\rscanned {_mib(done)}{of} {rate:.1f} MB/s\x1b[K")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _mib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


@run_verb
async def scan(args: argparse.Namespace) -> int:
    """`specdebug scan ... | head` ending early is handled once for every verb in cli._finish."""
    from specdebug.verbs.common import VerbExit, open_remote

    pack, patterns = load_patterns(args)
    on_match = None
    if args.events:
        scrub = profile_scrubber(
            args, "scan"
        )  # the parser masked what it can see; this adds the profile's values
        if args.json:
            on_match = lambda m: print_json(match_json(scrubbed(m, scrub)))  # noqa: E731
        else:
            on_match = lambda m: out(match_text(scrubbed(m, scrub)))  # noqa: E731
    host, path = split_host_path(args.log)
    progress = TerminalProgress()
    kwargs = dict(
        pack=pack,
        patterns=patterns,
        include_warmup=args.include_warmup,
        last_run=args.last_run,
        on_match=on_match,
        on_progress=progress if progress.on else None,
        draft_tokens=profile_draft_tokens(args),
    )
    try:
        if host is None:
            try:
                res = scan_file(path, **kwargs)
            except BrokenPipeError:
                raise  # the reader left (cli._finish); not a file we cannot read
            except OSError as exc:
                err(f"cannot read {path}: {exc.strerror or exc}")
                return 2 if isinstance(exc, FileNotFoundError | IsADirectoryError) else 1
        else:
            from specdebug.core.profiles.paths import box_path

            async with open_remote(args, host) as remote:
                try:
                    res = await scan_remote(remote, await box_path(remote, path), **kwargs)
                except RemoteError as exc:
                    err(str(exc))
                    return 1
    except PatternError as exc:
        err(str(exc))
        raise VerbExit(2, str(exc)) from exc
    finally:
        progress.clear()
    if args.json:
        print_json(res)
    else:
        print_result(res, include_warmup=args.include_warmup)
    sys.stdout.flush()
    for name, why in res.cut_patterns.items():
        err(f"pattern {name!r} was cut off: {why}")
    return 2 if res.cut_patterns else 0
