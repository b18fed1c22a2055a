"""Env pane: a matrix of variables x processes (launcher column beside the workers'), coloured by
status, with the evidence behind it and a diff of two chosen processes.

The check itself is `specdebug.core.env.probe.env_events`, the same stream the `env` verb reads; this
pane shows its progress and renders the report.  Every value shown comes from the box, so every cell is plain
`Text` with a style, never markup.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from specdebug.core.env.events import EnvDone, EnvProcessesFound
from specdebug.core.env.model import DEFAULT_PREFIXES, EnvQuery, EnvReport, ProcEnv
from specdebug.core.env.probe import env_events, query_for_profile
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.core.servers import ServerRecord
from specdebug.core.startup.events import ServerState
from specdebug.engines import worker_match
from specdebug.remote.api import RemoteError
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.stacks_action import open_stacks

STATUS_STYLE = {
    "ok": "green",
    "missing": "bold red",
    "different": "bold yellow",
    "unverifiable": "magenta",
}
ENVIRON_STYLE = {"readable": "green", "clobbered": "bold yellow", "denied": "bold red", "gone": "dim"}
LEGEND = (  # every mark is a word or a sign, colour only repeats it (a monochrome terminal reads it too)
    ("✓ ok", "green"),
    ("missing", "bold red"),
    ("≠ different", "bold yellow"),
    ("? unverifiable (~launcher's value)", "magenta"),
    ("[nccl] proven by NCCL log", "dim"),
    ("! set by the server itself", "bold red"),
)
DEFAULT_MATCH = worker_match()  # every engine's worker titles
MAX_VALUE = 40
CONNECT_WAIT_S = 30.0


def _clip(value: str, limit: int = MAX_VALUE) -> str:
    """A value from the box for one cell: controls shown as escapes (never sent), then clipped."""
    value = visible(value, tab=" ")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _col_key(pid: int) -> str:
    return f"p{pid}"


def short_title(proc: ProcEnv) -> str:
    """`sglang::scheduler_TP0` -> `TP0`; other titles: first word's basename."""
    head = proc.title.split(" ")[0] if proc.title else ""
    if "::" in head:
        head = head.split("::", 1)[1].removeprefix("scheduler_")
    return _clip(head.rsplit("/", 1)[-1] or "?", 18)


def var_cell(proc: ProcEnv, name: str) -> Text:
    """One matrix cell: the checked status/value of an expected var, or an extra's plain value."""
    vc = proc.vars.get(name)
    if vc is not None:
        style = STATUS_STYLE[vc.status]
        if vc.status == "ok":
            text = Text(_clip(vc.actual or ""), style=style)
            text.append(" ✓", style=style)
        elif vc.status == "missing":
            text = Text("missing", style=style)
        elif vc.status == "different":
            text = Text(_clip(vc.actual or ""), style=style)
            text.append(" ≠", style=style)
        else:
            text = Text("?", style=style)
            if vc.actual is not None:  # the launcher's value: inference, not proof
                text.append(f" ~{_clip(vc.actual, 20)}", style="dim")
        if vc.source == "nccl_log":
            text.append(" [nccl]", style="dim")
        if vc.overwritten_by_server and vc.status != "ok":
            text.append(" !", style="bold red")
        return text
    if name in proc.extra:
        return Text(_clip(proc.extra[name]))
    if proc.environ_state != "readable":
        return Text("?", style="dim")
    return Text("-", style="dim")


NO_EXPECTED_HINT = (
    "no expected variables: the profile sets no [server] env (P picks another profile); "
    "showing what the workers have"
)


def tui_warnings(report: EnvReport) -> list[str]:
    """The report's warnings in TUI words: the core's hint names command-line flags (-c,
    --expect) that a TUI user cannot type, so it is replaced by what to do here."""
    out = []
    for line in report.summary.warnings:
        if not report.expected and line.startswith("no expected variables"):
            line = (
                NO_EXPECTED_HINT
                if report.expected_source.startswith("profile")
                else (
                    "no expected variables: pick a profile with P (its [server] env is what the workers "
                    "should have); showing what the workers have"
                )
            )
        out.append(line)
    return out


