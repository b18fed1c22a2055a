"""`specdebug env`'s text: one report, the variables x workers matrix, a deployment's nodes.

Apart from verbs/env.py (the verb: its arguments, the check): the env model and its matrix are
imported here, when a report is printed, not when the verb's arguments are read (a cold `env`
starts its connection right after that, beside these imports; issue 43).
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import TYPE_CHECKING, Any

from specdebug.core.env.matrix import (
    LEGEND_TEXT,
    EnvMatrix,
    MatrixColumn,
    MatrixRow,
    env_matrix,
    group_mark,
    short_title,
)
from specdebug.core.env.model import (
    BOX_WIDE_VERDICT,
    EnvReport,
    ProcEnv,
    VarCheck,
)
from specdebug.core.env.probe import NOT_RUNNING_HINT
from specdebug.core.sanitize import visible
from specdebug.verbs.common import (
    VerbExit,
    err,
    out,
    print_json,
)

if TYPE_CHECKING:
    from specdebug.core.deployment.nccl import TransportProof
    from specdebug.core.deployment.node_env import NodeEnv
    from specdebug.core.target import Target


def _v(value: str | None) -> str:
    """A value from the box on one line: controls (and newlines) shown, never emitted."""
    return visible(str(value)) if value is not None else "None"


def _cell(vc: VarCheck) -> str:
    actual, expected = _v(vc.actual), _v(vc.expected)
    if vc.status == "ok":
        text = f"ok          {actual}"
    elif vc.status == "missing":
        text = f"missing     (expected {expected})"
    elif vc.status == "different":
        text = f"different   {actual} (expected {expected})"
    else:
        text = "unverifiable" + (f" (launcher has {actual})" if vc.actual is not None else "")
    if vc.source != "environ":
        text += f"  [{vc.source}]"
    if vc.overwritten_by_server:
        text += "  [overwritten by server]"
    return text


def _proc_block(role: str, proc: ProcEnv) -> list[str]:
    state = proc.environ_state + (
        f" {proc.environ_error}" if proc.environ_error and proc.environ_state != "clobbered" else ""
    )
    lines = [f"{role:<8} pid {proc.pid:<7} {_v(proc.user or '?'):<10} {_v(state):<12} {_v(proc.title[:100])}"]
    width = max((len(n) for n in [*proc.vars, *proc.extra]), default=0)
    for name, vc in proc.vars.items():
        lines.append(f"  {_v(name):<{width}}  {_cell(vc)}")
    for name, value in proc.extra.items():
        lines.append(f"  {_v(name):<{width}}  (extra)     {_v(value)}")
    return lines


def format_report(report: EnvReport, host: str, *, long: bool = False) -> str:
    """Plain text for a terminal: the matrix (variables x processes; `long`: one block per
    process and every evidence line), then the verdict."""
    lines = _report_head(report, host)
    if not long:
        lines += format_matrix(env_matrix([(None, report)]))
        lines += _evidence_line(report)
        return "\n".join(lines + _verdict_lines(report))
    if report.launcher is not None:
        lines += _proc_block("launcher", report.launcher)
    for w in report.workers:
        lines += _proc_block("worker", w)
    if report.evidence:
        lines += ["", "evidence:"]
        for e in report.evidence:
            where = f"pid {e.pid}" + (f" [{e.rank}]" if e.rank is not None else "")
            lines.append(
                f"  {e.source:<8} {where:<14} {_v(e.name)}={_v(e.value)}"
                + (f"   {_v(e.line)}" if e.line else "")
            )
    return "\n".join(lines + _verdict_lines(report))


def _report_head(report: EnvReport, host: str) -> list[str]:
    s = report.summary
    where = f"box-wide look on {host}" if report.box_wide else f"workers on {host}"
    return [
        f"{where}: {_v(report.selection)} ({s.workers} found)",
        f"expected: {len(report.expected)} variables from {report.expected_source or '-'}",
        f"how: {s.method}",
        "",
    ]


def _verdict_lines(report: EnvReport) -> list[str]:
    s = report.summary
    if report.box_wide:  # never a verdict: these are not (only) the profile's server's processes
        return ["", f"{s.verdict}: {s.workers} processes, not this profile's server (no verdict)"]
    counts = ", ".join(f"{n} {k}" for k, n in s.counts.items() if n)
    return ["", f"verdict: {s.verdict}" + (f" ({counts})" if counts else "")]


def _evidence_line(report: EnvReport) -> list[str]:
    """The evidence counted in one line (the matrix marks what it proved; --long lists it)."""
    nccl = [e for e in report.evidence if e.source == "nccl_log"]
    launcher = [e for e in report.evidence if e.source == "launcher"]
    if not nccl and not launcher:
        return []
    parts = []
    if nccl:
        parts.append(f"{len(nccl)} NCCL 'set by environment' lines ({len({e.pid for e in nccl})} processes)")
    if launcher:
        parts.append(f"{len(launcher)} launcher values (inference)")
    return [f"evidence: {', '.join(parts)}; --long lists them"]


# -- the matrix as text ------------------------------------------------------------------------

VALUE_WIDTH = 18  # the expected/value column; a longer value is a [n] note, printed once below
CELL_VALUE_WIDTH = 8  # an extra's own value in a cell
ENVIRON_MARK = {"readable": "read", "clobbered": "clob", "denied": "denied", "gone": "gone"}
ENVIRON_WORST = ("gone", "denied", "clobbered", "readable")
LABELS_SHOWN = 12


class _Notes:
    """Long values printed once below the matrix, each under a number the cells show as [n]."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def fit(self, value: str, width: int) -> str:
        text = _v(value)
        if len(text) <= width:
            return text
        number = self.values.setdefault(text, len(self.values) + 1)
        return f"[{number}]"

    def lines(self) -> list[str]:
        return [f"  [{n}] {text}" for text, n in self.values.items()]


