"""Session history and the markdown report built from a journal.

The report is what a user pastes into a PR or an issue: every benchmark result with the config
that produced it, how each run's config differs from the previous one (so "94 -> 60 tok/s"
comes with "--speculative-num-steps: 2 -> 3"), warnings that make a number suspect, and the
session's notes and marks. Config diffs use the argv/env recorded with each result (the
profile file may have changed since), split into knobs the same way profiles.diff_profiles does.

Failed work is not a result: a failed run (too many failed requests, no result block) is listed
with its reason but is never the baseline, never a delta and never a side of a config-change
comparison unless the caller asks for it (`include_failed`, the verbs' `--include-failed`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from specdebug.core.bench.headline import headline_of, result_json, settings_differ
from specdebug.core.bench.models import BenchResult, LatencyStats, judge_failures
from specdebug.core.bisect.report import bisect_markdown
from specdebug.core.drift.report import drift_markdown
from specdebug.core.fingerprint import PLUMBING_FLAGS, split_argv
from specdebug.core.records import BenchResultRecord, JournalRecord, MarkRecord
from specdebug.core.secrets import mask_text
from specdebug.core.source import ServerSource

BASELINE_LABEL = "baseline"


@dataclass
class HistoryEntry:
    """One recorded result; `id` is its 1-based position in the session, `ts` its journal time."""

    id: int
    ts: float
    result: BenchResult
    source: ServerSource | None = None  # the commit the measured server ran, when the run proved it

    def to_json(self) -> dict[str, Any]:
        source = self.source.model_dump(mode="json") if self.source is not None else None
        return {"id": self.id, "ts": self.ts, **result_json(self.result), "source": source}


def history(events: Sequence[JournalRecord]) -> list[HistoryEntry]:
    """The session's bench results in order (the journal skipped those that do not validate)."""
    out: list[HistoryEntry] = []
    for ev in events:
        if isinstance(ev, BenchResultRecord):
            res = judge_failures(ev.result.model_copy(deep=True))  # journals older than the rule too
            out.append(HistoryEntry(id=len(out) + 1, ts=ev.ts, result=res, source=ev.source))
    return out


def baseline_event(result_ts: float, *, include_failed: bool = False) -> MarkRecord:
    """The journal "mark" that makes a result the session's baseline (a failed one only when the
    user asked for it, which the mark remembers)."""
    return MarkRecord(label=BASELINE_LABEL, result_ts=result_ts, include_failed=include_failed)


def comparable(entries: list[HistoryEntry], *, include_failed: bool = False) -> list[HistoryEntry]:
    """The entries that may be a baseline or a side of a comparison."""
    return list(entries) if include_failed else [e for e in entries if e.result.usable()]


def baseline_of(
    events: Sequence[JournalRecord], entries: list[HistoryEntry], *, include_failed: bool = False
) -> HistoryEntry | None:
    """The result last marked as baseline, else the first result; failed runs are skipped unless
    `include_failed` (or the mark itself was set with it)."""
    chosen: MarkRecord | None = None
    for ev in events:
        if isinstance(ev, MarkRecord) and ev.label == BASELINE_LABEL and ev.result_ts is not None:
            chosen = ev
    if chosen is not None and chosen.result_ts is not None:
        for e in entries:
            if abs(e.ts - chosen.result_ts) < 1e-6:
                if e.result.usable() or include_failed or chosen.include_failed:
                    return e
                break
    usable = comparable(entries, include_failed=include_failed)
    return usable[0] if usable else None


def delta_vs(entry: HistoryEntry, base: HistoryEntry | None, *, include_failed: bool = False) -> float | None:
    """Headline delta in % of a run against the baseline; None for a failed run (not a result)."""
    if base is None or base is entry or not (entry.result.usable() or include_failed):
        return None
    return delta_pct(entry.result.headline(), base.result.headline())


