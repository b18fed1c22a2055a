"""Hosts pane: one row per host with its connection state, and the selected host's GPU table.

A profile with `[deployment]` groups its nodes: a row naming the deployment (its GPUs over every
node), then its nodes in rank order under it (the leader first), then the other hosts.

Host facts refresh every few seconds in a worker per host, so a slow or dead host only
delays its own row.  All remote text goes into cells as plain Text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from specdebug.core.deployment import Deployment
from specdebug.core.hosts import HostInfo, gather_host_info
from specdebug.core.sanitize import visible
from specdebug.remote.api import ConnState, ConnStatus, RemoteError
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane
from specdebug.tui.widgets.measured_table import MeasuredTable
from specdebug.tui.widgets.steady import Steady

STATE_STYLE = {
    ConnState.CONNECTING: "yellow",
    ConnState.CONNECTED: "green",
    ConnState.RECONNECTING: "bold yellow",
    ConnState.FAILED: "bold red",
    ConnState.CLOSED: "dim",
}
REFRESH_S = 5.0
# news from the hosts (facts, state, RTT) is applied to the table in one batch per tick: 64 hosts
# refreshing apart from each other redrew the table ~13 times a second, ~75 ms each while shown
BATCH_S = 0.5


# the GPUs right after the state: on an 80-column terminal the row still says how many and which throttle
HOST_COLUMNS = [
    ("host", "host"),
    ("state", "state"),
    ("gpus", "gpus"),
    ("hostname", "hostname"),
    ("kernel", "kernel"),
    ("cpus", "cpus"),
    ("mem", "mem"),
    ("load 1/5/15", "load"),
    ("up", "up"),
]
AUTH_FAILED = "authentication failed"
AUTH_HINT = (
    "authentication failed: check the key and user, and the server's auth log "
    "(a locked account looks the same from here)"
)


def status_text(status: ConnStatus) -> Text:
    text = Text(status.state.value, style=STATE_STYLE.get(status.state, ""))
    if status.state is ConnState.CONNECTED and status.rtt_ms is not None:
        text.append(f" {status.rtt_ms:.1f} ms", style="dim")
    if status.state is ConnState.RECONNECTING:
        text.append(f" #{status.attempt}", style="dim")
    if status.last_error and status.state in (ConnState.RECONNECTING, ConnState.FAILED):
        text.append(f" {status.last_error}"[:80], style="dim")
    return text


def _uptime(seconds: float | None) -> str:
    if not seconds:
        return ""
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _gib(n: int | None) -> str:
    return f"{n / 2**30:.0f} GiB" if n else ""


class HostsPane(Pane):
    PANE_ID = "hosts"
    TITLE = "Hosts"
    BINDINGS = [
        Binding("r", "refresh", "Refresh", id="hosts.refresh"),
        Binding("enter", "select_host", "Select host", id="hosts.select", show=False),
    ]
    # the highlighted host; on the hosts table, Enter is the table's own key (RowSelected, below)
    IN_TURN_ACTIONS = frozenset({"select_host"})
    DEFAULT_CSS = """
    HostsPane { layout: vertical; }
    HostsPane #hosts-table { height: auto; max-height: 50%; }
    HostsPane #gpu-title { height: 1; margin-top: 1; color: $text-muted; }
    HostsPane #gpu-table { height: 1fr; }
    """

    class StatusChanged(Message):
        def __init__(self, host: str, status: ConnStatus) -> None:
            super().__init__()
            self.host = host
            self.status = status

    class InfoReady(Message):
        def __init__(self, info: HostInfo) -> None:
            super().__init__()
            self.info = info

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(ctx, **kwargs)
        self.infos: dict[str, HostInfo] = {}
        self.statuses: dict[str, ConnStatus] = {}
        self._unsubscribe: list[Callable[[], None]] = []  # status listeners, removed on unmount
        # host -> cells on screen (only changed cells are updated)
        self._shown: dict[str, list[str | Text]] = {}
        self._told: set[str] = set()  # hosts whose authentication failure was explained
        self._gpus_shown: object = None  # what the GPU table shows (redrawn only when it changes)
        self.cell_updates = 0  # cells written since mount (tests: an unchanged refresh writes none)
        self._due: set[str] = set()  # hosts with news not yet in the table (applied per BATCH_S)

    def compose(self) -> ComposeResult:
        hosts: DataTable[Any] = MeasuredTable(id="hosts-table", cursor_type="row", zebra_stripes=True)
        for label, key in HOST_COLUMNS:
            hosts.add_column(label, key=key)
        yield hosts
        yield Steady("GPUs", id="gpu-title")
        gpus: DataTable[Any] = MeasuredTable(id="gpu-table", cursor_type="row", zebra_stripes=True)
        for label, key in [
            ("gpu", "index"),
            ("name", "name"),
            ("util", "util"),
            ("mem used/total", "mem"),
            ("temp", "temp"),
            ("power", "power"),
            ("sm clock", "clock"),
            ("throttle", "throttle"),
        ]:
            gpus.add_column(label, key=key)
        yield gpus

    def on_unmount(self) -> None:
        for unsubscribe in self._unsubscribe:  # the hosts outlive this pane: stop hearing from them
            unsubscribe()
        self._unsubscribe.clear()

    def on_mount(self) -> None:
        for name, remote in self.ctx.remotes.items():
            self._unsubscribe.append(remote.subscribe(partial(self._post_status, name)))
            self.statuses[name] = remote.status
            self.poll_host(name)
        self._build_rows()
        self._render_gpus()

    GROUP_KEY = "__deployment__"

    def _grouped(self) -> Deployment | None:
        """The profile's deployment, whose nodes the table groups (None: a one-box profile, whose one
        node is just the selected host and keeps its place)."""
        target = self.ctx.target()
        return target.deployment if target is not None and target.multi else None

    def _order(self) -> list[str]:
        """The hosts in table order: a deployment's nodes here first (rank order), then the others."""
        dep = self._grouped()
        nodes = [n.host for n in dep.nodes if n.host in self.ctx.remotes] if dep is not None else []
        return nodes + [h for h in self.ctx.remotes if h not in nodes]

    def _build_rows(self) -> None:
        """(Re)build the table: the deployment's group row and its nodes, then the other hosts."""
        table = self.query_one("#hosts-table", DataTable)
        table.clear()
        self._shown.clear()
        if (dep := self._grouped()) is not None:
            self._shown[self.GROUP_KEY] = self._group_row(dep)
            table.add_row(*self._shown[self.GROUP_KEY], key=self.GROUP_KEY)
        for name in self._order():
            self._shown[name] = self._row(name)
            table.add_row(*self._shown[name], key=name)
        selected = self.ctx.selected
        if selected is not None and selected in table.rows:
            table.move_cursor(row=table.get_row_index(selected))

    def _group_row(self, dep: Deployment) -> list[str | Text]:
        connected = sum(
            1
            for n in dep.nodes
            if (s := self.statuses.get(n.host)) is not None and s.state is ConnState.CONNECTED
        )
        gpus = [len(i.gpus) for n in dep.nodes if (i := self.infos.get(n.host)) is not None]
        state = Text(
            f"{connected}/{len(dep.nodes)} connected",
            style="green" if connected == len(dep.nodes) else "yellow",
        )
        return [
            Text(f"▾ {dep.profile.name}", style="bold cyan"),
            state,
            Text(f"{sum(gpus)} over {len(gpus)} nodes" if gpus else ""),
            Text(f"deployment: {len(dep.nodes)} nodes", style="dim"),
            *[""] * (len(HOST_COLUMNS) - 4),
        ]

    def _host_cell(self, name: str) -> Text:
        dep = self._grouped()
        node = dep.node(name) if dep is not None else None
        if dep is None or node is None:
            return Text(name, style="bold")
        text = Text("└ " if node is dep.nodes[-1] else "├ ", style="dim")
        text.append(name, style="bold")
        text.append(
            " leader" if node.is_leader else f" rank {node.rank}", style="cyan" if node.is_leader else "dim"
        )
        return text

    def profile_changed(self, profile: Any) -> None:
        """Another profile: its deployment (or none) groups the hosts."""
        self._build_rows()

    def _post_status(self, host: str, status: ConnStatus) -> None:
        self.post_message(self.StatusChanged(host, status))

    @on(StatusChanged)
    def _status_changed(self, event: StatusChanged) -> None:
        self.statuses[event.host] = event.status
        self._batch(event.host)
        error = event.status.last_error or ""
        if event.status.state is ConnState.FAILED and AUTH_FAILED in error and event.host not in self._told:
            self._told.add(event.host)  # once per host: the row keeps saying it
            self.notify(f"{event.host}: {AUTH_HINT}", severity="error", timeout=12)

    @on(InfoReady)
    def _info_ready(self, event: InfoReady) -> None:
        self.infos[event.info.host] = event.info
        self._batch(event.info.host)

    def _batch(self, host: str) -> None:
        """Mark a host's row for the next batch; the first news of a batch starts its timer."""
        if not self._due:
            self.set_timer(BATCH_S, self._apply_batch)
        self._due.add(host)

    def _apply_batch(self) -> None:
        due, self._due = self._due, set()
        for host in due:
            self._update_row(host)
        if (self.ctx.selected or next(iter(self.ctx.remotes), None)) in due:
            self._render_gpus()

    def show_info(self, info: HostInfo, status: ConnStatus | None = None) -> None:
        """Feed a snapshot directly (used by tests and snapshots)."""
        if status is not None:
            self.statuses[info.host] = status
        self.infos[info.host] = info
        self._update_row(info.host)
        self._render_gpus()

    def _row(self, name: str) -> list[str | Text]:
        info = self.infos.get(name)
        status = self.statuses.get(name) or ConnStatus(ConnState.CONNECTING)
        if info is None:
            return [self._host_cell(name), status_text(status), "", "", "", "", "", "", ""]
        throttled = sum(1 for g in info.gpus if g.throttled)
        gpus = Text(str(len(info.gpus)) if info.gpus else (info.gpu_error and "none" or "0"))
        if throttled:
            gpus.append(f" ({throttled} throttled)", style="bold red")
        up = _uptime(info.uptime_s)
        return [
            self._host_cell(name),
            status_text(status),
            gpus,
            Text(visible(info.hostname or "", tab=" ")),
            Text(visible(info.kernel or "", tab=" ")),
            str(info.cpus or ""),
            _gib(info.mem_total_bytes),
            " ".join(f"{x:.2f}" for x in info.load or []),
            up,
        ]

    def _update_row(self, name: str) -> None:
        table = self.query_one("#hosts-table", DataTable)
        dep = self._grouped()
        if name != self.GROUP_KEY and self.GROUP_KEY in table.rows:
            self._update_row(self.GROUP_KEY)  # its counts are its nodes'
        if name == self.GROUP_KEY and dep is None:
            return  # another profile's group, gone with the next rebuild
        row = self._group_row(dep) if dep is not None and name == self.GROUP_KEY else self._row(name)
        if name not in table.rows:
            self._shown[name] = row
            table.add_row(*row, key=name)
            return
        old: list[str | Text | None] = [*self._shown.get(name, [])] or [None] * len(row)
        for key, value, before in zip(
            [key for _, key in HOST_COLUMNS],
            row,
            old,
            strict=True,
        ):
            if value != before:  # rich Text compares text and styles
                table.update_cell(name, key, value, update_width=True)
                self.cell_updates += 1
        self._shown[name] = row

    def _render_gpus(self) -> None:
        name = self.ctx.selected or next(iter(self.ctx.remotes), None) or next(iter(self.infos), None)
        table = self.query_one("#gpu-table", DataTable)
        title = self.query_one("#gpu-title", Static)
        info = self.infos.get(name) if name else None
        shown = (name, info and (info.gpu_error, info.hostname, info.gpus))
        if shown == self._gpus_shown:
            return  # a refresh with the same GPU facts: nothing to redraw
        self._gpus_shown = shown
        table.clear()
        if info is None:
            title.update(Text(f"GPUs of {name or '-'}: waiting for the host"))
            return
        if info.gpu_error and not info.gpus:
            title.update(Text(visible(f"GPUs of {name}: {info.gpu_error}", tab=" "), style="yellow"))
            return
        title.update(Text(visible(f"GPUs of {name} ({info.hostname or '?'})", tab=" ")))
        for g in info.gpus:
            throttle = Text(", ".join(g.throttle_reasons) or "-", style="bold red" if g.throttled else "dim")
            mem = Text(
                f"{(g.memory_used_mib or 0) / 1024:.1f}/{(g.memory_total_mib or 0) / 1024:.1f} GiB"
                + (" OVER TOTAL" if g.memory_over_total else ""),
                style="bold red" if g.memory_over_total else "",
            )
            clock = (
                f"{g.clocks_sm_mhz or 0:.0f}/{g.clocks_max_sm_mhz or 0:.0f} MHz" if g.clocks_sm_mhz else "n/a"
            )
            table.add_row(
                str(g.index),
                Text(visible(g.name or "?", tab=" ")),
                f"{g.utilization_pct:.0f}%" if g.utilization_pct is not None else "n/a",
                mem,
                Text(
                    f"{g.temperature_c:.0f} C" if g.temperature_c is not None else "n/a",
                    style="bold red" if (g.temperature_c or 0) >= 83 else "",
                ),
                f"{g.power_draw_w:.0f} W" if g.power_draw_w is not None else "n/a",
                clock,
                throttle,
            )

    @work(group="hosts-poll", exit_on_error=False)
    async def poll_host(self, name: str) -> None:
        """Refresh one host forever; waits quietly while it is down."""
        remote = self.ctx.remotes[name]
        previous: HostInfo | None = None
        generation: int | None = None
        while True:
            try:
                await remote.wait_connected(None)
                if remote.generation != generation:  # reconnected: maybe another box
                    previous, generation = None, remote.generation
                info = previous = await gather_host_info(remote, previous)
                self.post_message(self.InfoReady(info))
            except RemoteError:
                pass
            if remote.status.state is ConnState.FAILED:
                return
            await asyncio.sleep(REFRESH_S)

    async def action_refresh(self) -> None:
        """Refresh every host now; a host that failed for good (e.g. refused key) is tried again."""
        self.workers.cancel_group(self, "hosts-poll")
        for name, remote in self.ctx.remotes.items():
            if remote.status.state is ConnState.FAILED:
                await remote.restart()
            self.poll_host(name)

    @on(DataTable.RowHighlighted, "#hosts-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key and event.row_key.value in self.ctx.remotes:
            self.post_message(self.HostSelected(event.row_key.value))  # the app's store holds it

    @on(DataTable.RowSelected, "#hosts-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on the hosts table: the row it was pressed on (the cursor may have moved since)."""
        self._select_host(event.row_key.value)

    def action_select_host(self) -> None:
        table = self.query_one("#hosts-table", DataTable)
        if table.row_count:
            self._select_host(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def _select_host(self, key: str | None) -> None:
        if key is not None:
            self.post_message(self.HostSelected(key))
            self.notify(f"acting on {key}")

    def host_changed(self, host: str | None) -> None:
        """The store's selection moved (ctx.selected is it already): show that host's GPUs."""
        self._render_gpus()