def _label(col: MatrixColumn, multi_node: bool) -> tuple[str, str]:
    """A column's two header lines: who (launcher, TP0, a node) and its PID (or worker count)."""
    if col.role == "node":
        return _v(col.node or "?")[:12], f"{len(col.procs)} wkrs"
    who = "launcher" if col.role == "launcher" else _v(short_title(col.proc, 10))
    return (f"{col.node}:{who}" if multi_node and col.node else who), str(col.proc.pid)


def _environ_mark(col: MatrixColumn) -> str:
    states = [p.environ_state for p in col.procs]
    if len(set(states)) == 1:
        return ENVIRON_MARK[states[0]]
    worst = next(s for s in ENVIRON_WORST if s in states)
    return f"{ENVIRON_MARK[worst]}{states.count(worst)}/{len(states)}"


def _extra_cells(matrix: EnvMatrix, row: MatrixRow, notes: _Notes) -> tuple[str, list[str]]:
    """An extra variable: the value most holders share in the value column, each cell `=` (has
    it), `-` (not set), `?` (environ unreadable) or its own value."""
    held = Counter(p.extra[row.name] for c in matrix.columns for p in c.procs if row.name in p.extra)
    common = held.most_common(1)[0][0] if held else ""

    def one(p: ProcEnv) -> str:
        if row.name in p.extra:
            return "=" if p.extra[row.name] == common else notes.fit(p.extra[row.name], CELL_VALUE_WIDTH)
        return "-" if p.environ_state == "readable" else "?"

    cells = []
    for col in matrix.columns:
        marks = [one(p) for p in col.procs]
        if len(set(marks)) == 1:
            cells.append(marks[0])
            continue
        odd = [m for m in marks if m != "="]  # a grouped column: how many lack the shared value
        cells.append(f"{odd[0]}{marks.count(odd[0])}/{len(marks)}")
    return notes.fit(common, VALUE_WIDTH), cells


