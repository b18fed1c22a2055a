"""The env check as a matrix: one row per variable, one column per process (or per node's workers).

One model for every front end: the Env pane draws its cells from it (coloured, one column per
process, scrolling), and `specdebug env` prints it as plain text (a column per process on one
box, a column per node on a deployment, so 8 workers or 8 nodes fit a terminal).  The cells are the
report's own VarChecks; nothing here re-decides a verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from specdebug.core.env.model import EnvReport, ProcEnv, VarCheck

BY_NODE = "(by node)"  # the expected value where the nodes expect different ones


@dataclass(frozen=True)
class MatrixColumn:
    """One column: a process (role launcher or worker), or a node's workers grouped (role node)."""

    role: Literal["launcher", "worker", "node"]
    node: str | None  # on a deployment, whose process(es); None on one box
    procs: tuple[ProcEnv, ...]

    @property
    def proc(self) -> ProcEnv:
        """The column's (first) process: the one process of a launcher or worker column."""
        return self.procs[0]

    @property
    def key(self) -> str:
        """Unique per matrix: `p201` on one box, `node1:p201` on a deployment (PIDs repeat across
        nodes), `node:node1` for a node's grouped workers."""
        if self.role == "node":
            return f"node:{self.node}"
        return f"{self.node}:p{self.proc.pid}" if self.node else f"p{self.proc.pid}"


@dataclass(frozen=True)
class MatrixRow:
    """One variable: expected (checked on every worker) or extra (shown, not checked)."""

    name: str
    expected: str | None  # None: an extra variable (prefix-matching, not expected)


@dataclass(frozen=True)
class GroupCell:
    """What a column's processes have for one variable: each process's check (None: an extra's
    value or its absence), so a grouped column can say `3 of 8 missing` and name which."""

    checks: tuple[tuple[ProcEnv, VarCheck | None], ...]

    @property
    def statuses(self) -> Counter[str]:
        return Counter(vc.status for _, vc in self.checks if vc is not None)


@dataclass
class EnvMatrix:
    """The rows and columns of one or more reports (a deployment's: each node's, in node order)."""

    rows: list[MatrixRow] = field(default_factory=list)
    columns: list[MatrixColumn] = field(default_factory=list)

    def cell(self, row: MatrixRow, col: MatrixColumn) -> GroupCell:
        return GroupCell(tuple((p, p.vars.get(row.name)) for p in col.procs))


def env_matrix(reports: Sequence[tuple[str | None, EnvReport]], *, by_node: bool = False) -> EnvMatrix:
    """Rows: the expected variables (in the reports' order), then the extras (sorted).  Columns:
    each report's launcher then its workers; `by_node`: one column per node, its workers grouped
    (the launchers, which are no verdict's subject, left to the long form)."""
    names = dict.fromkeys(n for _, report in reports for n in report.expected)
    values = {n: {report.expected.get(n) for _, report in reports} for n in names}
    expected = {n: str(next(iter(v))) if len(v) == 1 else BY_NODE for n, v in values.items()}
    columns: list[MatrixColumn] = []
    for node, report in reports:
        if by_node:
            if report.workers:
                columns.append(MatrixColumn("node", node, tuple(report.workers)))
            continue
        if report.launcher is not None:
            columns.append(MatrixColumn("launcher", node, (report.launcher,)))
        columns += [MatrixColumn("worker", node, (w,)) for w in report.workers]
    extras = sorted({n for c in columns for p in c.procs for n in p.extra} - set(expected))
    rows = [MatrixRow(n, v) for n, v in expected.items()] + [MatrixRow(n, None) for n in extras]
    return EnvMatrix(rows=rows, columns=columns)


def short_title(proc: ProcEnv, limit: int = 18) -> str:
    """`sglang::scheduler_TP0` -> `TP0`; `VLLM::Worker_TP1` -> `Worker_TP1`; other titles: the
    first word's basename (a column's label wherever the matrix is drawn)."""
    head = proc.title.split(" ")[0] if proc.title else ""
    if "::" in head:
        head = head.split("::", 1)[1].removeprefix("scheduler_")
    head = head.rsplit("/", 1)[-1] or "?"
    return head if len(head) <= limit else head[: limit - 1] + "…"


# -- the marks every text rendering uses (the pane draws its own signs, in colour) -------------

STATUS_MARK = {"ok": "ok", "missing": "MISS", "different": "DIFF", "unverifiable": "?"}
WORST_FIRST = ("missing", "different", "unverifiable", "ok")
LEGEND_TEXT = (  # each under 100 columns
    "legend: ok in its own environ, ok* NCCL's 'set by environment' line, MISS missing,",
    "  DIFF different (listed below), ? unverifiable (?~ the launcher has it: inference),",
    "  ! set by the server itself, = has the value shown, - not set, N/M: N of M workers",
)


def mark(vc: VarCheck) -> str:
    """One process's check as a short word: status, `*` proven by NCCL's line, `!` the server's own."""
    text = STATUS_MARK[vc.status]
    if vc.status == "unverifiable" and vc.actual is not None:
        text += "~"
    if vc.source == "nccl_log":
        text += "*"
    if vc.overwritten_by_server and vc.status != "ok":
        text += "!"
    return text


def group_mark(cell: GroupCell) -> str:
    """A column's mark for an expected variable: one process's mark; a group whose processes all
    agree, that mark; else the worst status with how many of the group have it (`MISS3/8`)."""
    checks = [vc for _, vc in cell.checks if vc is not None]
    if not checks:
        return "-"
    marks = {mark(vc) for vc in checks}
    if len(marks) == 1:
        return marks.pop()
    statuses = cell.statuses
    if len(statuses) == 1:  # one status, proven in different ways: `*` only where all are NCCL's
        status = next(iter(statuses))
        text = STATUS_MARK[status]
        text += "*" if all(vc.source == "nccl_log" for vc in checks) else ""
        return text + ("!" if status != "ok" and any(vc.overwritten_by_server for vc in checks) else "")
    worst = next(s for s in WORST_FIRST if statuses.get(s))
    return f"{STATUS_MARK[worst]}{statuses[worst]}/{len(checks)}"
