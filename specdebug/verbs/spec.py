"""`specdebug spec`: the speculation arithmetic of a profile against the session's other configs.

    specdebug spec [-F FILE] HOST -c PROFILE [--session DIR|box:NAME] [--json]

From the figures each benchmark recorded (the server log's draft/verify lines and accept length,
/metrics, the client's decode tok/s) and the session's plain-decode baseline: the cost of one
speculative cycle, the tok/s it predicts beside the measured tok/s, the break-even accept length,
and the verify time against a fit over the session's other configs; a verify more than 15 % above
the fit is flagged with its likely causes and the evidence.  Where the engine logs no verify time
(vLLM), the cycle is the stream's median gap between token bursts (the built-in benchmark records
it; one burst per draft+verify cycle) and the fit is over whole cycles; `cycle_source` says which.
A figure outside its sane range (core.spec.bounds) is left out with a note; the JSON holds no NaN
or Infinity.  A profile with no result in the session
(or --live) is read from its server's log on HOST now (the last 512 KiB; measured = the server's gen
throughput); otherwise HOST is contacted only for a journal kept on the box (box:NAME).
JSON: {"profile", "session", "baseline", "config", "configs", "live"}; each config has its point's
figures and sources, `cycle_ms`, `cycle_source`, `stream_cycle_ms`, `stream` (the cycle distribution:
median_ms, p10_ms, p90_ms, n, tokens_per_burst...), `fit_of`, `fit_cycle_ms`, `cycle_flagged`.

--advise: which depth (draft tokens / steps, topk kept) is fastest, predicted from the session's
measured configs of the profile's speculative method (core.spec.advise; the model in
docs/spec-advisor.md): tok/s with an interval for each depth of a small grid around what was run,
the best with its gain over the current config, the measurement that would most narrow the choice,
every input with its source, "cannot tell" where the data cannot decide.  JSON adds `advice`:
{"candidates": [{"depth", "config", "predicted_tok_s", "low", "high", ...}], "best": {...},
"verdict", "measure_next", "inputs", "left_out", "notes"}.
--try (implies --advise): launch the advised depth (the profile with it applied to its argv, named
PROFILE.try-dK), benchmark it with the profile's [bench] settings, stop it, and record predicted
against measured in the session (a `spec_advice_try` record); JSON adds `tried`: {"config",
"predicted_tok_s", "measured_tok_s", "low", "high", "error_pct", "inside", ...}.
Exit 0, 1 when the profile has no usable result in the session (or --try measured nothing),
2 usage error or no session.
"""

from __future__ import annotations

import argparse
from typing import Any

