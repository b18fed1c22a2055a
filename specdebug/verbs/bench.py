"""`specdebug bench`: run a benchmark on a host (built-in client or the profile's command), or parse a saved output.

    specdebug bench [-F FILE] HOST -c PROFILE [--kind builtin|external] [--requests N] [--concurrency C]
                    [--input-len L] [--output-len L] [--seed S] [--label TEXT] [--session DIR] [--json]
    specdebug bench --parse FILE [--json]

The result is appended (fsync'd) to the session journal (--session, else $SPECDEBUG_SESSION, else
the latest session, else a new one). A run where more than 5 % of the requests failed is failed
(recorded with the reason, never used as a baseline or in comparisons unless asked).
--parse reads sglang.bench_serving / vllm bench serve (printed block or saved JSON), aiperf
(profile_export_aiperf.json or its console table) and guidellm JSON; other JSON is refused (exit 2).
Exit codes: 0 done, 1 the benchmark failed (or no result in the text), 2 usage/profile error or unknown input.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdebug.core.bench.events import BenchDone, BenchLine
from specdebug.core.bench.external import read_output_file
from specdebug.core.bench.headline import headline_of, result_json
from specdebug.core.bench.models import BenchProgress, BenchResult, ServerMetrics, judge_failures
from specdebug.core.bench.parsing import EXPECTED, UnknownResult, parse_results
from specdebug.core.bench.runner import BenchError, BenchRequest, target_bench_events
from specdebug.core.journal import Journal, resolve_session
from specdebug.core.records import BenchResultRecord
from specdebug.core.report import fmt
from specdebug.engines import ENGINES
from specdebug.engines.primitives import ANSI_RE
from specdebug.remote.api import RemoteError
from specdebug.verbs.common import (
    VerbExit,
    add_host_args,
    box_session,
    err,
    interrupted_lines,
    load_profile_or_exit,
    open_target,
    out,
    positive_int,
    print_json,
    progress,
    run_verb,
    session_journal,
)

if TYPE_CHECKING:
    from specdebug.core.target import Target


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_host_args(p, required=False)
    p.add_argument("-c", "--profile", metavar="PROFILE", help="server profile (TOML) of the running server")
    p.add_argument(
        "--kind",
        choices=("builtin", "external"),
        default="builtin",
        help="builtin: the streaming client; external: the profile's [bench] command on the box",
    )
    p.add_argument("--requests", type=positive_int, metavar="N", help="number of measured requests")
    p.add_argument(
        "--concurrency", type=positive_int, metavar="C", help="requests in flight at once (1 = one stream)"
    )
    p.add_argument("--input-len", type=positive_int, metavar="L", help="prompt length (words, ~tokens)")
    p.add_argument("--output-len", type=positive_int, metavar="L", help="tokens generated per request")
    p.add_argument("--seed", type=int, metavar="S", help="seed of the generated prompts")
    p.add_argument("--label", metavar="TEXT", help="free text stored with the result")
    p.add_argument(
        "--session",
        metavar="DIR",
        help="session folder (journal) to record the result in, or box:NAME on HOST",
    )
    p.add_argument(
        "--parse",
        metavar="FILE",
        help=f"parse a saved result: {' / '.join(e.bench.tool for e in ENGINES.values())} (text or JSON), "
        "aiperf, guidellm",
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=cmd_bench)


@run_verb
async def cmd_bench(args: argparse.Namespace) -> int:
    if args.parse:
        return _cmd_parse(args)
    profile = load_profile_or_exit(args.profile, "bench") if args.profile else None
    if profile is None:
        err("bench needs HOST and -c PROFILE (or --parse FILE)")
        return 2
    box_session(args.session)  # a bad box:NAME before connecting
    request = BenchRequest(
        kind=args.kind,
        requests=args.requests,
        concurrency=args.concurrency,
        input_len=args.input_len,
        output_len=args.output_len,
        seed=args.seed,
        label=args.label,
    )
    # the target's leader is benchmarked; a deployment's every node is connected (its GPUs recorded)
    async with open_target(args, profile) as target:
        args.host = target.leader.host
        async with session_journal(args.session, target.leader_remote) as journal:
            session = journal.label if journal is not None else None
            result = await _measure(args, target, request, journal)
    if args.json:
        print_json({**result_json(result), "session": session})
    else:
        out(summary(result))
        if session:
            out(f"recorded in {session}")
    return 0 if result.status == "done" else 1


async def _measure(
    args: argparse.Namespace, target: Target, request: BenchRequest, journal: Any
) -> BenchResult:
    """core.bench.runner.target_bench_events on the target, its progress on a terminal."""
    show_progress = sys.stderr.isatty()
    result: BenchResult | None = None
    try:
        async for ev in target_bench_events(target, request, journal=journal):
            if isinstance(ev, BenchProgress) and show_progress:
                rate = f"{ev.tok_s:.1f} tok/s" if ev.tok_s else ""
                progress(f"{ev.phase}: {ev.done_requests}/{ev.total_requests} requests {rate}   ")
            elif isinstance(ev, BenchLine):
                # the external tool's output: colour codes dropped, a \r progress bar in its last state
                out(ANSI_RE.sub("", ev.text).rsplit("\r", 1)[-1], file=sys.stderr)
            elif isinstance(ev, BenchDone):
                result = ev.result
    except asyncio.CancelledError:  # Ctrl+C or SIGTERM (cli._finish turns it into a cancel)
        if show_progress:
            out(file=sys.stderr)
        for line in interrupted_lines(
            args, target.leader.profile, pid=None, not_recorded="this benchmark (no result)"
        ):
            err(line)
        raise
    except BenchError as exc:
        err(str(exc))
        raise VerbExit(1) from exc
    except RemoteError as exc:
        err(f"{args.host}: {exc}")
        raise VerbExit(1) from exc
    finally:
        if show_progress:
            out(file=sys.stderr)
    assert result is not None  # bench_events ends in BenchDone or raises
    return result


def _cmd_parse(args: argparse.Namespace) -> int:
    if box_session(args.session) is not None:
        err(f"--parse records only in a local session folder, not {args.session} (on a box)")
        return 2
    path = Path(args.parse)
    try:
        text, note = read_output_file(path)  # regular files only, at most their last 32 MiB
    except OSError as exc:
        err(f"cannot read {path}: {exc.strerror or exc}")
        return 2
    if note:
        err(note)
    try:
        results = parse_results(text)
    except UnknownResult as exc:
        err(f"{path}: {exc}")
        return 2
    if not results:
        err(f"{path}: no benchmark result found (expected {EXPECTED})")
        return 1
    result = judge_failures(results[-1])  # a saved run with too many failed requests is failed too
    if args.session:
        Journal(resolve_session(args.session, for_writing=True, target=result.host or None)).append(
            BenchResultRecord(result=result), sync=True
        )
    if args.json:
        print_json(result_json(result))
    else:
        out(summary(result))
    return 0 if result.status == "done" else 1


def server_lines(s: ServerMetrics) -> list[str]:
    """The server's own figures, each with what it is and over which window; absent ones left out.

    They are the whole server's (every stream, the engine's log interval or the /metrics window), so
    they stand apart from the client's per-stream figures above, never beside them bare."""
    figures = [
        ("accept_len", "accept len", None if s.accept_len is None else fmt(s.accept_len, 2)),
        ("verify_ms", "verify", None if s.verify_ms is None else f"{fmt(s.verify_ms, 2)} ms"),
        (
            "gen_throughput",
            "generation",
            None if s.gen_throughput is None else f"{fmt(s.gen_throughput)} tok/s",
        ),
    ]
    shown = [(field, label, value) for field, label, value in figures if value is not None]
    if not shown:
        return []
    lines = ["  server's own figures (the whole server, not this client's streams):"]
    for field, label, value in shown:
        what = s.what.get(field) or f"{s.sources.get(field, 'log')}, {s.samples} log samples"  # older results
        lines.append(f"    {label} {value}: {what}")
    return lines


