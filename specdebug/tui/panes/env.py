"""Env pane: a matrix of variables x processes (launcher column beside the workers'), coloured by
status, with the evidence behind it and a diff of two chosen processes.

The check itself is `specdebug.core.env.probe.env_events`, the same stream the `env` verb reads; this
pane shows its progress and renders the report.  Every value shown comes from the box, so every cell is plain
`Text` with a style, never markup.

The check acts on the profile's target (`ctx.target()`).  One node is the one-box screen.  On a
deployment every node's workers are columns (a node row says whose): the check is
`core.deployment.node_env.target_env` (each node's env check with its node profile, and its NCCL
lines of this run), the same calls as `specdebug env -c PROFILE --json` (`nodes`, `transport`), and
the verdict says per node, then the transport (`ib-gdrdma`, `ib`, `socket`, `unproven` with how to
make the lines exist) and its findings.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from specdebug.core.control.events import ServerState
from specdebug.core.control.records import ServerRecord
from specdebug.core.deployment import Node
from specdebug.core.deployment.nccl import TransportProof
from specdebug.core.deployment.node_env import NodeEnv, target_env
from specdebug.core.env.events import EnvDone, EnvEvent, EnvProcessesFound
from specdebug.core.env.matrix import env_matrix
from specdebug.core.env.model import BOX_WIDE_VERDICT, DEFAULT_PREFIXES, EnvQuery, EnvReport, ProcEnv
from specdebug.core.env.probe import env_events
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.engines import worker_match
from specdebug.remote.api import Remote, RemoteError
from specdebug.remote.reconnect import across_drops
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.panes.env_view import (
    ENVIRON_STYLE,
    LEGEND,
    clip,
    short_title,
    tui_warnings,
    var_cell,
)
from specdebug.tui.stacks_action import open_stacks
from specdebug.tui.views_action import open_drift
from specdebug.tui.widgets.measured_table import MeasuredTable
from specdebug.tui.widgets.steady import Steady

__all__ = ["EnvPane", "short_title", "tui_warnings", "var_cell"]

DEFAULT_MATCH = worker_match()  # every engine's worker titles
CONNECT_WAIT_S = 30.0
TRANSPORT_STYLE = {"ib-gdrdma": "bold green", "ib": "green", "socket": "bold yellow", "unproven": "magenta"}
FINDINGS_SHOWN = 2


Column = tuple[str | None, int]  # a process column: (its node on a deployment, else None; its PID)


class EnvPane(Pane):
    PANE_ID = "env"
    TITLE = "Env"
    BINDINGS = [
        Binding("r", "refresh", "Refresh", id="env.refresh"),
        Binding("m", "mark", "Mark for diff", id="env.mark"),
        Binding("k", "stacks", "Stack of this worker", id="env.stacks", show=False),  # `specdebug stacks`
        # `env --all-matching`: every matching process on the box, labelled, never a verdict
        Binding("a", "all_matching", "Box-wide look", id="env.all_matching", show=False),
        Binding("escape", "clear_marks", "Clear diff", id="env.clear_diff", show=False),
        # `specdebug drift`: the box as the server sees it, beyond the profile's knobs
        Binding("d", "drift", "Drift snapshot", id="env.drift", show=False),
    ]
    IN_TURN_ACTIONS = frozenset({"mark", "stacks"})  # the highlighted process column
    DEFAULT_CSS = """
    EnvPane { layout: vertical; }
    EnvPane #env-how { height: auto; color: $text-muted; }
    EnvPane #env-verdict { height: auto; max-height: 6; }
    EnvPane.-nodes #env-verdict { max-height: 9; }
    EnvPane #env-matrix { height: 1fr; }
    EnvPane #env-legend { height: 1; }
    EnvPane #env-diff-title { height: 1; margin-top: 1; color: $text-muted; }
    EnvPane #env-diff { height: auto; max-height: 12; }
    EnvPane #env-evidence-title { height: 1; margin-top: 1; color: $text-muted; }
    EnvPane #env-evidence { height: auto; max-height: 10; }
    EnvPane.-nodes #env-how { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    EnvPane.-nodes.-narrow #env-verdict { max-height: 6; text-wrap: nowrap; text-overflow: ellipsis; }
    EnvPane.-nodes.-narrow #env-evidence-title, EnvPane.-nodes.-narrow #env-evidence { display: none; }
    """

    class ReportReady(Message):
        def __init__(self, report: EnvReport) -> None:
            super().__init__()
            self.report = report

    class NodesReady(Message):
        def __init__(
            self, envs: list[NodeEnv], proof: TransportProof | None, per_node: bool = True, quiet: bool = True
        ) -> None:
            super().__init__()
            self.envs, self.proof, self.per_node, self.quiet = envs, proof, per_node, quiet

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(ctx, **kwargs)
        self.report: EnvReport | None = None  # one box's (on a deployment: the leader's)
        self.reports: list[tuple[str | None, EnvReport]] = []  # (node, its report); one box: (None, it)
        self.marked: list[Column] = []
        self._columns: list[Column] = []  # each process column, in order
        self.node_envs: list[NodeEnv] = []  # a deployment's node checks ...
        self.transport: TransportProof | None = None  # ... and its NCCL transport proof

    def compose(self) -> ComposeResult:
        yield Steady(Text("press r to check the workers' environment"), id="env-how")
        yield Steady(Text(""), id="env-verdict")
        # the variable (and expected) columns stay put while the process columns scroll
        yield MeasuredTable(id="env-matrix", cursor_type="cell", zebra_stripes=True, fixed_columns=2)
        legend = Text()
        for i, (label, style) in enumerate(LEGEND):
            legend.append(("  " if i else "") + label, style=style)
        yield Static(legend, id="env-legend")
        yield Steady(Text("diff: mark two process columns with m"), id="env-diff-title")
        yield MeasuredTable(id="env-diff", cursor_type="row", show_cursor=False)
        yield Steady(Text("evidence"), id="env-evidence-title")
        yield MeasuredTable(id="env-evidence", cursor_type="row", show_cursor=False)

    def on_mount(self) -> None:
        diff = self.query_one("#env-diff", DataTable)
        for label in ("variable", "a", "b"):
            diff.add_column(label, key=label)
        ev = self.query_one("#env-evidence", DataTable)
        for label in ("source", "pid", "rank", "variable", "value", "line"):
            ev.add_column(label, key=label)
        if self.ctx.remote() is not None:
            self.run_check(
                quiet=True
            )  # first answer without a keystroke; a down host is the hosts pane's news

    def profile_changed(self, profile: Profile) -> None:
        """Another profile was picked: what is shown belonged to the old server."""
        self.clear_report()
        self._recheck()

    def server_state_changed(self, state: ServerState, record: ServerRecord | None) -> None:
        """A server became ready (or went away): recheck without a keystroke."""
        if state in (ServerState.READY, ServerState.STOPPED, ServerState.EXITED):
            self._recheck()

    def _recheck(self) -> None:
        if self.ctx.remote() is not None:
            name = self.ctx.profile.name if self.ctx.profile is not None else None
            self.query_one("#env-how", Static).update(
                Text(f"checking the workers of {name}…" if name else "checking…", style="dim")
            )
            self.run_check(quiet=True)

    def clear_report(self) -> None:
        """Forget the shown report (it described another profile's server)."""
        self.workers.cancel_group(self, "env-check")
        self.report, self.reports = None, []
        self.marked = []
        self._columns = []
        self.clear_nodes()
        self.query_one("#env-verdict", Static).update(Text(""))
        self.query_one("#env-matrix", DataTable).clear(columns=True)
        self.query_one("#env-diff", DataTable).clear()
        self.query_one("#env-evidence", DataTable).clear()
        self.query_one("#env-diff-title", Static).update(Text("diff: mark two process columns with m"))
        self.query_one("#env-evidence-title", Static).update(Text("evidence"))

    # -- actions ---------------------------------------------------------------------------

    def action_refresh(self, all_matching: bool = False) -> None:
        remote = self.ctx.remote()
        if remote is None:
            self.notify("no host selected", severity="warning")
            return
        look = "box-wide look on" if all_matching else "checking"
        self.query_one("#env-how", Static).update(Text(f"{look} {remote.name}…", style="dim"))
        self.run_check(all_matching=all_matching)

    def action_all_matching(self) -> None:
        """Every process on the box matching the profile's [workers] match (or every engine's worker
        titles), whoever runs it: asked for, labelled, never a verdict about the profile's server."""
        self.action_refresh(all_matching=True)

    @work(exclusive=True, group="env-check", exit_on_error=False)
    async def run_check(self, quiet: bool = False, all_matching: bool = False) -> None:
        """The profile's target checked (`target_env`, as the `env` verb: a deployment's every node
        and the transport); without a profile, what runs on the selected host, labelled as such."""
        target = self.ctx.target()
        if target is None:
            return await self.check_box(quiet)
        per_node = target.multi  # a deployment: a line per node and the transport proof
        if per_node:
            count, name = len(target.nodes), target.profile.name
            self.query_one("#env-how", Static).update(
                Text(f"checking the workers on {count} nodes of {name}…", style="dim")
            )
        if target.unreachable:
            return self.check_failed(f"no connection to {', '.join(target.unreachable)} here", quiet)
        remotes = [target.remote(node) for node in target.nodes]

        async def check() -> tuple[list[NodeEnv], TransportProof | None]:
            for remote in remotes:
                await remote.wait_connected(CONNECT_WAIT_S)
            return await target_env(
                target, all_matching=all_matching, on_event=None if per_node else self._progress
            )

        try:  # a check a dropped link broke is made again on the new link (remote/reconnect.py)
            envs, proof = await across_drops(remotes, check, timeout=CONNECT_WAIT_S, on_drop=self._dropped)
        except (RemoteError, LookupError, OSError, TimeoutError) as exc:
            self.check_failed(exc, quiet)
            return
        self.post_message(self.NodesReady(envs, proof, per_node, quiet))

    def _progress(self, node: Node, ev: EnvEvent) -> None:
        if isinstance(ev, EnvProcessesFound):
            self.query_one("#env-how", Static).update(Text(ev.describe(), style="dim"))

    async def check_box(self, quiet: bool) -> None:
        """No server named: every engine's workers on the selected host (a box-wide look, no verdict)."""
        remote = self.ctx.remote()
        if remote is None:
            return
        query = EnvQuery(
            match=DEFAULT_MATCH, prefixes=list(DEFAULT_PREFIXES), expect_from_launcher=True, box_wide=True
        )

        async def look() -> EnvReport | None:
            await remote.wait_connected(CONNECT_WAIT_S)
            report = None
            async for ev in env_events(remote, query):
                if isinstance(ev, EnvProcessesFound):
                    self.query_one("#env-how", Static).update(Text(ev.describe(), style="dim"))
                elif isinstance(ev, EnvDone):
                    report = ev.report
            return report

        try:
            report = await across_drops([remote], look, timeout=CONNECT_WAIT_S, on_drop=self._dropped)
        except (RemoteError, LookupError, OSError, TimeoutError) as exc:
            self.check_failed(exc, quiet)
            return
        if report is not None:
            self.post_message(self.ReportReady(report))

    def _dropped(self, exc: Exception) -> None:
        self.query_one("#env-how", Static).update(
            Text(
                f"the connection dropped during the check ({exc}): checking again once it is back",
                style="yellow",
            )
        )

    def check_failed(self, why: Exception | str, quiet: bool) -> None:
        if not quiet:
            self.notify(f"env check failed: {why}", severity="error")
        self.query_one("#env-how", Static).update(Text(f"env check failed: {why}", style="red"))

    @on(ReportReady)
    def _report_ready(self, event: ReportReady) -> None:
        self.show_report(event.report)

    @on(NodesReady)
    def _nodes_ready(self, event: NodesReady) -> None:
        """A deployment's check: a line per node and the transport; one node's: its report, or that
        its server is not running (nothing of any other process)."""
        if event.per_node:
            return self.show_nodes(event.envs, event.proof)
        got = event.envs[0]
        if got.report is None:
            return self.show_not_running(got.problem or "not running", event.quiet)
        self.show_report(got.report)

    def action_mark(self) -> None:
        table = self.query_one("#env-matrix", DataTable)
        col = table.cursor_coordinate.column - 2  # after the variable and expected columns
        if not 0 <= col < len(self._columns):
            self.notify("move to a process column to mark it", severity="warning")
            return
        self.mark(self._columns[col])

    def action_stacks(self) -> None:
        """py-spy the worker of the highlighted process column (tui.stacks_action), on its node."""
        col = self.query_one("#env-matrix", DataTable).cursor_coordinate.column - 2
        node, pid = self._columns[col] if 0 <= col < len(self._columns) else (None, 0)
        remote, profile = self.where_runs(node)
        if not pid or remote is None or profile is None:
            self.notify(
                "move to a worker's column (with a host and a profile) to see its stack", severity="warning"
            )
            return
        self.run_worker(open_stacks(self.app, remote, profile, [pid]), group="env-stacks", exclusive=True)

    def action_drift(self) -> None:
        """The drift snapshot of the selected host (on a deployment: that node's profile), as `drift`."""
        remote, profile = self.where_runs(self.ctx.selected)  # one box: its one node is the selected host
        if remote is None or profile is None:
            self.notify("choose a host and a profile first (P picks a profile)", severity="warning")
            return
        self.run_worker(open_drift(self.app, remote, profile), group="env-drift", exclusive=True)

    def where_runs(self, node: str | None) -> tuple[Remote | None, Profile | None]:
        """Where a column's process runs: its node's connection and node profile (one box: the
        target's one node; no profile: the selected host)."""
        target = self.ctx.target()
        placed = target.node(node or target.leader.host) if target is not None else None
        if target is None or placed is None:
            return self.ctx.remote(), self.ctx.profile
        return target.remotes.get(placed.host), placed.profile

    def action_clear_marks(self) -> None:
        self.marked.clear()
        self._render_diff()

    # -- rendering (also called directly by tests) -------------------------------------------

    def mark(self, pid: int | Column) -> None:
        """Choose a process for the diff; the two most recent choices are compared."""
        key = pid if isinstance(pid, tuple) else (None, pid)
        if key in self.marked:
            self.marked.remove(key)
        else:
            self.marked = (self.marked + [key])[-2:]
        self._render_diff()

    def _procs(self) -> list[tuple[str, ProcEnv, str | None]]:
        out: list[tuple[str, ProcEnv, str | None]] = []
        for node, report in self.reports:
            out += [("launcher", report.launcher, node)] if report.launcher else []
            out += [("worker", w, node) for w in report.workers]
        return out

    def _proc(self, key: Column) -> ProcEnv | None:
        return next((p for _, p, n in self._procs() if (n, p.pid) == key), None)

    def show_not_running(self, message: str, quiet: bool = True) -> None:
        """The profile's server is not running: nothing shown of any other process (issue 38)."""
        self.report, self.reports, self.marked, self._columns = None, [], [], []
        self.clear_nodes()
        self.query_one("#env-matrix", DataTable).clear(columns=True)
        self.query_one("#env-diff", DataTable).clear()
        self.query_one("#env-evidence", DataTable).clear()
        self.query_one("#env-how", Static).update(Text(visible(message), style="yellow"))
        verdict = Text("not running", style="bold yellow")
        verdict.append(
            "\npress a for a box-wide look (every matching process, not this profile's server)", style="dim"
        )
        self.query_one("#env-verdict", Static).update(verdict)
        if not quiet:
            self.notify(visible(message), severity="warning")

    def show_report(self, report: EnvReport, node: str | None = None) -> None:
        self.report = report
        self.reports = [(node, report)] if node is None else self.reports
        s = report.summary
        how = Text(f"{node}: " if node else "", style="dim")
        how.append(f"{report.selection}; ", style="dim")
        how.append(s.method, style="dim")
        if report.expected:
            how.append(f"; expected from {report.expected_source}", style="dim")
        self.query_one("#env-how", Static).update(how)
        style = "bold yellow" if s.ok is None else "bold green" if s.ok else "bold red"
        verdict = Text(s.verdict, style=style)
        if report.box_wide:
            verdict.append(f"  {s.workers} processes, not this profile's server (no verdict)")
        counts = ", ".join(f"{n} {k}" for k, n in s.counts.items() if n)
        if counts:
            verdict.append(f"  {counts}")
        for line in s.reasons[:4]:
            verdict.append("\n" + line, style="red")
        if len(s.reasons) > 4:
            verdict.append(f"\n… {len(s.reasons) - 4} more", style="red")
        for line in tui_warnings(report)[:2]:
            verdict.append("\n" + line, style="yellow")
        self.query_one("#env-verdict", Static).update(verdict if node is None else self.nodes_verdict())
        self._render_matrix()
        self.marked = [key for key in self.marked if self._proc(key) is not None]
        self._render_diff()
        self._render_evidence()

    def clear_nodes(self) -> None:
        self.node_envs, self.transport = [], None
        self.set_class(False, "-nodes")

    def show_nodes(self, envs: list[NodeEnv], proof: TransportProof | None) -> None:
        """Draw a deployment's check (tests call it with fed reports)."""
        self.node_envs, self.transport = list(envs), proof
        self.set_class(True, "-nodes")  # a line per node and the transport: a taller verdict
        self.reports = [(e.node.host, e.report) for e in envs if e.report is not None]
        first = next(((h, r) for h, r in self.reports), None)
        if first is None:
            self.query_one("#env-verdict", Static).update(self.nodes_verdict())
            return
        self.show_report(first[1], node=first[0])

    def nodes_verdict(self) -> Text:
        """OK only when every node's workers are and the transport meets the deployment's
        expectation; `not running` when no node runs the server; a box-wide look gives no verdict.
        One line per node; then the transport proof."""
        envs = self.node_envs
        if envs and not any(e.running for e in envs):
            text = Text("not running", style="bold yellow")
            text.append(f"  on any of {len(envs)} nodes; press a for a box-wide look", style="dim")
        elif envs and all(e.report is not None and e.report.box_wide for e in envs):
            text = Text(BOX_WIDE_VERDICT, style="bold yellow")
            text.append(f"  {len(envs)} nodes, not this profile's server (no verdict)")
        else:
            ok = (
                bool(envs)
                and all(e.report is not None and e.report.summary.ok and not e.problem for e in envs)
                and not (self.transport is not None and self.transport.failures)
            )
            text = Text("OK" if ok else "FAILED", style="bold green" if ok else "bold red")
            text.append(f"  {len(envs)} nodes")
        for e in envs:
            text.append(f"\n{visible(e.node.host)}: ", style="bold")
            if e.report is None:
                text.append(visible(e.problem or "no report"), style="yellow" if not e.running else "red")
                continue
            s = e.report.summary
            text.append(s.verdict, style="yellow" if s.ok is None else "green" if s.ok else "bold red")
            text.append(f", {len(e.report.workers)} workers")
            if s.reasons:
                text.append(f": {visible(s.reasons[0])}", style="red")
            if e.problem:
                text.append(f" ({visible(e.problem)})", style="yellow")
        if self.transport is not None:
            text.append("\n")
            text.append_text(transport_text(self.transport))
        return text

    def _render_matrix(self) -> None:
        """The core's matrix (core.env.matrix, the one `specdebug env` prints), one column per
        process, each cell drawn in colour."""
        table = self.query_one("#env-matrix", DataTable)
        table.clear(columns=True)
        assert self.report is not None
        matrix = env_matrix(self.reports)
        self._columns = [(c.node, c.proc.pid) for c in matrix.columns]
        table.add_column("variable", key="var")
        table.add_column("expected", key="expected")
        for col in matrix.columns:
            launcher = col.role == "launcher"
            label = Text(
                f"{'launcher' if launcher else short_title(col.proc)} {col.proc.pid}",
                style="bold" if launcher else "",
            )
            table.add_column(label, key=col.key)
        if self.node_envs:  # the node column of every process, first
            row = [Text("node", style="italic"), Text("")]
            table.add_row(
                *row,
                *(Text(visible(c.node or ""), style="bold cyan") for c in matrix.columns),
                key="__node__",
            )
        row = [Text("environ", style="italic"), Text("")]
        for col in matrix.columns:
            row.append(Text(col.proc.environ_state, style=ENVIRON_STYLE[col.proc.environ_state]))
        table.add_row(*row, key="__environ__")
        for var in matrix.rows:
            row = [
                Text(var.name),
                Text(clip(var.expected), style="bold")
                if var.expected is not None
                else Text("-", style="dim"),
            ]
            row += [var_cell(col.proc, var.name) for col in matrix.columns]
            table.add_row(*row, key=var.name)

    def expected_by_name(self) -> dict[str, str]:
        """The expected column: each variable's expected value (`by node` where the nodes differ)."""
        return {r.name: r.expected for r in env_matrix(self.reports).rows if r.expected is not None}

    def diff_rows(self, a: int | Column, b: int | Column) -> list[tuple[str, str | None, str | None]]:
        """Variables whose visible (masked) values differ between two processes."""
        ka, kb = (k if isinstance(k, tuple) else (None, k) for k in (a, b))
        reports = dict(self.reports)
        ea, eb = (reports[k[0]].env_of(k[1]) if k[0] in reports else {} for k in (ka, kb))
        names = sorted(set(ea) | set(eb))
        return [(n, ea.get(n), eb.get(n)) for n in names if ea.get(n) != eb.get(n)]

    def _render_diff(self) -> None:
        title = self.query_one("#env-diff-title", Static)
        table = self.query_one("#env-diff", DataTable)
        table.clear()
        if self.report is None or len(self.marked) < 2:
            chosen = ", ".join(str(p) for _, p in self.marked)
            title.update(
                Text("diff: mark two process columns with m" + (f" (marked {chosen})" if chosen else ""))
            )
            return
        a, b = self.marked
        pa, pb = self._proc(a), self._proc(b)
        assert pa is not None and pb is not None  # show_report keeps only marks it has
        rows = self.diff_rows(a, b)
        on = [f"{k[0]} " if k[0] else "" for k in (a, b)]
        head = Text(f"diff {on[0]}{short_title(pa)} {a[1]} vs {on[1]}{short_title(pb)} {b[1]}: ")
        head.append(f"{len(rows)} differing" if rows else "same visible env", style="bold")
        unreadable = [p.pid for p in (pa, pb) if p.environ_state != "readable"]
        if unreadable:
            head.append(f" (environ not readable for pid {', '.join(map(str, unreadable))})", style="yellow")
        title.update(head)
        for name, va, vb in rows:
            table.add_row(
                Text(name),
                Text(clip(va, 60)) if va is not None else Text("(unset)", style="dim"),
                Text(clip(vb, 60)) if vb is not None else Text("(unset)", style="dim"),
            )

    def _render_evidence(self) -> None:
        table = self.query_one("#env-evidence", DataTable)
        title = self.query_one("#env-evidence-title", Static)
        table.clear()
        evidence = [(node, e) for node, report in self.reports for e in report.evidence]
        title.update(
            Text(
                f"evidence: {len(evidence)} item(s)"
                if evidence
                else "evidence: none besides the workers' own environ"
            )
        )
        for node, e in evidence:
            table.add_row(
                Text(f"{node}: {e.source}" if node else e.source),
                str(e.pid if e.pid is not None else ""),
                str(e.rank if e.rank is not None else ""),
                Text(e.name),
                Text(clip(e.value, 40)),
                Text(visible(e.line or "", tab=" "), style="dim"),
            )


def transport_text(proof: TransportProof) -> Text:
    """`transport: ib-gdrdma (reason) [source]`, then its findings and, unproven, how to prove it."""
    text = Text("transport: ", style="bold")
    text.append(proof.verdict, style=TRANSPORT_STYLE.get(proof.verdict, "bold red"))
    text.append(f" ({visible(proof.reason)})  [{visible(proof.source)}]", style="dim")
    if proof.expected is not None:
        text.append(f"\nexpected {proof.expected}: ", style="bold")
        text.append("FAILED" if proof.failures else "met", style="bold red" if proof.failures else "green")
    for failure in proof.failures[:1]:
        text.append(f"\n{visible(failure)}", style="red")
    for finding in proof.findings[:FINDINGS_SHOWN]:
        text.append(f"\nfinding: {visible(finding)}", style="bold yellow")
    if len(proof.findings) > FINDINGS_SHOWN:
        text.append(
            f"\n… {len(proof.findings) - FINDINGS_SHOWN} more findings (env -c PROFILE)", style="yellow"
        )
    if proof.hint:
        text.append(f"\nto prove it: {visible(proof.hint)}", style="magenta")
    return text