class EnvPane(Pane):
    PANE_ID = "env"
    TITLE = "Env"
    BINDINGS = [
        Binding("r", "refresh", "Refresh", id="env.refresh"),
        Binding("m", "mark", "Mark for diff", id="env.mark"),
        Binding("k", "stacks", "Stack of this worker", id="env.stacks", show=False),  # `specdebug stacks`
        Binding("escape", "clear_marks", "Clear diff", id="env.clear_diff", show=False),
    ]
    IN_TURN_ACTIONS = frozenset({"mark", "stacks"})  # the highlighted process column
    DEFAULT_CSS = """
    EnvPane { layout: vertical; }
    EnvPane #env-how { height: auto; color: $text-muted; }
    EnvPane #env-verdict { height: auto; max-height: 6; }
    EnvPane #env-matrix { height: 1fr; }
    EnvPane #env-legend { height: 1; }
    EnvPane #env-diff-title { height: 1; margin-top: 1; color: $text-muted; }
    EnvPane #env-diff { height: auto; max-height: 12; }
    EnvPane #env-evidence-title { height: 1; margin-top: 1; color: $text-muted; }
    EnvPane #env-evidence { height: auto; max-height: 10; }
    """

    class ReportReady(Message):
        def __init__(self, report: EnvReport) -> None:
            super().__init__()
            self.report = report

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(ctx, **kwargs)
        self.report: EnvReport | None = None
        self.marked: list[int] = []
        self._columns: list[int] = []  # pid of each process column, in order

    def compose(self) -> ComposeResult:
        yield Static(Text("press r to check the workers' environment"), id="env-how")
        yield Static(Text(""), id="env-verdict")
        # the variable (and expected) columns stay put while the process columns scroll
        yield DataTable(id="env-matrix", cursor_type="cell", zebra_stripes=True, fixed_columns=2)
        legend = Text()
        for i, (label, style) in enumerate(LEGEND):
            legend.append(("  " if i else "") + label, style=style)
        yield Static(legend, id="env-legend")
        yield Static(Text("diff: mark two process columns with m"), id="env-diff-title")
        yield DataTable(id="env-diff", cursor_type="row", show_cursor=False)
        yield Static(Text("evidence"), id="env-evidence-title")
        yield DataTable(id="env-evidence", cursor_type="row", show_cursor=False)

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
        self.report = None
        self.marked = []
        self._columns = []
        self.query_one("#env-verdict", Static).update(Text(""))
        self.query_one("#env-matrix", DataTable).clear(columns=True)
        self.query_one("#env-diff", DataTable).clear()
        self.query_one("#env-evidence", DataTable).clear()
        self.query_one("#env-diff-title", Static).update(Text("diff: mark two process columns with m"))
        self.query_one("#env-evidence-title", Static).update(Text("evidence"))

    # -- actions ---------------------------------------------------------------------------

    def action_refresh(self) -> None:
        remote = self.ctx.remote()
        if remote is None:
            self.notify("no host selected", severity="warning")
            return
        self.query_one("#env-how", Static).update(Text(f"checking {remote.name}…", style="dim"))
        self.run_check()

    @work(exclusive=True, group="env-check", exit_on_error=False)
    async def run_check(self, quiet: bool = False) -> None:
        remote = self.ctx.remote()
        if remote is None:
            return
        try:
            await remote.wait_connected(CONNECT_WAIT_S)
            if self.ctx.profile is not None:
                query = await query_for_profile(remote, self.ctx.profile)
            else:
                query = EnvQuery(
                    match=DEFAULT_MATCH, prefixes=list(DEFAULT_PREFIXES), expect_from_launcher=True
                )
            report = None
            async for ev in env_events(remote, query):
                if isinstance(ev, EnvProcessesFound):
                    self.query_one("#env-how", Static).update(Text(ev.describe(), style="dim"))
                elif isinstance(ev, EnvDone):
                    report = ev.report
        except (RemoteError, LookupError, OSError, TimeoutError) as exc:
            if not quiet:
                self.notify(f"env check failed: {exc}", severity="error")
            self.query_one("#env-how", Static).update(Text(f"env check failed: {exc}", style="red"))
            return
        if report is not None:
            self.post_message(self.ReportReady(report))

    @on(ReportReady)
    def _report_ready(self, event: ReportReady) -> None:
        self.show_report(event.report)

    def action_mark(self) -> None:
        table = self.query_one("#env-matrix", DataTable)
        col = table.cursor_coordinate.column - 2  # after the variable and expected columns
        if not 0 <= col < len(self._columns):
            self.notify("move to a process column to mark it", severity="warning")
            return
        self.mark(self._columns[col])

    def action_stacks(self) -> None:
        """py-spy the worker of the highlighted process column (tui.stacks_action)."""
        col = self.query_one("#env-matrix", DataTable).cursor_coordinate.column - 2
        remote, profile = self.ctx.remote(), self.ctx.profile
        if not 0 <= col < len(self._columns) or remote is None or profile is None:
            self.notify(
                "move to a worker's column (with a host and a profile) to see its stack", severity="warning"
            )
            return
        self.run_worker(
            open_stacks(self.app, remote, profile, [self._columns[col]]), group="env-stacks", exclusive=True
        )

    def action_clear_marks(self) -> None:
        self.marked.clear()
        self._render_diff()

    # -- rendering (also called directly by tests) -------------------------------------------

    def mark(self, pid: int) -> None:
        """Choose a process for the diff; the two most recent choices are compared."""
        if pid in self.marked:
            self.marked.remove(pid)
        else:
            self.marked = (self.marked + [pid])[-2:]
        self._render_diff()

    def _procs(self) -> list[tuple[str, ProcEnv]]:
        if self.report is None:
            return []
        out = [("launcher", self.report.launcher)] if self.report.launcher else []
        return out + [("worker", w) for w in self.report.workers]

    def show_report(self, report: EnvReport) -> None:
        self.report = report
        s = report.summary
        how = Text(f"{report.selection}; ", style="dim")
        how.append(s.method, style="dim")
        if report.expected:
            how.append(f"; expected from {report.expected_source}", style="dim")
        self.query_one("#env-how", Static).update(how)
        verdict = Text("OK" if s.ok else "FAILED", style="bold green" if s.ok else "bold red")
        counts = ", ".join(f"{n} {k}" for k, n in s.counts.items() if n)
        if counts:
            verdict.append(f"  {counts}")
        for line in s.reasons[:4]:
            verdict.append("\n" + line, style="red")
        if len(s.reasons) > 4:
            verdict.append(f"\n… {len(s.reasons) - 4} more", style="red")
        for line in tui_warnings(report)[:2]:
            verdict.append("\n" + line, style="yellow")
        self.query_one("#env-verdict", Static).update(verdict)
        self._render_matrix()
        self.marked = [pid for pid in self.marked if any(p.pid == pid for _, p in self._procs())]
        self._render_diff()
        self._render_evidence()

    def _render_matrix(self) -> None:
        table = self.query_one("#env-matrix", DataTable)
        table.clear(columns=True)
        assert self.report is not None
        procs = self._procs()
        self._columns = [p.pid for _, p in procs]
        table.add_column("variable", key="var")
        table.add_column("expected", key="expected")
        for role, proc in procs:
            label = Text(
                f"{'launcher' if role == 'launcher' else short_title(proc)} {proc.pid}",
                style="bold" if role == "launcher" else "",
            )
            table.add_column(label, key=_col_key(proc.pid))
        row = [Text("environ", style="italic"), Text("")]
        for _, proc in procs:
            row.append(Text(proc.environ_state, style=ENVIRON_STYLE[proc.environ_state]))
        table.add_row(*row, key="__environ__")
        extras = sorted({n for _, p in procs for n in p.extra} - set(self.report.expected))
        for name in list(self.report.expected) + extras:
            expected = self.report.expected.get(name)
            row = [
                Text(name),
                Text(_clip(expected), style="bold") if expected is not None else Text("-", style="dim"),
            ]
            row += [var_cell(proc, name) for _, proc in procs]
            table.add_row(*row, key=name)

    def diff_rows(self, a: int, b: int) -> list[tuple[str, str | None, str | None]]:
        """Variables whose visible (masked) values differ between two processes."""
        assert self.report is not None
        ea, eb = self.report.env_of(a), self.report.env_of(b)
        names = sorted(set(ea) | set(eb))
        return [(n, ea.get(n), eb.get(n)) for n in names if ea.get(n) != eb.get(n)]

    def _render_diff(self) -> None:
        title = self.query_one("#env-diff-title", Static)
        table = self.query_one("#env-diff", DataTable)
        table.clear()
        if self.report is None or len(self.marked) < 2:
            chosen = ", ".join(str(p) for p in self.marked)
            title.update(
                Text("diff: mark two process columns with m" + (f" (marked {chosen})" if chosen else ""))
            )
            return
        a, b = self.marked
        pa, pb = (next(p for _, p in self._procs() if p.pid == pid) for pid in (a, b))
        rows = self.diff_rows(a, b)
        head = Text(f"diff {short_title(pa)} {a} vs {short_title(pb)} {b}: ")
        head.append(f"{len(rows)} differing" if rows else "same visible env", style="bold")
        unreadable = [p.pid for p in (pa, pb) if p.environ_state != "readable"]
        if unreadable:
            head.append(f" (environ not readable for pid {', '.join(map(str, unreadable))})", style="yellow")
        title.update(head)
        for name, va, vb in rows:
            table.add_row(
                Text(name),
                Text(_clip(va, 60)) if va is not None else Text("(unset)", style="dim"),
                Text(_clip(vb, 60)) if vb is not None else Text("(unset)", style="dim"),
            )

    def _render_evidence(self) -> None:
        assert self.report is not None
        table = self.query_one("#env-evidence", DataTable)
        title = self.query_one("#env-evidence-title", Static)
        table.clear()
        title.update(
            Text(
                f"evidence: {len(self.report.evidence)} item(s)"
                if self.report.evidence
                else "evidence: none besides the workers' own environ"
            )
        )
        for e in self.report.evidence:
            table.add_row(
                Text(e.source),
                str(e.pid if e.pid is not None else ""),
                str(e.rank if e.rank is not None else ""),
                Text(e.name),
                Text(_clip(e.value, 40)),
                Text(visible(e.line or "", tab=" "), style="dim"),
            )