def summary(r: BenchResult) -> str:
    """A few human lines: the headline figure first, then latency, server view, warnings."""
    who = f"{r.profile} ({r.fingerprint})" if r.profile else r.source_format
    where = f" on {r.host}" if r.host else ""
    lines = []
    if r.status != "done":
        reason = f": {r.failure_reason}" if r.failure_reason else ""
        lines.append(f"{who}{where}: benchmark {r.status.upper()}{reason}")
        if r.status == "failed":
            lines.append("  recorded as failed: not a baseline, not compared (history --include-failed)")
        lines += [f"  error: {e}" for e in r.errors[:3]]
    head = headline_of(r)
    decode = f"{fmt(r.decode_tok_s)} tok/s decode, " if r.decode_tok_s is not None else ""
    lines.append(
        f"{who}{where}: {fmt(head.value)} tok/s {head.label}  ({decode}output {fmt(r.output_tok_s)} tok/s, "
        f"{fmt(r.request_throughput, 2)} req/s, {r.successful_requests or 0} ok"
        f"{f', {r.failed_requests} failed' if r.failed_requests else ''})"
    )
    lines.append(f"  {head.label}: {head.definition}; settings: {head.settings.text()}")
    lines.append(
        f"  TTFT ms p50 {fmt(r.ttft_ms.p50)} p99 {fmt(r.ttft_ms.p99)}   "
        f"ITL ms p50 {fmt(r.itl_ms.p50, 2)} p99 {fmt(r.itl_ms.p99, 2)}   TPOT ms mean {fmt(r.tpot_ms.mean, 2)}"
    )
    if r.accept_length is not None:
        lines.append(f"  accept length (client): {fmt(r.accept_length, 2)}")
    if r.spec is not None and r.spec.acceptance_rate_pct is not None:
        lines.append(f"  acceptance rate: {fmt(r.spec.acceptance_rate_pct)}%")
    if r.server is not None:
        lines += server_lines(r.server)
    for node, g in r.gpus_by_node.items():  # a deployment: every node's GPUs after the run
        hot = [f"GPU {x.index}" for x in g.after or g.before if x.throttled]
        state = f"{len(g.after or g.before)} GPU(s)" if g.after or g.before else f"no GPU state ({g.error})"
        lines.append(f"  {node}: {state}" + (f", throttled: {', '.join(hot)}" if hot else ""))
    lines += [f"  warning: {w}" for w in r.warnings]
    if r.unparsed_lines:
        lines.append(f"  {len(r.unparsed_lines)} unrecognised line(s) kept as text")
    return "\n".join(lines)