def format_matrix(matrix: EnvMatrix) -> list[str]:
    """The matrix (core.env.matrix, the Env pane's model) as text: a row per variable, a column
    per process (or per node), marks with a legend, every different value and long value once
    below.  8 workers and 10 variables fit in about 100 columns."""
    if not matrix.columns:
        return ["(no processes to show)"]
    multi_node = len({c.node for c in matrix.columns}) > 1
    notes = _Notes()
    heads = [_label(c, multi_node) for c in matrix.columns]
    table: list[tuple[str, str, list[str]]] = [
        ("variable", "expected", [h[0] for h in heads]),
        ("", "", [h[1] for h in heads]),
        ("environ", "", [_environ_mark(c) for c in matrix.columns]),
    ]
    for row in matrix.rows:
        if row.expected is None:
            value, cells = _extra_cells(matrix, row, notes)
            table.append((_v(row.name), f"{value} (extra)" if value else "(extra)", cells))
            continue
        cells = [group_mark(matrix.cell(row, c)) for c in matrix.columns]
        table.append((_v(row.name), notes.fit(row.expected, VALUE_WIDTH), cells))
    name_w = max(len(r[0]) for r in table)
    value_w = max(len(r[1]) for r in table)
    widths = [max(len(r[2][i]) for r in table) for i in range(len(matrix.columns))]
    lines = [
        (
            f"{name:<{name_w}}  {value:<{value_w}}  "
            + " ".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True))
        ).rstrip()
        for name, value, cells in table
    ]
    lines += ["", *LEGEND_TEXT]
    lines += _differences(matrix, multi_node)
    if notes.values:
        lines += ["values:", *notes.lines()]
    return lines


def _differences(matrix: EnvMatrix, multi_node: bool) -> list[str]:
    """Every variable a worker has otherwise than expected: each value once, with the processes
    that have it (`every worker` when all have it); and, in grouped (node) columns, which workers
    of the node are not ok."""
    workers = sum(len(c.procs) for c in matrix.columns if c.role != "launcher")
    lines: list[str] = []
    for row in matrix.rows:
        if row.expected is None:
            continue
        by_value: dict[tuple[str, str], list[tuple[MatrixColumn, ProcEnv]]] = {}
        for col in matrix.columns:
            for proc, vc in matrix.cell(row, col).checks:
                if vc is None or vc.status == "ok":
                    continue
                if vc.status == "different":
                    flags = (f" [{vc.source}]" if vc.source != "environ" else "") + (
                        " [set by the server itself]" if vc.overwritten_by_server else ""
                    )
                    by_value.setdefault((f"has {_v(vc.actual)}", flags), []).append((col, proc))
                elif col.role == "node":  # a grouped column's mark does not say which workers
                    by_value.setdefault((vc.status, ""), []).append((col, proc))
        for (what, flags), whom in by_value.items():
            on_workers = [(c, p) for c, p in whom if c.role != "launcher"]
            launcher = len(on_workers) < len(whom)
            if workers > 1 and len(on_workers) == workers:
                shown = f"every worker ({workers})" + (" and the launcher" if launcher else "")
            else:
                shown = " ".join(_who(c, p, multi_node) for c, p in whom[:LABELS_SHOWN])
                shown += f" and {len(whom) - LABELS_SHOWN} more" if len(whom) > LABELS_SHOWN else ""
            head = f"  {_v(row.name)} (expected {_v(row.expected)}): {what}{flags} on "
            lines += _wrapped(head, shown.split(" "))
    return ["not as expected:", *lines] if lines else []


def _wrapped(head: str, words: list[str], width: int = 100) -> list[str]:
    """`head` then the words, continued on indented lines so no line passes `width`."""
    lines, line = [], head.rstrip(" ")
    for word in words:
        if len(line) + 1 + len(word) > width and line.strip():
            lines.append(line)
            line = "      " + word
        else:
            line += " " + word
    return [*lines, line]


def _who(col: MatrixColumn, proc: ProcEnv, multi_node: bool) -> str:
    who = "launcher" if col.role == "launcher" else _v(short_title(proc))
    who = f"{who}({proc.pid})"
    return f"{col.node}:{who}" if multi_node and col.node else who