def delta_pct(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return (value - base) / base * 100.0


def _knobs(res: BenchResult) -> dict[str, str]:
    """Recorded argv/env as name -> value ("(set)" for a switch), plumbing flags left out."""
    out: dict[str, str] = {}
    if res.argv:
        prefix, flags = split_argv(list(res.argv))
        out["(command)"] = " ".join(prefix)
        for name, values in flags:
            if name not in PLUMBING_FLAGS:
                out[name] = " ".join(values) if values else "(set)"
    for k, v in (res.env or {}).items():
        out[f"env {k}"] = v
    return out


def other_host(a: BenchResult, b: BenchResult) -> bool:
    """The two results come from two machines (both known): a comparison across hosts, said so."""
    return bool(a.host and b.host and a.host != b.host)


def config_diff(a: BenchResult, b: BenchResult) -> list[str]:
    """Human lines for what differs between two results' launch configs (empty: same config).
    Another host comes first: the same flags on another machine are not the same experiment."""
    ka, kb = _knobs(a), _knobs(b)
    lines = []
    if other_host(a, b):
        lines.append(f"host: {_show(a.host)} -> {_show(b.host)} (a comparison across hosts)")
    for name in [*ka, *[n for n in kb if n not in ka]]:
        va, vb = ka.get(name), kb.get(name)
        if va != vb:
            lines.append(f"{name}: {_show(va)} -> {_show(vb)}")
    if a.server_version != b.server_version and (a.server_version or b.server_version):
        lines.append(f"server version: {_show(a.server_version)} -> {_show(b.server_version)}")
    return lines


def _show(v: str | None) -> str:
    return "(absent)" if v is None else repr(v)


def metric_diff(a: BenchResult, b: BenchResult) -> list[tuple[str, float | None, float | None, float | None]]:
    """(metric, a, b, delta %) rows for the compare view and the report."""
    sa, sb = a.server, b.server
    rows = [
        ("tok/s", a.headline(), b.headline()),
        ("output tok/s", a.output_tok_s, b.output_tok_s),
        ("req/s", a.request_throughput, b.request_throughput),
        ("TTFT p50 ms", a.ttft_ms.p50, b.ttft_ms.p50),
        ("ITL p50 ms", a.itl_ms.p50, b.itl_ms.p50),
        ("ITL p99 ms", a.itl_ms.p99, b.itl_ms.p99),
        ("accept len", _accept(a), _accept(b)),
        ("verify ms", sa.verify_ms if sa else None, sb.verify_ms if sb else None),
        ("server gen tok/s", sa.gen_throughput if sa else None, sb.gen_throughput if sb else None),
    ]
    return [(name, x, y, delta_pct(y, x)) for name, x, y in rows]


def compare_order(
    a: HistoryEntry, b: HistoryEntry, base: HistoryEntry | None
) -> tuple[HistoryEntry, HistoryEntry]:
    """(from, to) of a compare, in the results table's direction: the table's "vs base" is the
    change from the baseline to the row, so a compare goes from the baseline when it is one of
    the two, else from the earlier run to the later one, whichever was picked first."""
    if base is not None and b is base and a is not base:
        return b, a
    if base is not None and a is base:
        return a, b
    return (a, b) if a.id <= b.id else (b, a)


def _accept(r: BenchResult) -> float | None:
    if r.server and r.server.accept_len is not None:
        return r.server.accept_len
    return r.accept_length


def fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def fmt_delta(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def fmt_time(ts: float | None) -> str:
    return "-" if not ts else datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _lat(s: LatencyStats) -> str:
    return fmt(s.p50) if s.p50 is not None else fmt(s.mean)


def render_markdown(
    events: Sequence[JournalRecord], *, title: str = "specdebug session", include_failed: bool = False
) -> str:
    """The whole session as markdown: results table, config diffs, failed runs, warnings, notes.

    Text from the journal is masked once more (URL credentials, bearer values, secret name=value
    pairs): a journal written by an older version must not leak through a pasted report.
    """
    entries = history(events)
    base = baseline_of(events, entries, include_failed=include_failed)
    out = [f"# {title}", ""]
    if events:
        hosts = sorted({e.result.host for e in entries if e.result.host})
        out.append(f"- events: {len(events)}, from {fmt_time(events[0].ts)} to {fmt_time(events[-1].ts)}")
        if hosts:
            out.append(f"- hosts: {', '.join(hosts)}")
        if base is not None:
            on = f", on {base.result.host}" if len(hosts) > 1 and base.result.host else ""
            out.append(f"- baseline: run #{base.id} ({base.result.profile or '?'}{on})")
        out.append("")
    out += ["## Results", ""]
    if not entries:
        out += ["No benchmark results in this session.", ""]
    else:
        out.append(
            "| # | time | profile | fingerprint | kind | tok/s | vs base | output tok/s | req/s | TTFT ms | "
            "ITL ms | accept len | verify ms | warnings |"
        )
        out.append("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for e in entries:
            r = e.result
            d = delta_vs(e, base, include_failed=include_failed)
            failed = not r.usable() and not include_failed
            out.append(
                "| "
                + " | ".join(
                    _cell(x)
                    for x in (
                        str(e.id),
                        fmt_time(r.started_at or e.ts),
                        r.profile or "-",
                        f"`{r.fingerprint}`" if r.fingerprint else "-",
                        r.kind if r.status == "done" else f"{r.kind} ({r.status})",
                        fmt(r.headline()),
                        "base" if base is e else ("failed" if failed else _vs_base(e, base, d)),
                        fmt(r.output_tok_s),
                        fmt(r.request_throughput, 2),
                        _lat(r.ttft_ms),
                        _lat(r.itl_ms),
                        fmt(_accept(r), 2),
                        fmt(r.server.verify_ms if r.server else None, 2),
                        str(len(r.warnings)) if r.warnings else "",
                    )
                )
                + " |"
            )
        out += [
            "",
            "tok/s = the headline (core.bench.headline): single-stream decode rate (excludes TTFT; "
            "1000 / TPOT mean for a parsed result) when concurrency is 1, else output tok/s.",
            "",
        ]
        sources = [f"- #{e.id}: {_cell(e.source.describe())}" for e in entries if e.source is not None]
        out += (
            ["Sources measured (the server's working directory and commit):", "", *sources, ""]
            if sources
            else []
        )
        out += _diff_section(comparable(entries, include_failed=include_failed))
        out += drift_markdown(comparable(entries, include_failed=include_failed))
        out += _failed_section(entries)
        out += _warning_section(entries)
    out += bisect_markdown(events)
    out += _notes_section(events)
    return mask_text("\n".join(out).rstrip() + "\n")


def _vs_base(e: HistoryEntry, base: HistoryEntry | None, d: float | None) -> str:
    """The delta, marked when the baseline ran on another host."""
    across = base is not None and other_host(base.result, e.result)
    return fmt_delta(d) + (f" (other host: {e.result.host})" if across else "")


def _diff_section(entries: list[HistoryEntry]) -> list[str]:
    out = ["## Config changes between runs", ""]
    any_diff = False
    for prev, cur in zip(entries, entries[1:], strict=False):
        lines = config_diff(prev.result, cur.result)
        if not lines:
            continue
        any_diff = True
        d = delta_pct(cur.result.headline(), prev.result.headline())
        out.append(
            f"**#{prev.id} {prev.result.profile or '?'} -> #{cur.id} {cur.result.profile or '?'}** "
            f"(tok/s {fmt(prev.result.headline())} -> {fmt(cur.result.headline())}, {fmt_delta(d)})"
        )
        out.append("")
        out += [f"- `{_cell(x)}`" for x in lines]
        differ = settings_differ(headline_of(prev.result), headline_of(cur.result))
        if differ:
            out.append(f"- not measured alike: {_cell('; '.join(differ))}")
        out.append("")
    if not any_diff:
        out += ["All runs used the same recorded config." if len(entries) > 1 else "Only one run.", ""]
    return out


def _failed_section(entries: list[HistoryEntry]) -> list[str]:
    rows = [e for e in entries if not e.result.usable()]
    if not rows:
        return []
    out = ["## Failed runs (not results: no baseline, no deltas)", ""]
    out += [
        f"- #{e.id} {e.result.profile or '?'}: {_cell(e.result.failure_reason or e.result.status)}"
        for e in rows
    ]
    return [*out, ""]


def _warning_section(entries: list[HistoryEntry]) -> list[str]:
    rows = [(e, w) for e in entries for w in e.result.warnings]
    if not rows:
        return []
    out = ["## Warnings", ""]
    out += [f"- #{e.id} {e.result.profile or '?'}: {_cell(w)}" for e, w in rows]
    return [*out, ""]


_SUMMARY_KEYS = ("text", "label", "message", "verdict", "profile", "phase", "reason", "status")


def report_title(session_name: str, events: Sequence[JournalRecord]) -> str:
    """`specdebug session NAME`; a folder named just "session" (the demo's) gets its start time
    instead, never `specdebug session session`."""
    name = session_name.strip()
    if not name or name.lower() == "session":
        start = fmt_time(events[0].ts) if events else "-"
        return f"specdebug session of {start}" if start != "-" else "specdebug session"
    return f"specdebug session {name}"


def session_markdown(
    events: Sequence[JournalRecord], session_label: str, *, include_failed: bool = False
) -> str:
    """The report of one session journal (its label: a folder or `box:NAME`): what `specdebug report`
    prints and the Bench pane's report view shows, made in one place."""
    name = session_label.rstrip("/").rsplit("/", 1)[-1]
    return render_markdown(events, title=report_title(name, events), include_failed=include_failed)


def _describe_mark(ev: MarkRecord) -> str:
    """A mark in words: its label, and where it was set (log position) when the logs pane set it."""
    label = (ev.label or "").strip()
    head = label or (f"mark {ev.n}" if ev.n is not None else "mark")
    where = []
    if ev.path:
        where.append(f"in {ev.host}:{ev.path}" if ev.host else f"in {ev.path}")
    if ev.offset is not None:
        where.append(f"at byte {ev.offset}")
    if ev.matches is not None:
        where.append(f"after {ev.matches} matches")
    if ev.origin == "cli":
        where.append("(from the command line)")
    return " ".join([head, *where])


def _notes_section(events: Sequence[JournalRecord]) -> list[str]:
    rows = []
    for ev in events:
        kind = ev.kind
        if kind == "bench_result" or kind.startswith("bisect_"):  # bisections have their section
            continue
        if isinstance(ev, MarkRecord):
            if ev.label != BASELINE_LABEL:
                rows.append(f"- {fmt_time(ev.ts)} **mark**: {_cell(_describe_mark(ev))}")
            continue
        line = ev.to_json()  # launch, verdict, stop, a note: summed up from the fields it has
        parts = [f"{k}={line[k]}" for k in _SUMMARY_KEYS if line.get(k) not in (None, "", [], {})]
        if not parts:
            rest = {k: v for k, v in line.items() if k not in ("ts", "kind")}
            parts = [json.dumps(rest, default=str)[:200]]
        rows.append(f"- {fmt_time(ev.ts)} **{kind}**: {_cell(', '.join(str(p) for p in parts))}")
    if not rows:
        return []
    return ["## Notes, marks and events", "", *rows, ""]
