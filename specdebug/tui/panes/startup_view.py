"""What the startup pane shows: the head line, the phase checklist and the verdict, rendered from
the pane's state (a mixin, so the pane module keeps only state and actions): one node's server as
its checklist, a deployment's as a phase row per node with the verdict naming the node that failed
(from `core.deployment.monitor.DeploymentMonitor`).  Log text is plain `Text`, never markup."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text

from specdebug.core.control.events import Clock, ServerState
from specdebug.core.control.monitor import ServerMonitor
from specdebug.core.control.tracker import StartupHistory
from specdebug.core.deployment.monitor import DeploymentMonitor
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.engines import NO_ENGINE_PHASES, engine_of


def expected_phases(kind: str) -> list[str]:
    """The checklist for a kind: its engine's startup phases, or launch + ready without an engine."""
    engine = engine_of(kind)
    return list(engine.phases if engine is not None else NO_ENGINE_PHASES)


LOG_LINES_SHOWN = 14  # the last lines of the server's log under the checklist

STATE_STYLE = {
    ServerState.READY: "bold green",
    ServerState.FAILED: "bold red",
    ServerState.STARTING: "bold yellow",
    ServerState.LAUNCHING: "yellow",
    ServerState.STOPPING: "yellow",
    ServerState.STOPPED: "dim",
    ServerState.EXITED: "bold red",
    ServerState.RUNNING: "bold yellow",
    ServerState.CHECKING: "dim",
}


MARK = {
    ServerState.READY: ("✓", "green"),
    ServerState.RUNNING: ("✓", "yellow"),
    ServerState.STARTING: ("▶", "bold yellow"),
    ServerState.FAILED: ("✗", "bold red"),
    ServerState.EXITED: ("✗", "bold red"),
}


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