def nodes_report(
    args: argparse.Namespace, target: Target, envs: list[NodeEnv], proof: TransportProof | None
) -> int:
    """A deployment's check: a block per node, the transport proof; JSON `nodes` and `transport`."""
    profile = target.profile
    rows: list[dict[str, Any]] = []
    code = 0
    for g in envs:
        row: dict[str, Any] = {
            "host": g.node.host,
            "rank": g.node.rank,
            "running": g.running,
            "problem": g.problem,
        }
        if g.report is not None:
            row.update(g.report.model_dump(mode="json"))
            code = max(code, g.report.summary.exit_code)
        else:
            code = max(code, 1)
        rows.append(row)
    if proof is not None and proof.failures:
        code = max(code, 1)
    running = any(g.running for g in envs)
    if args.json:
        print_json(
            {
                "profile": profile.name,
                "exit_code": code,
                "running": running,
                "box_wide": bool(args.all_matching),
                "nodes": rows,
                "transport": proof.model_dump(mode="json") if proof is not None else None,
            }
        )
    elif running and args.long:
        for g in envs:
            out(f"== node {g.node.rank} {g.node.host}")
            out(format_report(g.report, g.node.host, long=True) if g.report is not None else f"  {g.problem}")
            out()
        if proof is not None:
            out(format_transport(proof))
    elif running:
        out(format_nodes(envs, proof, code))
    if not running:
        err(f"env: {profile.name} is not running on any of its {len(envs)} nodes")
    for g in envs:
        if g.problem:
            err(f"env: {g.node.host}: {g.problem}")
        for reason in g.report.summary.reasons if g.report is not None else []:
            err(f"env: {g.node.host}: {reason}")
    for failure in proof.failures if proof is not None else []:
        err(f"env: transport: {failure}")
    if not running:
        err(f"hint: {NOT_RUNNING_HINT}")
    if code == 2:
        raise VerbExit(2)
    return code


def format_nodes(envs: list[NodeEnv], proof: TransportProof | None, code: int) -> str:
    """A deployment's check as text: a line per node, one matrix with a column per node (its
    workers grouped), the transport proof, the verdict."""
    lines = []
    for g in envs:
        head = f"node {g.node.rank} {_v(g.node.host)}: "
        if g.report is None:
            lines.append(head + _v(g.problem or "no report"))
            continue
        s = g.report.summary
        lines += _wrapped(head + f"{s.verdict}, {s.workers} workers; how:", s.method.split(" "))
    reports = [(g.node.host, g.report) for g in envs if g.report is not None]
    lines += ["", *format_matrix(env_matrix(reports, by_node=True))]
    if proof is not None:
        lines += ["", format_transport(proof)]
    box_wide = bool(reports) and all(r.box_wide for _, r in reports)
    lines += [
        "",
        f"{BOX_WIDE_VERDICT}: no verdict" if box_wide else f"verdict: {'OK' if code == 0 else 'FAILED'}",
    ]
    return "\n".join(lines)


def format_transport(proof: TransportProof) -> str:
    lines = [f"transport: {proof.verdict} ({visible(proof.reason)})  [{proof.source}]"]
    for e in proof.edges[:40]:
        where = f"{e.src_node or '?'} -> {e.dst_node or '?'}"
        lines.append(
            f"  {e.node} pid {e.pid}: {e.src}->{e.dst} ({where}) {e.direction or ''} via {visible(e.via)}"
        )
    if len(proof.edges) > 40:
        lines.append(f"  ... {len(proof.edges) - 40} more edges (--json has them all)")
    for node, counts in proof.intra_node.items():
        lines.append(
            f"  intra-node on {visible(node)}: " + ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
        )
    if proof.expected is not None:
        verdict = "FAILED" if proof.failures else "met"
        lines.append(f"  expected (profile [deployment] expect_transport): {proof.expected}: {verdict}")
        lines += [f"  expectation failed: {visible(f)}" for f in proof.failures]
    lines += [f"  finding: {visible(f)}" for f in proof.findings]
    if proof.hint:
        lines.append(f"  to prove it: {proof.hint}")
    return "\n".join(lines)
