"""The Startup pane on a deployment (a profile with `[deployment]`): every node launched, watched and
stopped as one, a phase row per node, and the deployment's verdict naming the node that failed.

Why apart from startup.py: the one-box pane folds one server's events; here the stream is
`core.deployment.control.watch_target`'s (each event tagged with its node) and the state is a
`core.deployment.monitor.DeploymentMonitor` (one ServerMonitor per node).  The calls are the
headless verbs' (`specdebug launch|attach|restart|stop|status -c PROFILE`); this module only
drives them and draws the result.  Mixed into StartupPane.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from specdebug.core.control import actions as server_control
from specdebug.core.control.actions import LaunchRefused
from specdebug.core.control.events import ServerState
from specdebug.core.control.monitor import StateChanged
from specdebug.core.control.observe import observe
from specdebug.core.control.records import ServerRecord
from specdebug.core.deployment import Deployment, Node
from specdebug.core.deployment.control import (
    finish_launches,
    launch_target,
    records_of,
    stop_target,
    target_status,
    watch_target,
)
from specdebug.core.deployment.monitor import DeploymentMonitor, watch_deployment_liveness
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.core.target import target_of
from specdebug.remote.api import Remote
from specdebug.tui.pane import Pane, RunningServer, describe_error
from specdebug.tui.panes.startup_view import STATE_STYLE, fmt_s

if TYPE_CHECKING:
    from specdebug.core.control.events import Clock

MARK = {
    ServerState.READY: ("✓", "green"),
    ServerState.RUNNING: ("✓", "yellow"),
    ServerState.STARTING: ("▶", "bold yellow"),
    ServerState.FAILED: ("✗", "bold red"),
    ServerState.EXITED: ("✗", "bold red"),
}


class StartupNodes(Pane):
    """A deployment's launch, watch, stop and recognition for the Startup pane (its base)."""

    clock: Clock
    MONITOR_S = 0.5
    # a row per node needs room: the table is wider, and on a narrow terminal the verdict goes below it
    DEFAULT_CSS = """
    StartupNodes.-nodes #startup-phases { width: 74; }
    StartupNodes.-nodes #startup-verdict-text { text-wrap: wrap; }
    StartupNodes.-nodes.-narrow #startup-body { layout: vertical; }
    StartupNodes.-nodes.-narrow #startup-phases { width: 1fr; }
    """
    _dmon: DeploymentMonitor | None = None

    def nodes_monitor(self) -> DeploymentMonitor | None:
        """The monitor of the profile's deployment (None: a one-box profile)."""
        dep = self.ctx.deployment()
        if dep is None:
            self._dmon = None
        elif self._dmon is None or self._dmon.deployment is not dep:
            self._dmon = DeploymentMonitor(dep)
        self.set_class(self._dmon is not None, "-nodes")
        return self._dmon

    def _stacks_node(self) -> Node | None:
        dep = self.ctx.deployment()
        if dep is None:
            return None
        return dep.node(self.ctx.selected or "") or dep.leader

    def stacks_target(self, remote: Remote) -> tuple[Remote, Profile] | None:
        """Whose workers `k` shows: the profile's on the host, or on a deployment the selected node's
        (its own connection and node profile, so its record is found)."""
        node = self._stacks_node()
        if node is not None:
            return self.ctx.remotes[node.host], node.profile
        return (remote, self.ctx.profile) if self.ctx.profile is not None else None

    def _node_remotes(self, dep: Deployment) -> Mapping[str, Remote]:
        return {n.host: self.ctx.remotes[n.host] for n in dep.nodes}

    def _announce_nodes(self, change: StateChanged | None) -> None:
        if change is not None:
            self.post_message(self.ServerStateChanged(change.state, change.record))
        self._dirty = True

    async def run_nodes(self, mon: DeploymentMonitor, mode: str) -> None:
        """launch | restart | attach every node, then watch them as one, then their liveness."""
        dep, journal = mon.deployment, self.ctx.journal
        remotes = self._node_remotes(dep)
        try:
            if mode == "restart":
                mon.state = ServerState.STOPPING
                self._dirty = True
                self._announce_nodes(mon.stopped(await stop_target(target_of(dep, remotes), journal=journal)))
            mon.reset_run(ServerState.LAUNCHING)
            self._dirty = True
            if (
                mode == "attach"
            ):  # a read-only seat observes the driver's servers: records read, nothing written
                journal = None if self.ctx.readonly else journal
                records: dict[str, ServerRecord] = {}
                for node in dep.nodes:
                    try:
                        records[node.host] = await (
                            observe(remotes[node.host], node.profile)
                            if self.ctx.readonly
                            else server_control.attach(remotes[node.host], node.profile, journal=journal)
                        )
                    except LaunchRefused as exc:
                        raise LaunchRefused(f"{node.host}: {exc}") from None
                deadline = self.clock() + dep.profile.ready.timeout_s
            else:
                launched = await launch_target(target_of(dep, remotes), journal=journal)
                await finish_launches(launched)
                records, deadline = records_of(launched), None
            mon.launched(records)
            self._dirty = True
            async for ev in watch_target(
                target_of(dep, remotes), records, deadline=deadline, journal=journal
            ):
                self._announce_nodes(mon.apply(ev))
            if mon.state is ServerState.READY:
                await self.watch_nodes(mon)
        except LaunchRefused as exc:
            mon.state, mon.message = ServerState.IDLE, str(exc)
            self.notify(str(exc), severity="error")
        except Exception as exc:
            if mon.state in (ServerState.LAUNCHING, ServerState.STARTING):
                mon.state = ServerState.FAILED
            mon.message = describe_error(exc)
            self.notify(f"{mode} failed: {describe_error(exc)}", severity="error")
        finally:
            self._dirty = True

    async def watch_nodes(self, mon: DeploymentMonitor) -> None:
        """After ready (or found running): every node's liveness; a node gone fails the deployment."""
        remotes = self._node_remotes(mon.deployment)
        async for change in watch_deployment_liveness(
            mon, remotes, liveness=server_control.liveness, interval=self.MONITOR_S
        ):
            if change is not None and change.state is ServerState.FAILED:
                self.notify(f"{mon.deployment.profile.name}: {mon.message}", severity="error")
            self._announce_nodes(change)

    async def stop_nodes(self, mon: DeploymentMonitor) -> None:
        mon.state = ServerState.STOPPING
        self._dirty = True
        try:
            dep = mon.deployment
            result = await stop_target(target_of(dep, self._node_remotes(dep)), journal=self.ctx.journal)
            self._announce_nodes(mon.stopped(result))
            self.notify(result.message, severity="information" if result.stopped else "error")
        except Exception as exc:
            mon.state = ServerState.FAILED
            self.notify(f"stop failed: {describe_error(exc)}", severity="error")
        finally:
            self._dirty = True

    async def recognise_nodes(self, mon: DeploymentMonitor) -> None:
        """Is the deployment already running on its nodes?  `status` on every node: reads only."""
        dep = mon.deployment
        mon.reset_run(ServerState.CHECKING)
        self._dirty = True
        try:
            for node in dep.nodes:
                await self.ctx.remotes[node.host].wait_connected(30.0)
            st = await target_status(target_of(dep, self._node_remotes(dep)))
        except Exception as exc:  # a down node is the hosts pane's news; the pane cannot tell
            mon.reset_run(ServerState.IDLE)
            mon.message = f"could not check for a running deployment: {describe_error(exc)}"
            self._dirty = True
            return
        self._announce_nodes(mon.apply_status(st))
        if mon.state in (ServerState.READY, ServerState.RUNNING):
            await self.watch_nodes(mon)

    def nodes_running(self, mon: DeploymentMonitor) -> list[RunningServer]:
        """The deployment left running at quit: one line, stopped from its leader (`stop -c PROFILE`)."""
        rec = mon.leader_record
        if rec is None or not mon.alive():
            return []
        path = str(self.ctx.profile_path) if self.ctx.profile_path else None
        return [
            RunningServer(mon.deployment.leader.host, mon.deployment.profile.name, path, rec.pid, rec.port)
        ]

    # -- rendering ----------------------------------------------------------------------------

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
