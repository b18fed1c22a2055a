"""`specdebug history` (the sessions' benchmark results) and `specdebug report` (markdown for a PR).

    specdebug history [--json]                      every host's latest session, labelled by host
                                                    -> {"sessions": [{"host", "results": [...]}, ...]}
    specdebug history --host HOST [--json]          that host's session (the one `bench HOST` appends to)
    specdebug history --session DIR [--host HOST] [--json]   -> {"results": [...]} (of HOST only)
    specdebug history --compare A B [--json]        the bench pane's compare: config + metric diff
    specdebug history --baseline N                  the bench pane's "set baseline"
    specdebug report  [--session DIR] [-o FILE]

Failed runs (more than 5 % of requests failed, no result) are listed but never the baseline, never
a delta and never compared, unless --include-failed asks for them.
    specdebug mark TEXT [--session DIR]             the logs pane's mark: "config changed here"

Without --session: $SPECDEBUG_SESSION, else HOST's latest session with --host (report, mark too), else
`history` shows each host's latest session (one alone: as one session) and report/mark the latest.
A journal kept on the box (`--session box:NAME`, as the TUI and `bench HOST --session box:NAME`) is
read over ssh: add --host HOST.
Exit 0, or 2 when there is no session to read (or a failed run is named for --compare/--baseline
without --include-failed).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from specdebug.core.bench.headline import headline_of, settings_differ
from specdebug.core.drift.compare import drift_lines
from specdebug.core.journal import Journal, latest_by_host, resolve_session
from specdebug.core.records import MarkRecord
from specdebug.core.report import (
    HistoryEntry,
    baseline_event,
    baseline_of,
    compare_order,
    config_diff,
    delta_vs,
    fmt,
    fmt_delta,
    fmt_time,
    history,
    metric_diff,
    other_host,
    session_markdown,
)
from specdebug.core.sanitize import visible
from specdebug.verbs.common import (
    add_ssh_args,
    box_session,
    err,
    open_remote,
    out,
    print_json,
    run_verb,
    say_skipped,
    session_journal,
)

SESSION_HELP = "session folder (default: HOST's with --host, else the latest), or box:NAME with --host HOST"


def _box_args(p: argparse.ArgumentParser) -> None:
    """--host: a host's session here (or its results in --session DIR), or the box that keeps a
    --session box:NAME journal (the TUI's); and the usual ssh options."""
    p.add_argument(
        "--host",
        metavar="HOST",
        help="HOST's session (its results only, in --session DIR); with --session box:NAME the box keeping it",
    )
    add_ssh_args(p)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    h = subparsers.add_parser("history")
    h.add_argument("--session", metavar="DIR", help=SESSION_HELP)
    h.add_argument("--json", action="store_true", help='print {"results": [...]}')
    h.add_argument(
        "--compare",
        nargs=2,
        type=int,
        metavar=("A", "B"),
        help="config and metric diff of runs A and B, from the baseline (or the earlier run) to the other",
    )
    h.add_argument("--baseline", type=int, metavar="N", help="make run N the baseline for deltas")
    h.add_argument(
        "--include-failed",
        action="store_true",
        help="let failed runs be a baseline or compared (they are not results otherwise)",
    )
    _box_args(h)
    h.set_defaults(func=cmd_history)

    m = subparsers.add_parser("mark")
    m.add_argument("text", help='what changed, e.g. "NCCL_PROTO=LL exported"')
    m.add_argument("--session", metavar="DIR", help=SESSION_HELP)
    _box_args(m)
    m.set_defaults(func=cmd_mark)

    r = subparsers.add_parser("report")
    r.add_argument("--session", metavar="DIR", help=SESSION_HELP)
    r.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    r.add_argument("--include-failed", action="store_true", help="treat failed runs as results too")
    _box_args(r)
    r.set_defaults(func=cmd_report)


@asynccontextmanager
async def _opened(args: argparse.Namespace, *, for_writing: bool = False) -> AsyncIterator[Any]:
    """The session's journal (None: nothing to read, already said); box:NAME over --host's connection.

    A local session: --session DIR, else $SPECDEBUG_SESSION, else with --host HOST the session of that
    host (the one `bench HOST` appends to), else the latest."""
    if box_session(args.session) is None:
        target = args.host if not (args.session or os.environ.get("SPECDEBUG_SESSION")) else None
        if not for_writing and not _local_exists(args.session, target):
            yield None
            return
        async with session_journal(args.session, None, for_writing=for_writing, target=target) as journal:
            yield journal
        return
    if not args.host:
        async with session_journal(args.session, None):  # says what to do, exit 2
            pass
    async with (
        open_remote(args, args.host, helper=False) as remote,
        session_journal(args.session, remote, for_writing=for_writing) as journal,
    ):
        yield journal


def _local_exists(arg: str | None, target: str | None = None) -> bool:
    session = resolve_session(arg, for_writing=False, target=target)
    if session is None:
        err(
            f"no session of {target} yet (plain `history` lists every host's)"
            if target
            else "no session yet (run a benchmark first, or pass --session DIR)"
        )
        return False
    if arg and not Path(session).is_dir():
        err(f"no session folder at {session}")
        return False
    return True


def _every_host(args: argparse.Namespace) -> bool:
    """Plain `history`: no session named (--session, $SPECDEBUG_SESSION) and no --host."""
    return not (args.session or os.environ.get("SPECDEBUG_SESSION") or args.host)


@run_verb
async def cmd_history(args: argparse.Namespace) -> int:
    if _every_host(args):
        return _history_by_host(args)
    async with _opened(args) as journal:
        return 2 if journal is None else _history(args, journal)


def _history_by_host(args: argparse.Namespace) -> int:
    """Each host's latest session, labelled by its host (core.journal.latest_by_host); one alone reads
    as before, --compare/--baseline need one (--host or --session says which)."""
    sessions = latest_by_host()
    if not sessions:
        err("no session yet (run a benchmark first, or pass --session DIR)")
        return 2
    if len(sessions) == 1:
        return _history(args, Journal(sessions[0][1]))
    if args.compare or args.baseline is not None:
        hosts = ", ".join(label or "(no host)" for label, _ in sessions)
        err(f"sessions of several hosts ({hosts}): say which with --host HOST or --session DIR")
        return 2
    if args.json:
        docs = []
        for label, folder in sessions:
            journal = Journal(folder)
            docs.append({"host": label or None, **_history_doc(journal, args)})
            say_skipped(journal)
        print_json({"sessions": docs})
        return 0
    for n, (label, folder) in enumerate(sessions):
        if n:
            out()
        out(f"== {label or '(no host)'} ==", newlines=False)
        _history(args, Journal(folder))
    return 0


HISTORY_KINDS = {"bench_result", "mark"}  # results and the baseline mark: the rest is not read


def _history_doc(journal: Any, args: argparse.Namespace, events: list[Any] | None = None) -> dict[str, Any]:
    """`history --json`'s object for one session: its results (of --host's host only, with --host)."""
    events = journal.records(HISTORY_KINDS) if events is None else events
    entries = _of_host(history(events), args)
    base = baseline_of(events, entries, include_failed=args.include_failed)
    return {
        "session": str(journal.label),
        "baseline": base.id if base else None,
        "hosts": sorted({e.result.host for e in entries if e.result.host}),
        "results": [e.to_json() for e in entries],
    }


def _of_host(entries: list[HistoryEntry], args: argparse.Namespace) -> list[HistoryEntry]:
    """With --host on a local session: that host's results (ids stay the session's)."""
    if not args.host or box_session(args.session) is not None:
        return entries
    return [e for e in entries if e.result.host == args.host]


def _history(args: argparse.Namespace, journal: Any) -> int:
    events = journal.records(HISTORY_KINDS)  # a 1 GB journal of launches is passed over, not held
    say_skipped(journal)
    entries = _of_host(history(events), args)
    if args.compare or args.baseline is not None:
        by_id = {e.id: e for e in entries}
        wanted = list(args.compare or []) + ([args.baseline] if args.baseline is not None else [])
        missing = [n for n in wanted if n not in by_id]
        if missing:
            ids = f"runs {entries[0].id}..{entries[-1].id}" if entries else "no runs"
            err(
                f"no run #{missing[0]} in {journal.label}"
                + (f" of {args.host}" if args.host else "")
                + f" ({ids})"
            )
            return 2
        refused = [n for n in wanted if not by_id[n].result.usable()] if not args.include_failed else []
        if refused:
            r = by_id[refused[0]].result
            err(
                f"run #{refused[0]} failed ({r.failure_reason or r.status}): not a result, so not a baseline "
                "or a side of a comparison; add --include-failed to use it anyway"
            )
            return 2
        if args.baseline is not None:
            journal.append(baseline_event(by_id[args.baseline].ts, include_failed=args.include_failed))
            out(f"baseline: #{args.baseline} {by_id[args.baseline].result.profile or ''}")
            return 0
        first, second = compare_order(
            by_id[args.compare[0]],
            by_id[args.compare[1]],
            baseline_of(events, entries, include_failed=args.include_failed),
        )
        return _compare(first, second, args.json)
    base = baseline_of(events, entries, include_failed=args.include_failed)
    if args.json:
        print_json(_history_doc(journal, args, events))
        return 0
    failed = sum(1 for e in entries if not e.result.usable())
    out(
        f"session {journal.label}"
        + (f", results of {args.host}" if args.host and box_session(args.session) is None else "")
        + f": {len(entries)} result(s)"
        + (f", {failed} failed (not results)" if failed else "")
    )
    for e in entries:
        r = e.result
        if base is e:
            d = "base"
        elif not r.usable() and not args.include_failed:
            d = r.status.upper()
        else:
            d = fmt_delta(delta_vs(e, base, include_failed=args.include_failed))
            if base is not None and other_host(base.result, r):  # a comparison across hosts says so
                d += f" (on {r.host}, base on {base.result.host})"
        accept = r.server.accept_len if r.server and r.server.accept_len is not None else r.accept_length
        warn = f"  [{len(r.warnings)} warning(s)]" if r.warnings else ""
        out(
            f"#{e.id:<3} {fmt_time(r.started_at or e.ts)}  {r.profile or r.source_format:<20} "
            f"{fmt(r.headline()):>8} tok/s {headline_of(r).label:<17} {d:>8}  accept {fmt(accept, 2):>5}  "
            f"TTFT {fmt(r.ttft_ms.p50):>7} ms  {r.fingerprint or '-'}{warn}"
        )
        if not r.usable() and r.failure_reason:
            out(f"     {r.status}: {r.failure_reason}")
    return 0


def _compare(a: HistoryEntry, b: HistoryEntry, as_json: bool) -> int:
    """From `a` to `b` (compare_order: the baseline or the earlier run first, as the table's vs base)."""
    config = config_diff(a.result, b.result)
    metrics = metric_diff(a.result, b.result)
    drift = drift_lines(a.result.drift, b.result.drift)  # what changed on the box (core.drift)
    ha, hb = headline_of(a.result), headline_of(b.result)
    not_alike = settings_differ(ha, hb)  # a headline delta between unlike benchmarks says so
    if as_json:
        print_json(
            {
                "from": a.id,
                "to": b.id,
                "a": a.id,
                "b": b.id,
                "headline": {"from": ha.model_dump(mode="json"), "to": hb.model_dump(mode="json")},
                "not_alike": not_alike,
                "config": config,
                "drift": drift,
                "metrics": [
                    {"metric": m, "from": x, "to": y, "a": x, "b": y, "delta_pct": d}
                    for m, x, y, d in metrics
                ],
            }
        )
        return 0
    out(f"from #{a.id} {a.result.profile or '?'} -> to #{b.id} {b.result.profile or '?'}")
    out("config:" if config else "config: same")
    for line in config:
        out(f"  {line}")
    out("box:" if drift else "box: nothing compared changed")
    for line in drift:
        out(f"  {line}")
    out(f"headline: {ha.label} ({ha.settings.text()}) -> {hb.label} ({hb.settings.text()})")
    for line in not_alike:
        out(f"  not measured alike: {line}")
    out(f"  {'metric':<18} {'#' + str(a.id):>9} {'#' + str(b.id):>9} {'change':>8}")
    for name, x, y, d in metrics:
        out(f"  {name:<18} {fmt(x, 2):>9} {fmt(y, 2):>9} {fmt_delta(d):>8}")
    return 0


@run_verb
async def cmd_mark(args: argparse.Namespace) -> int:
    async with _opened(args, for_writing=True) as journal:
        if journal is None:
            return 2
        ev = journal.append(MarkRecord(label=args.text, origin="cli"), sync=True)
    out(f"marked {journal.label}: {ev.label}")
    return 0


@run_verb
async def cmd_report(args: argparse.Namespace) -> int:
    async with _opened(args) as journal:
        if journal is None:
            return 2
        events = journal.records()
        say_skipped(journal)
    text = session_markdown(events, str(journal.label), include_failed=args.include_failed)
    if args.output:
        # the file is read in a terminal or pasted into a PR: the same visible escapes as stdout
        Path(args.output).write_text(visible(text, newlines=True), encoding="utf-8")
    else:
        out(text, end="")
    return 0
