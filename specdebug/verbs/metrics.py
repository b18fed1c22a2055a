"""`specdebug metrics`: the server's Prometheus /metrics through the SSH forward, as rates over a window.

    specdebug metrics [-F FILE] HOST -c PROFILE [--watch] [--interval S] [--count N] [--json]

Without --watch: two scrapes --interval seconds apart, printed as one result (rates over that window;
`since_start` holds the counters since the server started).  Acceptance (overall and per draft position)
is the window's; when the window saw no drafts (an idle server) it is the counters' since the server
started, and says so (`acceptance.basis` / `acceptance.source` in JSON).  With --watch: one result per interval
until Ctrl+C (or --count results); --json prints one JSON object per line.  Every number names the
metric it came from.  Exit codes: 0 read, 1 metrics off (SGLang without --enable-metrics) or the
server unreachable, 2 usage/profile error.
"""

from __future__ import annotations

import argparse
import sys

from specdebug.core.acceptance import Acceptance, acceptance, no_acceptance_reason
from specdebug.core.metrics import MetricsEvent, PromRates, describe_rates, watch_metrics
from specdebug.core.specflags import profile_spec_flags, spec_mismatches
from specdebug.engines import ENGINES
from specdebug.verbs.common import (
    add_host_args,
    err,
    load_profile_or_exit,
    open_target,
    out,
    print_json,
    run_verb,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "metrics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_host_args(p)
    p.add_argument("-c", "--profile", required=True, metavar="PROFILE", help="server profile (TOML)")
    p.add_argument("--watch", action="store_true", help="keep reading, one result per interval")
    p.add_argument(
        "--interval", type=_positive_float, default=1.0, metavar="S", help="seconds between scrapes"
    )
    p.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N results")
    p.add_argument("--json", action="store_true", help="one JSON object (per line with --watch)")
    p.set_defaults(func=cmd_metrics)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def format_rates(r: PromRates) -> list[str]:
    window = f"over {r.window_s:.1f} s" if r.window_s else "since server start"
    lines = [f"{r.engine or 'unknown engine'} /metrics, {window}"]
    lines += [f"  {label:<24} {value:<22} [{source}]" for label, value, source in describe_rates(r)]
    if len(lines) == 1:
        lines.append("  (no known metric on the page)")
    return lines


def format_acceptance(acc: Acceptance | None, why_none: str | None, window_s: float | None) -> list[str]:
    """Acceptance lines when they are not the rates' (a window without drafts: the counters since start)."""
    if acc is None:
        return [f"  acceptance: {why_none}"] if why_none else []
    if acc.basis != "since_start" or window_s is None:  # the rates above show it already
        return []
    lines = [f"  acceptance, {acc.source}:"]
    for field, label, value in (
        ("accept_length", "accept length", None if acc.accept_length is None else f"{acc.accept_length:.3f}"),
        ("accept_rate", "accept rate", None if acc.accept_rate is None else f"{acc.accept_rate:.3f}"),
        ("per_position", "per position", ", ".join(f"{v:.3f}" for v in acc.per_position) or None),
    ):
        if value is not None:
            lines.append(f"    {label:<22} {value:<22} [{acc.metrics.get(field, '?')}]")
    if acc.drafts is not None:
        lines.append(f"    {'drafts':<22} {acc.drafts:<22.0f} [since server start]")
    return lines


def _result(
    ev: MetricsEvent,
    host: str,
    port: int,
    since_start: PromRates | None = None,
    findings: list[str] | None = None,
) -> dict[str, object]:
    out: dict[str, object] = {
        "status": "ok" if ev.kind == "sample" else ev.kind,
        "host": host,
        "port": port,
        "t": ev.t,
    }
    if ev.rates is not None:
        out["engine"] = ev.rates.engine
        out["rates"] = ev.rates.model_dump(mode="json")
        out["findings"] = findings or []
        acc = acceptance(ev.rates, ev.since_start)
        out["acceptance"] = acc.model_dump(mode="json") if acc is not None else None
        if acc is None and (why := no_acceptance_reason(ev.rates, ev.since_start)):
            out["acceptance_note"] = why
    if since_start is not None:
        out["since_start"] = since_start.model_dump(mode="json")
    if ev.message:
        out["message"] = ev.message
    return out


@run_verb
async def cmd_metrics(args: argparse.Namespace) -> int:
    profile = load_profile_or_exit(args.profile, "metrics")
    if args.count is not None and args.count < 1:
        err("metrics: --count must be at least 1")
        return 2
    srv = profile.server
    kind = srv.kind if srv.kind in ENGINES else None
    count = (args.count if args.watch else 2) or None
    code = 0
    first: PromRates | None = None
    # the node on HOST (any node of a deployment), with the profile as it runs it there
    async with open_target(args, profile, one_node=True) as target:
        remote, profile, host = target.leader_remote, target.leader.profile, target.leader.host
        srv = profile.server
        async for ev in watch_metrics(remote, srv.port, kind=kind, interval=args.interval, count=count):
            if ev.kind == "sample" and not args.watch and first is None:
                first = ev.rates  # the first scrape: counters since the server started
                continue
            if ev.kind != "sample":
                code = 1
                if not args.json:
                    err(ev.message or ev.kind)
                else:
                    print_json(_result(ev, host, srv.port))
                if ev.kind == "off" or not args.watch:
                    break
                continue
            # the live speculative gauges (SGLang 0.5.23) against the profile's flags
            findings = spec_mismatches(ev.rates, *profile_spec_flags(srv.argv)) if ev.rates else []
            if args.json:
                print_json(_result(ev, host, srv.port, first, findings))
            else:
                out("\n".join(format_rates(ev.rates)) if ev.rates is not None else "no rates yet")
                if ev.rates is not None:
                    acc = acceptance(ev.rates, ev.since_start)
                    why = no_acceptance_reason(ev.rates, ev.since_start) if acc is None else None
                    for line in format_acceptance(acc, why, ev.rates.window_s):
                        out(line)
                for finding in findings:
                    out(f"  finding: {finding}")
                for note in ev.rates.notes if ev.rates is not None else []:
                    out(f"  note: {note}")
                if ev.message:
                    err(f"warning: {ev.message}")
            sys.stdout.flush()
    return code
