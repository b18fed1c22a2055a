"""`specdebug bisect`: find the knob(s) that make the bad profile slower, in the fewest launches.

    specdebug bisect [-F FILE] [HOST] --good A.toml --bad B.toml [--metric NAME] [--threshold V]
        [--min-gap PCT] [--repeats R] [--interleave] [--gate EXPR] [--group GLOB] [--failed-start bad|skip]
        [--requests N] [--output-len L] [--concurrency C] [--max-age S] [--session DIR] [--resume] [--json]

The same engine as the TUI's Bisect pane (specdebug.core.bisect).  Progress goes to stderr; --json
prints one object at the end: verdict, culprits, effects (knob -> share of the good-bad gap with
low/high at 99 % from the measured noise), explained, sets, launches, naive_launches, trials.
Trials are journaled in the session as they finish; a config this same bisection measured there
less than --max-age seconds ago is not launched again (records of other bisections, or whose knobs
do not give their fingerprint, are not replayed, and the result says so); judgements by hand are
never replayed.  --resume continues the session's unfinished bisection (its ends and options come
from the journal when not given) and says which leftover server of it it stops.
Verdicts: found (one knob or set), several (independent contributors, each with its share of the gap),
interaction (only together), cannot-tell (within the noise, or the box drifted), no-difference,
inconclusive (an end or the confirmation could not be measured, or the knobs do not close the gap).
Deployments (profiles with `[deployment]` on the same nodes and rendezvous; HOST may be left out,
else it must be the leader): every trial launches every node with the knobs applied (a knob of
[server] on every node; what node_env/node_args set differently on one node is the knob
`[NODE] NAME`, moved on that node only), waits until the deployment is ready as one, benchmarks the
leader with every node's GPUs recorded, and stops every node; a node that never joins or dies makes
the trial a failed start naming it.  Profiles on different nodes are refused (exit 2).
Exit codes: 0 found / several / interaction confirmed by a launch of the bad profile with the
culprits restored, 1 anything else, 2 usage or profile error.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

from specdebug.core.bisect import models as bm
from specdebug.core.bisect.book import unfinished
from specdebug.core.bisect.gate import GateError, parse_gate
from specdebug.core.bisect.judge import known_metrics
from specdebug.core.bisect.knobs import Candidates, GroupError
from specdebug.core.bisect.run import Bisection
from specdebug.core.bisect.trial import Nodes, TrialError, refusal
from specdebug.core.drift.report import ends_drift
from specdebug.core.records import BisectStartRecord
from specdebug.verbs.common import (
    VerbExit,
    add_host_args,
    box_session,
    err,
    load_profile_or_exit,
    open_remote,
    open_target,
    out,
    positive_int,
    print_json,
    run_verb,
    say_skipped,
    session_journal,
)
from specdebug.verbs.signals import on_term


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "bisect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_host_args(p, required=False)  # a deployment's profiles name their nodes
    p.add_argument("--good", metavar="A.toml", help="the good profile (the fast one)")
    p.add_argument("--bad", metavar="B.toml", help="the bad profile (the slow one)")
    p.add_argument("--metric", default="output_tok_s", help="what to judge by (default output_tok_s)")
    p.add_argument(
        "--threshold", type=float, metavar="V", help="bad beyond V (default: midpoint of the ends)"
    )
    p.add_argument(
        "--min-gap",
        type=float,
        default=5.0,
        metavar="PCT",
        help="ends closer than PCT %% are no difference (default 5)",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=4,
        metavar="R",
        help="measure a config up to R times while a decision is within the noise (default 4; ends at least twice)",
    )
    p.add_argument(
        "--interleave",
        action="store_true",
        help="with --repeats: an end between a candidate's repeats, linear drift corrected "
        "(one extra launch per repeat)",
    )
    p.add_argument(
        "--gate", metavar="EXPR", help="judge from the log before benchmarking, e.g. verify_ms<=25"
    )
    p.add_argument(
        "--group", action="append", default=[], metavar="GLOB", help="knobs matching GLOB move together"
    )
    p.add_argument(
        "--failed-start", choices=("bad", "skip"), default="skip", help="a candidate that fails to start is"
    )
    p.add_argument("--requests", type=positive_int, metavar="N", help="bench requests per trial")
    p.add_argument("--output-len", type=positive_int, metavar="L", help="tokens generated per request")
    p.add_argument("--concurrency", type=positive_int, metavar="C", help="requests in flight at once")
    p.add_argument(
        "--session", metavar="DIR", help="session folder (journal and trial cache), or box:NAME on HOST"
    )
    p.add_argument(
        "--max-age",
        type=_seconds,
        default=900.0,
        metavar="S",
        help="journaled measurements older than S seconds are measured again (default 900)",
    )
    p.add_argument("--resume", action="store_true", help="continue the session's unfinished bisection")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=cmd_bisect)
    p.__class__ = type("BisectParser", (type(p),), {"_parse_optional": _glob_is_a_value})


def _glob_is_a_value(self: argparse.ArgumentParser, arg_string: str) -> object:
    """Knob globs start with '--' (`--group '--speculative-*'`): one with a wildcard is a value, not an option."""
    if arg_string.startswith("--") and any(c in arg_string for c in "*?["):
        return None
    return super(type(self), self)._parse_optional(arg_string)  # type: ignore[misc]  # argparse's hook, not in typeshed


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be 0 or more seconds")
    return value


def _usage(message: str) -> VerbExit:
    err(message)
    return VerbExit(2, message)


def _options(args: argparse.Namespace, previous: BisectStartRecord | None) -> bm.BisectOptions:
    given = {
        "metric": args.metric,
        "threshold": args.threshold,
        "min_gap_pct": args.min_gap,
        "repeats": args.repeats,
        "interleave": args.interleave,
        "gate": args.gate,
        "groups": args.group,
        "failed_start": args.failed_start,
        "requests": args.requests,
        "output_len": args.output_len,
        "concurrency": args.concurrency,
        "max_age_s": args.max_age,
    }
    if previous is not None and not (args.good or args.bad):
        return previous.options.model_copy()
    return bm.BisectOptions.model_validate(given)


@run_verb
async def cmd_bisect(args: argparse.Namespace) -> int:
    if not args.host and args.good:  # a deployment: HOST is its leader
        spec = load_profile_or_exit(args.good, "bisect").deployment
        args.host = spec.nodes[0] if spec is not None else None
    if not args.host and not args.resume:
        raise _usage("bisect: give the HOST (the good profile has no [deployment] naming its nodes)")
    if box_session(args.session) is None:  # a local journal: usage errors are found before connecting
        async with session_journal(args.session, None, target=args.host) as journal:
            return await _bisect(args, journal, None)
    async with open_remote(args) as remote, session_journal(args.session, remote) as journal:
        return await _bisect(args, journal, remote)


async def _bisect(args: argparse.Namespace, journal: Any, remote: Any) -> int:
    session = journal.label
    previous = unfinished(journal.records()) if args.resume else None
    say_skipped(journal)
    if args.resume and previous is None and not (args.good and args.bad):
        raise _usage(f"--resume: no unfinished bisection in {session}; give --good and --bad")
    good_file = args.good or (previous.good.file if previous is not None else None)
    bad_file = args.bad or (previous.bad.file if previous is not None else None)
    if not good_file or not bad_file:
        raise _usage("bisect needs --good A.toml and --bad B.toml")
    good, bad = load_profile_or_exit(good_file, "bisect"), load_profile_or_exit(bad_file, "bisect")
    why = refusal(good, bad)
    if why is not None:
        raise _usage(f"bisect: {why}")
    if not args.host and good.deployment is not None:  # --resume of a deployment's bisection
        args.host = good.deployment.nodes[0]
    if not args.host:
        raise _usage("bisect: give the HOST (the good profile has no [deployment] naming its nodes)")
    options = _options(args, previous)
    if options.metric not in known_metrics() and options.metric not in good.patterns:
        raise _usage(f"--metric {options.metric!r}: unknown (known: {', '.join(known_metrics())})")
    try:  # usage errors before connecting
        Candidates(good, bad, options.groups)
        if options.gate:
            parse_gate(options.gate)
    except (GroupError, GateError) as exc:
        raise _usage(str(exc)) from exc
    stop_note = (  # TERM: the running trial's server is stopped by the trial's own cleanup
        lambda: "bisect: TERM: stopping the trial's server before exiting",
        lambda: (
            f"bisect: ended by TERM; continue with: specdebug bisect {args.host} --resume --session {session}"
        ),
    )
    async with _targets(args, good, remote) as (remote, nodes), on_term(*stop_note):
        engine = Bisection(remote, good, bad, options, journal=journal, nodes=nodes)
        result = None
        shown: dict[str, Any] = {}
        try:
            async for ev in engine.events():
                _progress(ev, options.metric, shown)
                if isinstance(ev, bm.Finished):
                    result = ev.result
        except TrialError as exc:
            err(f"bisect stopped: {exc}")
            return 1
    assert result is not None
    ends = {t.role.value: t.fingerprint for t in result.trials if t.role.value in ("good", "bad")}
    box = ends_drift(journal.records({"launch", "bench_result"}), ends.get("good", ""), ends.get("bad", ""))
    if args.json:
        print_json({**result.model_dump(mode="json"), "session": session, "drift_between_ends": box})
    else:
        out(summary(result))
        out("box between the ends: " + ("; ".join(box) if box else "nothing compared changed"))
        out(f"recorded in {session}")
    return 0 if result.verdict in ("found", "several", "interaction") and result.confirmed else 1


@contextlib.asynccontextmanager
async def _targets(
    args: argparse.Namespace, good: Any, remote: Any
) -> AsyncIterator[tuple[Any, Nodes | None]]:
    """The good profile's target (the box journal's connection reused): (its leader's connection,
    every node's for a deployment, whose trials place each candidate on those nodes; None for one
    box, whose trials place it on the one connection)."""
    from specdebug.core.deployment import place

    def placer(profile: Any) -> Any:
        return place(profile, ssh_config=getattr(args, "ssh_config", None))

    held = {args.host: remote} if remote is not None else None
    async with open_target(args, good, held=held) as target:
        nodes = Nodes(remotes=target.remotes, place=placer) if target.multi else None
        yield target.leader_remote, nodes


def _say(text: str) -> None:
    out(text, file=sys.stderr)


def _applied(applied: list[str]) -> str:
    return ", ".join(f"+{a}" for a in applied) or "(none)"


def _progress(ev: Any, metric: str, shown: dict[str, Any]) -> None:
    """One stderr line per step worth telling (an estimate only when it changed)."""
    if isinstance(ev, bm.Planned):
        _say(f"bisect {ev.good} (good) vs {ev.bad} (bad): {len(ev.knobs)} knobs, {ev.settings}")
        for k in ev.knobs:
            _say(
                f"  {k.name}: {k.good if k.good is not None else '(absent)'} -> {k.bad if k.bad is not None else '(absent)'}"
            )
    elif isinstance(ev, bm.TrialStarted):
        what = {"good": "good end", "bad": "bad end", "drift": "good end again (drift check)"}.get(
            ev.role.value
        )
        _say(f"#{ev.index} {what or _applied(ev.applied)}: launching {ev.config} (run {ev.sample})")
    elif isinstance(ev, bm.TrialProgress) and ev.phase is bm.Phase.PORT and ev.index < 0:
        _say(ev.detail)  # a server an interrupted run of this bisection left: named as it is stopped
    elif isinstance(ev, bm.TrialProgress) and ev.phase is bm.Phase.PORT and ev.detail.startswith("stopped"):
        _say(f"  {ev.detail} to free port for the next trial")
    elif isinstance(ev, bm.TrialProgress) and ev.phase in (bm.Phase.GATE, bm.Phase.STOP):
        _say(f"  {ev.elapsed_s:6.1f}s  {ev.phase.value} {ev.detail}")
    elif isinstance(ev, bm.TrialProgress) and ev.phase is bm.Phase.READY and ev.detail == "ready":
        _say(f"  {ev.elapsed_s:6.1f}s  ready")
    elif isinstance(ev, bm.TrialDone):
        r = ev.row
        what = {"good": "good end", "bad": "bad end"}.get(r.role.value) or _applied(r.applied)
        value = f"{r.metric:.2f} {metric}" if r.metric is not None else "no metric"
        tag = " (cached)" if r.cached else ""
        _say(
            f"#{r.index} {what}: {value} -> {r.judged.value if r.judged else '?'}{tag}"
            + (f" ({r.reason})" if r.reason else "")
        )
    elif isinstance(ev, bm.EndsJudged):
        _say(f"ends: {ev.evidence.why}")
    elif isinstance(ev, bm.Estimate) and ev.launches_left:
        told = ev.text()
        if shown.get("estimate") != told:
            shown["estimate"] = told
            _say(f"  {told}")


def summary(r: bm.Result) -> str:
    lines = [f"verdict: {r.verdict}" + (f" ({r.search})" if r.search else "")]
    if r.culprits:
        lines.append(f"culprit{'s' if len(r.culprits) > 1 else ''}: {', '.join(r.culprits)}")
    for k in r.knobs:
        e = r.effects.get(k.name)
        share = (
            f"{e.share:+.0%} of the gap ({e.low:+.0%} to {e.high:+.0%})" if e and e.share is not None else ""
        )
        if share and e is not None and e.direction and k.name not in r.culprits:
            share += f": {e.direction}"  # a knob measured and not named says why: no effect, or it helps
        mark = "*" if k.name in r.culprits else " "
        change = (
            f"{k.good if k.good is not None else '(absent)'} -> {k.bad if k.bad is not None else '(absent)'}"
        )
        lines.append(f" {mark}{k.name}: {change}  {share or (e.basis if e else '')}")
    for st in r.sets:
        if st.share is not None:
            lines.append(
                f"  together {'+'.join(st.knobs)}: {st.share:+.0%} of the gap ({st.low:+.0%} to {st.high:+.0%})"
            )
    if r.explained is not None:
        lines.append(
            f"explained: {r.explained:.0%} of the gap by the culprits together (confirmation launch)"
        )
    lines.append(f"launches: {r.launches} (one knob at a time: {r.naive_launches}), {r.duration_s:.0f} s")
    for t in r.trials:
        metric = f"{t.metric:.2f}" if t.metric is not None else "-"
        flags = [x for x, on in (("cached", t.cached), ("gated", t.gated)) if on]
        lines.append(
            f"  #{t.index} {t.role.value:<9} {metric:>9}  {t.judged.value if t.judged else '?':<7} "
            f"{t.fingerprint}  {_applied(t.applied) if t.role.value == 'candidate' else ''}"
            + (f"  [{', '.join(flags)}]" if flags else "")
            + (f"  {t.reason}" if t.reason else "")
        )
    lines += [f"note: {n}" for n in r.notes]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)