class StartupView:
    """Rendering of StartupPane's state (state, record, phases, verdict, history, found...)."""

    history: StartupHistory | None
    clock: Clock
    launch_warning: str = ""  # who else holds the GPUs a launch would use (asked before launching)

    @property
    def profile(self) -> Profile | None:  # provided by the pane
        raise NotImplementedError

    @property
    def mon(self) -> ServerMonitor:  # provided by the pane: one node's server
        raise NotImplementedError

    def elapsed(self) -> float | None:  # provided by the pane
        raise NotImplementedError

    def head_text(self) -> Text:
        text = Text()
        if self.profile is None:
            text.append("no profile: start specdebug with -c PROFILE", style="yellow")
            return text
        text.append(self.profile.name, style="bold cyan")
        port = self.mon.record.port if self.mon.record is not None else self.profile.server.port
        text.append(f"  port {port}  ")
        style = STATE_STYLE.get(self.mon.state, "dim")
        text.append(self.mon.state.upper(), style=style)
        elapsed = self.elapsed()
        if self.mon.found is not None and elapsed is not None:
            text.append(f"  up {fmt_s(elapsed)}  (found running, not launched from this screen)")
        elif elapsed is not None:
            text.append(f"  elapsed {fmt_s(elapsed)}")
        if self.history is not None:
            if self.mon.state is ServerState.STARTING and elapsed is not None:
                text.append(f"  ETA {fmt_s(self.history.eta(elapsed))}", style="cyan")
            text.append(
                f"  (usually {fmt_s(self.history.expected_total_s)} over {self.history.runs} "
                f"run{'s' if self.history.runs != 1 else ''})",
                style="dim",
            )
        if self.mon.record is not None:
            text.append(
                f"\nPID {self.mon.record.pid}  PGID {self.mon.record.pgid}  processes {len(self.mon.pids)}  "
            )
            text.append(f"health {self.mon.health if self.mon.health is not None else '-'}  ")
            text.append(f"log {self.mon.record.log_file}", style="dim")
        elif self.mon.state is ServerState.IDLE:
            text.append("\nl launch  a attach  s stop  R restart", style="dim")
        elif self.mon.state is ServerState.CHECKING:
            text.append("\nchecking whether this profile's server is already running…", style="dim")
        if self.launch_warning:
            text.append(f"\n{visible(self.launch_warning, newlines=True)}", style="bold yellow")
        return text

    def phases_view(self) -> Table | Text:
        if self.mon.found is not None:
            return Text(
                "phases not watched: found already running\n(a attaches and replays them from its log)",
                style="dim",
            )
        return self.phases_table()

    def phases_table(self) -> Table:
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=False)
        table.add_column("", width=1)
        table.add_column("phase", min_width=16)
        table.add_column("at", justify="right", min_width=7)
        table.add_column("took", justify="right", min_width=7)
        table.add_column("usually at", justify="right", min_width=7)
        kind = self.profile.server.kind if self.profile is not None else "custom"
        seen = {p.name: p for p in self.mon.phases}
        names = [p.name for p in self.mon.phases]
        expected = list(self.history.phase_starts) if self.history else expected_phases(kind)
        for name in expected:
            if name not in seen:
                names.append(name)
        if "ready" in names:  # ready always last
            names = [n for n in names if n != "ready"] + ["ready"]
        current = self.mon.phases[-1].name if self.mon.phases else None
        for i, name in enumerate(names):
            p = seen.get(name)
            usual = self.history.phase_starts.get(name) if self.history else None
            if p is None:
                if self.mon.verdict is not None and self.mon.verdict.verdict == "ready":
                    continue  # this server never printed that milestone
                table.add_row(
                    Text("·", style="dim"), Text(name, style="dim"), "", "", Text(fmt_s(usual), style="dim")
                )
                continue
            nxt = next((seen[n] for n in names[i + 1 :] if n in seen), None)
            if nxt is not None:
                took: float | None = nxt.at - p.at
            elif self.mon.verdict is not None:
                took = self.mon.verdict.at - p.at if name != "ready" else None
            else:
                took = self.clock() - p.at if self.mon.state is ServerState.STARTING else None
            failed_here = (
                self.mon.verdict is not None and self.mon.verdict.verdict == "failed" and name == current
            )
            if failed_here:
                mark = Text("✗", style="bold red")
            elif name == current and self.mon.state is ServerState.STARTING:
                mark = Text("▶", style="bold yellow")
            else:
                mark = Text("✓", style="green")
            table.add_row(mark, Text(name), fmt_s(p.elapsed_s), fmt_s(took), Text(fmt_s(usual), style="dim"))
        return table

    def _stalling(self) -> bool:
        """Still starting, and past the usual startup time by half (needs an earlier startup to know)."""
        elapsed = self.elapsed()
        if self.mon.state is not ServerState.STARTING or self.history is None or elapsed is None:
            return False
        return elapsed > 1.5 * self.history.expected_total_s + 5.0

    def verdict_text(self) -> Text:
        v = self.mon.verdict
        text = Text(no_wrap=True, overflow="ellipsis")
        if v is None and self.mon.found is not None and self.mon.record is not None:
            launched = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.mon.record.started_at))
            how = "attached" if self.mon.record.attached else "launched"
            if self.mon.state is ServerState.READY:
                text.append("READY", style="bold green")
            elif self.mon.state is ServerState.RUNNING:
                text.append("RUNNING", style="bold yellow")
                text.append(f", health {self.mon.health or 'not answering'} (still starting?)")
            else:
                text.append(self.mon.state.upper(), style="bold")
            text.append(f"\n{how} by specdebug at {launched}", style="dim")
            return text
        if v is None:
            if self.mon.message:
                text.append(self.mon.message)
            if self._stalling():
                text.append(
                    "\ntaking longer than usual: k shows where each worker is (py-spy)", style="yellow"
                )
            if self.mon.log_problem is not None:  # health alone may still make it ready: say why no log
                text.append(
                    ("\n" if self.mon.message else "") + "cannot read the server log: ", style="yellow"
                )
                text.append(visible(self.mon.log_problem))
            return text
        if v.verdict == "ready":
            text.append(f"READY after {fmt_s(v.elapsed_s)}", style="bold green")
            by = self.mon.record.launched_by if self.mon.record is not None else None
            if by is not None and not by.is_this_process():  # a run followed, not launched here
                text.append(f"\nlaunched by another specdebug session ({by.describe()})", style="dim")
            if self.mon.state is not ServerState.READY and self.mon.message:  # how it ended since
                style = "bold red" if self.mon.state is ServerState.EXITED else "yellow"
                text.append(f"\n{self.mon.state.upper()}: ", style=style)
                text.append(visible(self.mon.message))
            return text
        text.append(f"FAILED after {fmt_s(v.elapsed_s)} in phase {v.last_phase}", style="bold red")
        if v.error_kind:
            text.append(f"  [{v.error_kind}]", style="red")
        text.append("\n")
        text.append(visible(v.reason or "", newlines=True), style="bold")
        if v.excerpt:
            text.append("\n\n")
            shown = v.excerpt[-12:]
            for line in shown:
                style = "bold red" if v.reason and v.reason in line else "dim"
                text.append(visible(line[:300], tab=" ") + "\n", style=style)
        return text

    # -- a deployment: a phase row per node ----------------------------------------------------

    def nodes_views(self, mon: DeploymentMonitor, lines: int) -> tuple[Text, Table, Text, list[str]]:
        """Head, a phase row per node, the verdict, and the last `lines` of every node's log."""
        log = list(mon.log_lines)[-lines:]
        return self.nodes_head(mon), self.nodes_table(mon), self.nodes_verdict(mon), log

    def nodes_head(self, mon: DeploymentMonitor) -> Text:
        dep = mon.deployment
        text = Text(dep.profile.name, style="bold cyan")
        text.append(f"  deployment of {len(dep.nodes)} nodes  ")
        text.append(mon.state.upper(), style=STATE_STYLE.get(mon.state, "dim"))
        elapsed = mon.elapsed(self.clock())
        if mon.found is not None:
            text.append("  (found running, not launched from this screen)")
        elif elapsed is not None:
            text.append(f"  elapsed {fmt_s(elapsed)}")
        rec = mon.leader_record
        port = rec.port if rec is not None else dep.leader.profile.server.port
        text.append(f"\nleader {dep.leader.host} port {port}", style="dim")
        if dep.leader_address:
            text.append(f"  rendezvous {dep.leader_address}", style="dim")
        if mon.state is ServerState.IDLE:
            text.append("\nl launch every node  a attach  x stop  R restart", style="dim")
        return text

    def nodes_table(self, mon: DeploymentMonitor) -> Table:
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=False)
        table.add_column("", width=1)
        table.add_column("node", min_width=8, no_wrap=True)
        table.add_column("state", min_width=8)
        table.add_column("phase", min_width=14)
        table.add_column("at", justify="right", min_width=6)
        table.add_column("PID", justify="right", min_width=6)
        table.add_column("procs", justify="right")
        for row in mon.rows():
            mark, style = MARK.get(row.state, ("·", "dim"))
            name = Text(visible(row.host), style="bold red" if row.host == mon.failed_node else "bold")
            name.append(" leader" if row.rank == 0 else f" #{row.rank}", style="dim")
            table.add_row(
                Text(mark, style=style),
                name,
                Text(row.state.value, style=STATE_STYLE.get(row.state, "dim")),
                Text(row.phase or "-", style="" if row.phase else "dim"),
                fmt_s(row.phase_at),
                str(row.pid or ""),
                str(row.processes or ""),
            )
        return table

    def nodes_verdict(self, mon: DeploymentMonitor) -> Text:
        text = Text(no_wrap=False)
        v = mon.verdict
        if mon.state is ServerState.READY:
            after = f" after {fmt_s(v.elapsed_s)}" if v is not None else ""
            text.append(f"READY as one{after} on {len(mon.deployment.nodes)} nodes", style="bold green")
        elif mon.state is ServerState.FAILED:
            after = f" after {fmt_s(v.elapsed_s)}" if v is not None else ""
            who = f": {mon.failed_node}" if mon.failed_node else ""
            text.append(f"FAILED{after}{who}", style="bold red")
        if mon.message:  # one line per node's part (`node0: ...; node1: ...`)
            text.append(("\n" if text else "") + visible(mon.message, newlines=True).replace("; ", "\n"))
        return text
