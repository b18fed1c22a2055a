"""`specdebug history` (the session's benchmark results) and `specdebug report` (markdown for a PR).

    specdebug history [--session DIR] [--json]      -> {"results": [...]}
    specdebug history --compare A B [--json]        the bench pane's compare: config + metric diff
    specdebug history --baseline N                  the bench pane's "set baseline"
    specdebug report  [--session DIR] [-o FILE]
    specdebug mark TEXT [--session DIR]             the logs pane's mark: "config changed here"

Without --session: $SPECDEBUG_SESSION, else the most recent session. Exit 0, or 2 when there is
no session to read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specdebug.core.journal import Journal, resolve_session
from specdebug.core.report import (
    baseline_event,
    baseline_of,
    compare_order,
    config_diff,
    delta_pct,
    fmt,
    fmt_delta,
    fmt_time,
    history,
    metric_diff,
    render_markdown,
    report_title,
)
from specdebug.verbs.common import err, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    h = subparsers.add_parser("history", help="list the benchmark results of a session")
    h.add_argument("--session", metavar="DIR", help="session folder (default: the latest)")
    h.add_argument("--json", action="store_true", help='print {"results": [...]}')
    h.add_argument(
        "--compare",
        nargs=2,
        type=int,
        metavar=("A", "B"),
        help="config and metric diff of runs A and B, from the baseline (or the earlier run) to the other",
    )
    h.add_argument("--baseline", type=int, metavar="N", help="make run N the baseline for deltas")
    h.set_defaults(func=cmd_history)

    m = subparsers.add_parser("mark", help="add a mark to the session journal (shown in the report)")
    m.add_argument("text", help='what changed, e.g. "NCCL_PROTO=LL exported"')
    m.add_argument("--session", metavar="DIR", help="session folder (default: the latest)")
    m.set_defaults(func=cmd_mark)

    r = subparsers.add_parser("report", help="markdown report of a session: results, config diffs, notes")
    r.add_argument("--session", metavar="DIR", help="session folder (default: the latest)")
    r.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    r.set_defaults(func=cmd_report)


def _journal(arg: str | None) -> Journal | None:
    session = resolve_session(arg, for_writing=False)
    if session is None:
        err("no session yet (run a benchmark first, or pass --session DIR)")
        return None
    if arg and not Path(session).is_dir():
        err(f"no session folder at {session}")
        return None
    return Journal(session)


def cmd_history(args: argparse.Namespace) -> int:
    journal = _journal(args.session)
    if journal is None:
        return 2
    events = journal.events()
    entries = history(events)
    if args.compare or args.baseline is not None:
        by_id = {e.id: e for e in entries}
        wanted = list(args.compare or []) + ([args.baseline] if args.baseline is not None else [])
        missing = [n for n in wanted if n not in by_id]
        if missing:
            err(f"no run #{missing[0]} in {journal.session_dir} (runs 1..{len(entries)})")
            return 2
        if args.baseline is not None:
            journal.append("mark", baseline_event(by_id[args.baseline].ts))
            print(f"baseline: #{args.baseline} {by_id[args.baseline].result.profile or ''}")
            return 0
        first, second = compare_order(
            by_id[args.compare[0]], by_id[args.compare[1]], baseline_of(events, entries)
        )
        return _compare(first, second, args.json)
    if args.json:
        print_json({"session": str(journal.session_dir), "results": [e.to_json() for e in entries]})
        return 0
    print(f"session {journal.session_dir}: {len(entries)} result(s)")
    base = baseline_of(events, entries)
    for e in entries:
        r = e.result
        d = (
            "base"
            if base is e
            else fmt_delta(delta_pct(r.headline(), base.result.headline() if base else None))
        )
        accept = r.server.accept_len if r.server and r.server.accept_len is not None else r.accept_length
        warn = f"  [{len(r.warnings)} warning(s)]" if r.warnings else ""
        print(
            f"#{e.id:<3} {fmt_time(r.started_at or e.ts)}  {r.profile or r.source_format:<20} "
            f"{fmt(r.headline()):>8} tok/s {d:>8}  accept {fmt(accept, 2):>5}  "
            f"TTFT {fmt(r.ttft_ms.p50):>7} ms  {r.fingerprint or '-'}{warn}"
        )
    return 0


def _compare(a, b, as_json: bool) -> int:
    """From `a` to `b` (compare_order: the baseline or the earlier run first, as the table's vs base)."""
    config = config_diff(a.result, b.result)
    metrics = metric_diff(a.result, b.result)
    if as_json:
        print_json(
            {
                "from": a.id,
                "to": b.id,
                "a": a.id,
                "b": b.id,
                "config": config,
                "metrics": [
                    {"metric": m, "from": x, "to": y, "a": x, "b": y, "delta_pct": d}
                    for m, x, y, d in metrics
                ],
            }
        )
        return 0
    print(f"from #{a.id} {a.result.profile or '?'} -> to #{b.id} {b.result.profile or '?'}")
    print("config:" if config else "config: same")
    for line in config:
        print(f"  {line}")
    print(f"  {'metric':<18} {'#' + str(a.id):>9} {'#' + str(b.id):>9} {'change':>8}")
    for name, x, y, d in metrics:
        print(f"  {name:<18} {fmt(x, 2):>9} {fmt(y, 2):>9} {fmt_delta(d):>8}")
    return 0


def cmd_mark(args: argparse.Namespace) -> int:
    session = resolve_session(args.session, for_writing=True)
    ev = Journal(session).append("mark", {"label": args.text, "source": "cli"}, sync=True)
    print(f"marked {session}: {ev['label']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    journal = _journal(args.session)
    if journal is None:
        return 2
    events = journal.events()
    text = render_markdown(events, title=report_title(journal.session_dir.name, events))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0