from specdebug.core.records import JournalRecord, SpecAdviceTryRecord
from specdebug.core.report import HistoryEntry, baseline_of, history
from specdebug.core.spec.advise import advise, describe
from specdebug.core.spec.analyze import Baseline, ConfigMath, analyze
from specdebug.core.spec.live import live_entry
from specdebug.core.spec.tryout import try_advice
from specdebug.errors import SpecdebugError
from specdebug.verbs.common import (
    add_host_args,
    box_session,
    err,
    load_profile_or_exit,
    node_profile,
    open_target,
    out,
    print_json,
    run_verb,
    session_journal,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "spec",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_host_args(p)
    p.add_argument("-c", "--profile", required=True, metavar="PROFILE", help="server profile (TOML)")
    p.add_argument("--session", metavar="DIR", help="session folder (default: the latest), or box:NAME")
    p.add_argument("--live", action="store_true", help="the profile's figures from its server log now")
    p.add_argument(
        "--advise", action="store_true", help="predict the fastest depth from the measured configs"
    )
    p.add_argument(
        "--try",
        dest="try_advice",
        action="store_true",
        help="launch the advised depth, benchmark it, stop it, record predicted vs measured (implies --advise)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_spec)


def _f(v: float | None, digits: int = 2, unit: str = "") -> str:
    return "?" if v is None else f"{v:.{digits}f}{unit}"


def _show(cm: ConfigMath, base: Baseline | None) -> list[str]:
    p = cm.point
    src = p.sources
    lines = [f"#{p.id} {p.profile}" + ("" if p.speculative else " (no speculation)")]
    if p.speculative and cm.cycle_source == "stream":
        lines.append(
            f"  cycle      {_f(cm.cycle_ms)} ms from the stream (no verify time logged)"
            f"  [{src.get('stream_cycle_ms')}]"
        )
    elif p.speculative:
        lines.append(
            f"  cycle      {_f(cm.cycle_ms)} ms = draft {_f(p.draft_ms)} ms + verify {_f(p.verify_ms)} ms"
            f"  [{src.get('verify_ms', 'not recorded')}]"
        )
        if p.stream_cycle_ms is not None:
            lines.append(f"  stream     {p.stream_cycle_ms:.2f} ms per burst  [{src.get('stream_cycle_ms')}]")
        lines.append(f"  tokens     {p.draft_tokens or '?'} verified per cycle  [{src.get('draft_tokens')}]")
    lines.append(
        f"  predicts   {_f(cm.predicted_tok_s, 1)} tok/s (accept {_f(p.accept_len)} x 1000 / cycle)"
        f"; measured {_f(p.measured_tok_s, 1)} tok/s"
        + (f" ({cm.prediction_error_pct:+.1f} %)" if cm.prediction_error_pct is not None else "")
        + f"  [{src.get('accept_len', 'accept length not recorded')}; {src.get('measured_tok_s', '-')}]"
    )
    if cm.break_even_accept_len is not None and base is not None:
        lines.append(
            f"  break-even accept length {cm.break_even_accept_len:.2f} (cycle / {base.step_ms:.2f} ms"
            f" baseline step); accept {_f(p.accept_len)}"
        )
    if cm.fit_verify_ms is not None:
        mark = "  ABOVE THE FIT" if cm.verify_flagged else ""
        lines.append(
            f"  verify     {_f(p.verify_ms)} ms vs fit {cm.fit_verify_ms:.2f} ms"
            f" ({cm.verify_excess_pct:+.0f} %){mark}"
        )
        lines += [f"    fit over {name}" for name in cm.fit_from]
    if cm.fit_cycle_ms is not None and cm.cycle_excess_pct is not None:
        mark = "  ABOVE THE FIT" if cm.cycle_flagged else ""
        lines.append(
            f"  cycle      {_f(cm.cycle_ms)} ms vs fit {cm.fit_cycle_ms:.2f} ms ({cm.cycle_excess_pct:+.0f} %)"
            f" (stream cycles: no verify time logged){mark}"
        )
        lines += [f"    fit over {name}" for name in cm.fit_from]
    for c in cm.causes:
        lines.append(f"  likely cause: {c.cause}")
        lines += [f"    evidence: {e}" for e in c.evidence]
    lines += [f"  note: {n}" for n in cm.notes]
    return lines


def _pick(configs: list[ConfigMath], name: str, fingerprint: str) -> ConfigMath | None:
    by_fp = [c for c in configs if c.point.fingerprint == fingerprint]
    mine = by_fp or [c for c in configs if c.point.profile == name]
    return mine[-1] if mine else None


def _needs_live(args: argparse.Namespace, entries: list[Any], fp: str) -> bool:
    return bool(args.live) or not any(e.result.fingerprint == fp and e.result.usable() for e in entries)


def _f1(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f}"


def _show_tried(t: SpecAdviceTryRecord) -> list[str]:
    if t.measured_tok_s is None:
        return [f"tried {t.config} (depth {t.depth}): nothing measured: {t.reason}"]
    inside = "inside" if t.inside else "OUTSIDE"
    return [
        f"tried {t.config} (depth {t.depth}, {t.flags}): predicted {_f1(t.predicted_tok_s)} tok/s "
        f"({_f1(t.low)}..{_f1(t.high)}), measured {t.measured_tok_s:.1f} tok/s"
        + (f" ({t.error_pct:+.1f} %, {inside} the interval)" if t.error_pct is not None else "")
        + "; recorded in the session (spec_advice_try)"
    ]


async def _gather(
    args: argparse.Namespace, fp: str, whole: Any, profile: Any
) -> tuple[list[JournalRecord], str | None, HistoryEntry | None]:
    """The session's records and, for a profile with no result in it, its server log now."""
    live = None
    if box_session(args.session) is None:
        async with session_journal(args.session, None, for_writing=False) as journal:
            events = journal.records() if journal is not None else []
            label = journal.label if journal is not None else None
        if _needs_live(args, history(events), fp):  # no result of it recorded: its log now
            async with open_target(args, whole, one_node=True, helper=False) as target:
                live = await live_entry(target.leader_remote, profile)
        return events, label, live
    async with (
        open_target(args, whole, one_node=True, helper=False) as target,
        session_journal(args.session, target.leader_remote) as journal,
    ):
        events = journal.records() if journal is not None else []
        label = journal.label if journal is not None else None
        if _needs_live(args, history(events), fp):
            live = await live_entry(target.leader_remote, profile)
    return events, label, live


@run_verb
async def cmd_spec(args: argparse.Namespace) -> int:
    whole = load_profile_or_exit(args.profile, "spec")
    profile = node_profile(args, whole)  # a deployment: the profile as HOST (its leader) runs it
    fp = profile.fingerprint()
    if args.try_advice:
        return await _cmd_try(args, whole, profile)
    events, label, live = await _gather(args, fp, whole, profile)
    entries = history(events)
    if live is not None:
        entries = [*(e for e in entries if e.result.fingerprint != fp), live]
    data, mine, lines = _arith(events, entries, profile, label, live)
    if args.advise:
        adv = advise(entries, baseline_of(events, entries), profile.name, profile.server.argv, fp)
        data["advice"] = adv.to_json()
        lines += ["", *describe(adv)]
    if args.json:
        print_json(data)
    else:
        for line in lines:
            out(line)
    if mine is None:
        err(
            f"spec: no usable result of {profile.name} in the session (run `specdebug bench HOST -c PROFILE`)"
        )
        return 1
    return 0


def _arith(
    events: list[JournalRecord], entries: list[HistoryEntry], profile: Any, label: str | None, live: Any
) -> tuple[dict[str, Any], ConfigMath | None, list[str]]:
    """The arithmetic of every config: (JSON, the profile's config, the text lines)."""
    base, configs = analyze(entries, baseline_of(events, entries))
    mine = _pick(configs, profile.name, profile.fingerprint())
    data: dict[str, Any] = {
        "profile": profile.name,
        "session": label,
        "baseline": vars(base) if base else None,
        "config": mine.to_json() if mine else None,
        "live": live.result.label if live else None,
        "configs": [c.to_json() for c in configs],
    }
    lines = [
        f"speculation arithmetic, session {label}"
        + (f"; {profile.name}: {live.result.label}" if live else ""),
        f"baseline: {base.source} -> {base.step_ms:.2f} ms per step"
        if base
        else "baseline: none (no plain-decode result)",
    ]
    for c in configs:
        lines += ["", *_show(c, base)]
    return data, mine, lines


async def _cmd_try(args: argparse.Namespace, whole: Any, profile: Any) -> int:
    """--try: the advice from the session, then its best depth launched, benchmarked and stopped."""
    fp = profile.fingerprint()
    async with (
        open_target(args, whole, one_node=True) as target,
        session_journal(args.session, target.leader_remote) as journal,
    ):
        remote = target.leader_remote
        events = journal.records() if journal is not None else []
        label = journal.label if journal is not None else None
        entries = history(events)
        data, mine, lines = _arith(events, entries, profile, label, None)
        adv = advise(entries, baseline_of(events, entries), profile.name, profile.server.argv, fp)
        data["advice"] = adv.to_json()
        lines += ["", *describe(adv)]
        for line in [] if args.json else lines:
            out(line)
        try:
            tried = await try_advice(remote, profile, adv, journal=journal, host=args.host, say=err)
        except SpecdebugError as exc:  # nothing to try, or the launch refused (the port is held)
            err(f"spec --try: {exc}" + (f" ({exc.hint})" if exc.hint else ""))
            if args.json:
                print_json({**data, "tried": None, "error": str(exc)})
            return 1
    data["tried"] = tried.model_dump(mode="json", exclude={"forged", "by_claimed", "by_verified"})
    if args.json:
        print_json(data)
    else:
        for line in _show_tried(tried):
            out(line)
    return 0 if tried.measured_tok_s is not None else 1
