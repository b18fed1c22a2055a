"""Startup pane: launch/stop/restart/attach the profile's server and watch it come up.

Shows the startup phases as a checklist with durations, elapsed time and an ETA from earlier
startups of the same profile (journal verdicts), the last log lines, and the verdict with its
reason (rendering: startup_view.py).  On open it recognises the profile's server if it already
runs.

The pane acts on the profile's target (`ctx.target()`), through the calls of `specdebug
launch|attach|restart|stop|status -c PROFILE`: `core.deployment.control`'s launch_target,
watch_target, stop_target, target_status and attach_target, for one node and many.  The pane only
applies the events they stream (each tagged with its node) to a
`core.deployment.monitor.DeploymentMonitor`: one `core.control.monitor.ServerMonitor` per node (the
machine a bisection run uses without a screen).  One node is the one-box screen, drawn from its
node's ServerMonitor; a deployment is a phase row per node with the verdict naming the node that
failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import Static

from specdebug.capability import ReadOnlyError
from specdebug.core.control import actions as server_control
from specdebug.core.control.actions import LaunchRefused, ServerStatus
from specdebug.core.control.events import Launched, ServerPhase, ServerState, StartupEvent, Verdict
from specdebug.core.control.launch import Launching
from specdebug.core.control.monitor import ServerMonitor, StateChanged, record_changes, record_now
from specdebug.core.control.neighbours import NEIGHBOUR_CHECK_S, target_neighbours
from specdebug.core.control.observe import observe
from specdebug.core.control.records import ServerRecord, StopResult
from specdebug.core.control.tracker import StartupHistory, startup_history, verdict_of_run
from specdebug.core.deployment.control import (
    DeploymentStop,
    attach_target,
    finish_launches,
    launch_target,
    records_of,
    require_launch,
    stop_target,
    watch_target,
)
from specdebug.core.deployment.monitor import DeploymentMonitor, watch_deployment_liveness
from specdebug.core.deployment.status import target_status
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.core.records import JournalRecord, LaunchRecord, StopRecord, VerdictRecord, profile_of
from specdebug.core.target import Target
from specdebug.remote.api import Remote, RemoteError
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane, RunningServer, describe_error, error_toast
from specdebug.tui.panes.startup_view import LOG_LINES_SHOWN, StartupView
from specdebug.tui.stacks_action import open_stacks
from specdebug.tui.widgets.steady import Steady

CONNECT_WAIT_S = 30.0

logger = logging.getLogger(__name__)


class StartupPane(StartupView, Pane):
    PANE_ID = "startup"
    TITLE = "Startup"
    BINDINGS = [
        Binding("l", "launch", "Launch", id="startup.launch"),
        Binding("x", "stop", "Stop", id="startup.stop"),  # x stops in every pane
        Binding("R", "restart", "Restart", id="startup.restart"),
        Binding("a", "attach", "Attach", id="startup.attach"),
        Binding("k", "stacks", "Worker stacks", id="startup.stacks", show=False),  # `specdebug stacks`
    ]
    MUTATING_ACTIONS = frozenset({"launch", "stop", "restart"})
    can_focus = True  # only Statics inside: the pane itself takes focus so its keys work
    DEFAULT_CSS = """
    StartupPane { layout: vertical; }
    StartupPane #startup-head { height: auto; padding: 0 1; }
    StartupPane #startup-body { height: auto; }
    StartupPane #startup-phases { width: 52; height: auto; padding: 0 1; }
    StartupPane #startup-verdict { width: 1fr; height: auto; padding: 0 1; }
    StartupPane #startup-verdict-text { text-wrap: nowrap; text-overflow: ellipsis; }
    StartupPane #startup-log { text-wrap: nowrap; text-overflow: ellipsis; }
    StartupPane #startup-log-title { height: 1; padding: 0 1; color: $text-muted; margin-top: 1; }
    StartupPane #startup-log { height: 1fr; padding: 0 1; }
    StartupPane.-nodes #startup-phases { width: 74; }
    StartupPane.-nodes #startup-verdict-text { text-wrap: wrap; }
    StartupPane.-nodes.-narrow #startup-body { layout: vertical; }
    StartupPane.-nodes.-narrow #startup-phases { width: 1fr; }
    """
    _dmon: DeploymentMonitor | None = None

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(ctx, **kwargs)
        self.clock = time.time
        self.known: dict[str, RunningServer] = {}  # profile -> server seen running (for the quit note)
        self._no_target = ServerMonitor()  # what `mon` is without a target (no profile, no host)
        self._armed: dict[str, float] = {}  # action -> when its first press asked for confirmation
        self.history: StartupHistory | None = None
        self._dirty = True

    # the monitor's state, read by the view (startup_view.py) and the tests
    @property
    def state(self) -> ServerState:
        return self.shown().state

    def shown(self) -> DeploymentMonitor | ServerMonitor:
        """What the screen draws: a deployment's monitor (a row per node), or its one node's server."""
        return self.nodes_monitor() or self.mon

    @property
    def record(self) -> ServerRecord | None:
        return self.mon.record

    @property
    def phases(self) -> list[ServerPhase]:
        return self.mon.phases

    @property
    def verdict(self) -> Verdict | None:
        return self.mon.verdict

    @property
    def health(self) -> int | None:
        return self.mon.health

    @property
    def pids(self) -> list[int]:
        return self.mon.pids

    @property
    def message(self) -> str:
        return self.shown().message

    @property
    def found(self) -> ServerStatus | None:
        return self.mon.found

    @property
    def log_lines(self) -> list[str]:
        return list(self.mon.log_lines)

    def compose(self) -> ComposeResult:
        yield Steady(Text(""), id="startup-head")
        with Horizontal(id="startup-body"):
            yield Steady(Text(""), id="startup-phases")
            with Vertical(id="startup-verdict"):
                yield Steady(Text(""), id="startup-verdict-text")
        yield Static(Text("log"), id="startup-log-title")
        yield Steady(Text(""), id="startup-log")

    def on_mount(self) -> None:
        self.load_history()
        self.render_view()
        self.recognise()
        self.watch_records()

    # -- state ----------------------------------------------------------------------------------

    @property
    def profile(self) -> Profile | None:
        return self.ctx.profile

    def load_history(self) -> None:
        journal = self.ctx.journal
        if journal is None or self.profile is None:
            self.history = None
            return
        try:  # launches too: an attach's verdict is no startup and must not feed the ETA
            events = journal.records({"verdict", "launch"})
        except (OSError, ValueError, RemoteError):  # no history, no ETA: the pane still works
            logger.debug("reading the journal for the ETA failed", exc_info=True)
            events = []
        rec = self.mon.record  # the run shown is not its own history ("usually X over 1 run")
        if rec is not None:
            events = [
                e for e in events if not (isinstance(e, VerdictRecord) and verdict_of_run(e.outcome, rec))
            ]
        self.history = startup_history(events, self.profile.name)

    def apply(self, ev: StartupEvent | StopResult) -> None:
        """Fold one core event into the pane's state (tests feed events here directly)."""
        change = self.mon.apply(ev)
        if isinstance(ev, Launched):
            self._remember(ev.record)
        elif isinstance(ev, StopResult) and ev.stopped:
            self.known.pop(ev.profile, None)
        self._announce(change)

    def apply_status(self, st: ServerStatus) -> None:
        """Fold what `status` found on open into the pane: a running server shows RUNNING (READY
        when healthy) with its PID and log, without a launch or an attach (nothing is written)."""
        change = self.mon.apply_status(st)
        if (dmon := self.watched()) is not None and self.nodes_monitor() is None:
            dmon.state = self.mon.state  # one node: the target is as its server (its liveness watch)
        if self.mon.found is not None and st.record is not None:
            self._remember(st.record)
        self._announce(change)

    def _announce(self, change: StateChanged | None) -> None:
        """Tell the other panes (the state the screen shows: one node's own, e.g. EXITED)."""
        if change is not None:
            self.post_message(self.ServerStateChanged(self.state, change.record))
        self._dirty = True

    def _remember(self, record: ServerRecord, name: str | None = None) -> None:
        """A server seen running, for the quit note: the target's, by its leader (`stop -c PROFILE`)."""
        target = self.ctx.target()
        host = target.leader.host if target is not None else record.host
        path = str(self.ctx.profile_path) if self.ctx.profile_path else None
        name = name or (target.profile.name if target is not None else record.profile)
        self.known[name] = RunningServer(host, name, path, record.pid, record.port)

    def running_servers(self) -> list[RunningServer]:
        """Servers this pane saw running and did not see stop (the current profile's: by its state)."""
        current = self.profile.name if self.profile is not None else None
        out = [srv for name, srv in self.known.items() if name != current]
        dmon = self.watched()
        rec = self.mon.record if dmon is None else dmon.leader_record
        if current is not None and rec is not None and self.server_alive():
            self._remember(rec, current)
            out.append(self.known[current])
        return out

    def server_alive(self) -> bool:
        """The shown server is (as far as the pane knows) alive: a failed startup only while its
        processes are still there."""
        return self.shown().alive()

    def elapsed(self) -> float | None:
        return self.mon.elapsed(self.clock())

    def watched(self) -> DeploymentMonitor | None:
        """The monitor of the target's nodes (one ServerMonitor per node; a one-box profile's one
        node is `self.mon`), kept while the target's placement stays; None without a target."""
        target = self.ctx.target()
        dep = target.deployment if target is not None else None
        if dep is None:
            self._dmon = None
        elif self._dmon is None or self._dmon.deployment is not dep:
            self._dmon = DeploymentMonitor(dep)
        return self._dmon

    def nodes_monitor(self) -> DeploymentMonitor | None:
        """The monitor the screen draws as a row per node: a deployment's (None: one node's screen)."""
        dmon = self.watched()
        rows = dmon if dmon is not None and dmon.deployment.multi else None
        self.set_class(rows is not None, "-nodes")  # a row per node needs a wider table
        return rows

    @property
    def mon(self) -> ServerMonitor:
        """One node's server as the one-box screen draws it: the target's leader's (the only node of
        a one-box profile); without a target, a monitor of nothing."""
        dmon = self.watched()
        return dmon.nodes[dmon.deployment.leader.host] if dmon is not None else self._no_target

    def stacks_target(self, target: Target) -> tuple[Remote, Profile]:
        """Whose workers `k` shows: the selected node's on a deployment (the leader's by default), its
        own connection and node profile, so its record is found; one box: the host's."""
        node = target.node(self.ctx.selected or "") or target.leader
        return target.remote(node), node.profile

    def _set_state(self, dmon: DeploymentMonitor, state: ServerState) -> None:
        """The target's state, and (drawn on one node's screen) its one node's."""
        dmon.state = self.mon.state = state
        self._dirty = True

    async def _watch_live(self, target: Target, dmon: DeploymentMonitor) -> None:
        """After ready (or found running): every node's liveness; a node gone fails the target (its
        one node's screen says EXITED, a deployment's names the node), unless the box's record says
        another specdebug session stopped it (STOPPED, saying who) or relaunched it (followed)."""
        while True:
            changes = watch_deployment_liveness(
                dmon, target.remotes, liveness=server_control.liveness, interval=self.MONITOR_S
            )
            async for change in changes:
                if change is not None and change.state is ServerState.FAILED:
                    self.known.pop(target.profile.name, None)
                    self.notify(f"{target.profile.name}: {self.message}", severity="error")
                elif change is not None and change.state is ServerState.STOPPED:
                    self.known.pop(target.profile.name, None)
                    self.notify(f"{target.profile.name}: {self.message}", severity="warning")
                self._announce(change)
            newer = {h: m.relaunched for h, m in dmon.nodes.items() if m.relaunched is not None}
            if not newer or not await self._follow_run(target, dmon, newer, self.message):
                return

    async def _follow_run(
        self, target: Target, dmon: DeploymentMonitor, newer: dict[str, ServerRecord], note: str
    ) -> bool:
        """Watch a run another specdebug session launched (a bisection's trial, `launch` in a shell)
        from its launch: its PID, phases and health, nothing journaled (its launcher does that).
        True once it is ready (then its liveness is watched)."""
        records = dict(newer)
        for node in target.nodes:  # a deployment: every node's newer run, or none is followed
            if node.host not in records:
                rec = await record_now(target.remote(node), node.profile.name)
                if rec is None or rec.stopped_at is not None:
                    return False
                records[node.host] = rec
        dmon.launched(records)
        dmon.message = note
        for m in dmon.nodes.values():
            m.message = note
        if target.leader.host in records:
            self._remember(records[target.leader.host])
        self._dirty = True
        async for ev in watch_target(target, records, journal=None):
            self._announce(dmon.apply(ev))
        self.load_history()
        return dmon.state is ServerState.READY

    def watch_records(self) -> None:
        """Follow the profile's record on the box while this pane shows it: a run another session
        launches (a bisection's trial, `launch` in a shell) is followed from its launch."""
        self.run_worker(self._watch_records(), group="startup-records", exclusive=True, exit_on_error=False)

    async def _watch_records(self) -> None:
        target = self.ctx.target()
        if target is None or target.unreachable:
            return
        profile = target.profile
        async for rec in record_changes(target.leader_remote, target.leader.profile.name):
            now = self.ctx.target()
            if now is None or now.deployment is not target.deployment:
                return  # another profile or host: profile_changed started a watch of its own
            if rec is None or rec.stopped_at is not None:
                continue
            if not self.shown().nothing_running() or self.state is ServerState.CHECKING:
                continue  # our own launch or watch: it knows this run
            dmon = self.watched()
            if dmon is None or any(r.same_run(rec) for r in dmon.records().values()):
                continue  # the run this pane watched (a failed launch of ours)
            by = rec.launched_by.describe() if rec.launched_by else "who: not recorded"
            note = f"relaunched by another specdebug session ({by}): now PID {rec.pid}"
            self.notify(f"{profile.name}: {note}", severity="information")
            self._follow(target.leader.host, rec, note)

    @work(exclusive=True, group="startup-run", exit_on_error=False)
    async def _follow(self, host: str, rec: ServerRecord, note: str) -> None:
        target, dmon = self.ctx.target(), self.watched()
        if target is None or dmon is None:
            return
        try:
            if await self._follow_run(target, dmon, {host: rec}, note):
                await self._watch_live(target, dmon)
        except Exception as exc:
            dmon.message = self.mon.message = f"following the relaunch failed: {describe_error(exc)}"
        finally:
            self._dirty = True

    # -- rendering ------------------------------------------------------------------------------

    def redraw(self) -> None:
        self.render_view()

    CLOCK_S = 0.5
    _clock: Timer | None = None

    def _clock_tick(self) -> None:
        self._clock = None
        self._dirty = True

    def render_view(self) -> None:
        self._dirty = False
        if (self.state is ServerState.STARTING or self.found is not None) and self._clock is None:
            # elapsed / uptime move on: one redraw CLOCK_S from now, only while a clock is shown
            self._clock = self.set_timer(self.CLOCK_S, self._clock_tick)
        if (dmon := self.nodes_monitor()) is not None:  # a deployment: a phase row per node
            return self._show(*self.nodes_views(dmon, LOG_LINES_SHOWN))
        views = (self.head_text(), self.phases_view(), self.verdict_text())
        self._show(*views, self.log_lines[-LOG_LINES_SHOWN:])

    def _show(self, head: Text, phases: Any, verdict: Text, lines: list[str]) -> None:
        try:
            self.query_one("#startup-head", Static).update(head)
            self.query_one("#startup-phases", Static).update(phases)
            self.query_one("#startup-verdict-text", Static).update(verdict)
            self.query_one("#startup-log", Static).update(
                Text("\n".join(lines), no_wrap=True, overflow="ellipsis")
            )
        except NoMatches:  # not mounted yet
            pass

    # -- actions --------------------------------------------------------------------------------

    LAUNCH_CONFIRM_S = 15.0  # long enough to read who holds the GPUs

    def action_launch(self) -> None:
        """Launch, unless another server of this user or a bisection holds GPUs the launch would
        use: then say who and launch only on a second press within LAUNCH_CONFIRM_S."""
        if self.acting_target() is None:
            return
        asked = self._armed.pop("launch", None)
        self.launch_warning = ""
        self._dirty = True
        if asked is not None and time.monotonic() - asked < self.LAUNCH_CONFIRM_S:
            self._run("launch")
            return
        self._launch_if_free()

    @work(exclusive=True, group="startup-preflight", exit_on_error=False)
    async def _launch_if_free(self) -> None:
        target = self.ctx.target()
        if target is None:
            return
        try:
            require_launch(target, self.ctx.journal)
        except ReadOnlyError as exc:  # refused at once: no GPU check for a launch this seat cannot make
            self.notify(str(exc), severity="error")
            return
        try:
            found = await asyncio.wait_for(target_neighbours(target), NEIGHBOUR_CHECK_S)
        except Exception as exc:  # cannot tell: launch as before, and say the check could not be made
            logger.debug("the GPU neighbour check failed", exc_info=True)
            self.notify(f"could not check who else holds the GPUs: {describe_error(exc)}", severity="warning")
            found = []
        if not found:
            self._run("launch")
            return
        self._armed["launch"] = time.monotonic()
        binding = next(b for b in self.BINDINGS if isinstance(b, Binding) and b.action == "launch")
        key = (self.ctx.keys_of(binding) or [binding.key])[0]
        again = f"press {key} again" + (" (or pick it in the palette again)" if self.from_palette else "")
        text = "\n".join(n.sentence for n in found)
        warning = (
            f"{text}\n{again} within {self.LAUNCH_CONFIRM_S:.0f} s to launch {target.profile.name} anyway"
        )
        self.launch_warning = warning  # on the screen (the head) until the launch or the window ends
        self.set_timer(self.LAUNCH_CONFIRM_S, self._warning_over)
        self._dirty = True
        self.notify(warning, severity="warning", timeout=self.LAUNCH_CONFIRM_S)

    def _warning_over(self) -> None:
        asked = self._armed.get("launch")
        if asked is None or time.monotonic() - asked >= self.LAUNCH_CONFIRM_S - 0.05:
            self.launch_warning = ""
            self._dirty = True

    CONFIRM_S = 3.0

    def _confirmed(self, action: str, what: str) -> bool:
        """A running server costs minutes to bring back: stop/restart need a second press within
        CONFIRM_S (the key, or the palette entry again; the palette goes through here too)."""
        if self.shown().nothing_running():
            return True
        now = time.monotonic()
        last = self._armed.get(action)
        if last is not None and now - last < self.CONFIRM_S:
            self._armed.pop(action, None)
            return True
        self._armed[action] = now
        self.notify(self.confirm_text(action, what), severity="warning", timeout=self.CONFIRM_S)
        return False

    def confirm_text(self, action: str, what: str) -> str:
        binding = next((b for b in self.BINDINGS if isinstance(b, Binding) and b.action == action), None)
        key = (self.ctx.keys_of(binding) or [binding.key])[0] if binding else action
        again = f"press {key} again" + (" (or pick it in the palette again)" if self.from_palette else "")
        name = self.profile.name if self.profile is not None else "?"
        return f"{again} within {self.CONFIRM_S:.0f} s to {what} {name}"

    def action_restart(self) -> None:
        if self.acting_target() is not None and self._confirmed("restart", "restart"):
            self._run("restart")

    def action_attach(self) -> None:
        if self.acting_target() is not None:
            self._run("attach")

    def action_stop(self) -> None:
        if self.acting_target() is not None and self._confirmed("stop", "stop"):
            self._stop()

    def action_stacks(self) -> None:  # a deployment's: the selected node's (the leader's by default)
        if (target := self.acting_target()) is not None:
            remote, profile = self.stacks_target(target)
            self.run_worker(open_stacks(self.app, remote, profile), group="startup-stacks", exclusive=True)

    @work(exclusive=True, group="startup-run", exit_on_error=False)
    async def _run(self, mode: str) -> None:
        """launch | restart | attach every node of the target (the `launch|restart|attach` verbs'
        calls), watch them as one, then their liveness."""
        target, dmon = self.ctx.target(), self.watched()
        if target is None or dmon is None:  # acting_target said so already
            return
        journal = self.ctx.journal
        self.load_history()
        try:
            if mode == "restart":
                self._set_state(dmon, ServerState.STOPPING)
                self._stopped(await stop_target(target, journal=journal))
            self.reset_run(ServerState.LAUNCHING)
            launched: dict[str, Launching] = {}
            if mode == "attach":  # a read-only seat observes the driver's servers: nothing written
                journal = None if self.ctx.readonly else journal
                records = await self._adopt(target, journal)
                deadline: float | None = self.clock() + target.profile.ready.timeout_s
            else:
                launched = await launch_target(target, journal=journal)
                records, deadline = records_of(launched), None
            dmon.launched(records)
            if target.leader.host in records:
                self._remember(records[target.leader.host])
            self._dirty = True
            async for ev in watch_target(target, records, deadline=deadline, journal=journal):
                self._announce(dmon.apply(ev))
            await finish_launches(launched)  # the drift snapshots, journaled with the launches
            self.load_history()
            if dmon.state is ServerState.READY:
                await self._watch_live(target, dmon)
        except LaunchRefused as exc:
            self._set_state(dmon, ServerState.IDLE)
            dmon.message = self.mon.message = str(exc)
            error_toast(self.app, exc)  # with its hint: the port to change, the stop command
            if exc.record is not None:  # the profile's server already runs: show it as if found
                self.call_later(self.recognise)
        except Exception as exc:
            if self.state in (ServerState.LAUNCHING, ServerState.STARTING):
                self._set_state(dmon, ServerState.FAILED)
            dmon.message = self.mon.message = describe_error(exc)
            self.notify(f"{mode} failed: {describe_error(exc)}", severity="error")
        finally:
            self._dirty = True

    async def _adopt(self, target: Target, journal: EventJournal | None) -> dict[str, ServerRecord]:
        """Every node's running server adopted (`attach`), or on a read-only seat only read."""
        if not self.ctx.readonly:
            return await attach_target(target, journal=journal)
        return {n.host: await observe(target.remote(n), n.profile) for n in target.nodes}

    def _stopped(self, result: DeploymentStop) -> None:
        dmon = self.watched()
        if dmon is not None:
            self._announce(dmon.stopped(result))
        if result.stopped and self.profile is not None:
            self.known.pop(self.profile.name, None)

    def profile_changed(self, profile: Profile) -> None:
        """Another profile was picked: this pane's phases and verdict belonged to the old one."""
        self.workers.cancel_group(self, "startup-run")
        if self.record is not None and not self.server_alive():
            self.known.pop(self.record.profile, None)  # only live servers are worth the quit note
        self.reset_run(ServerState.IDLE)
        self.mon.log_lines.clear()
        self.load_history()
        self.recognise()
        self.watch_records()

    def journal_changed(self, events: list[JournalRecord]) -> None:
        """Another seat acted on this profile's server (a `box:NAME` session's journal): show its
        stop as a stop by that seat, and pick a relaunch up at once (read-only: status, no attach)."""
        name = self.profile.name if self.profile is not None else None
        for ev in events:
            if name is None or profile_of(ev) != name:
                continue
            by = (ev.by or "another seat")[:64]
            if isinstance(ev, StopRecord):
                self.workers.cancel_group(self, "startup-run")  # its liveness watch would say "crashed"
                result = ev.stop.model_copy()
                self.apply(result)
                self.mon.message = f"stopped by {by}" + (f": {result.message}" if result.message else "")
            elif isinstance(ev, LaunchRecord | VerdictRecord) and self.state not in (
                ServerState.LAUNCHING,
                ServerState.STARTING,
                ServerState.CHECKING,
            ):
                self.workers.cancel_group(self, "startup-run")
                self.reset_run(ServerState.IDLE)
                self.mon.message = f"launched by {by}" if isinstance(ev, LaunchRecord) else ""
                self.recognise()
        self._dirty = True

    def recognise(self) -> None:
        """Is the profile's server already running (state record + liveness + health)?  Asked on
        open and after a profile switch, through core `status`: reads only, so a read-only seat
        may ask too, and nothing is journaled."""
        if self.ctx.target() is None or self.state is not ServerState.IDLE:
            return  # a launch (the demo's, or a quick key) already runs: it knows better
        self.reset_run(ServerState.CHECKING)
        self._recognise()

    @work(exclusive=True, group="startup-run", exit_on_error=False)
    async def _recognise(self) -> None:
        """`status` on every node of the target (reads only); a running one is watched."""
        target, dmon = self.ctx.target(), self.watched()
        if target is None or dmon is None:
            return
        try:
            if target.unreachable:
                raise LookupError(f"no connection to {', '.join(target.unreachable)} here")
            for node in target.nodes:
                await target.remote(node).wait_connected(CONNECT_WAIT_S)
            st = await target_status(target)
        except Exception as exc:  # a down host is the header's news; the pane just cannot tell
            if self.state is ServerState.CHECKING:
                self.reset_run(ServerState.IDLE)
                self.mon.message = dmon.message = (
                    f"could not check for a running server: {describe_error(exc)}"
                )
            return
        if target.profile is not self.profile:
            return
        self._announce(dmon.apply_status(st))
        if dmon.leader_record is not None and self.state in (ServerState.READY, ServerState.RUNNING):
            self._remember(dmon.leader_record)
        if dmon.state in (ServerState.READY, ServerState.RUNNING):
            await self._watch_live(target, dmon)

    MONITOR_S = 0.5  # liveness after ready: a killed main process shows within about this (issue 25)

    def reset_run(self, state: ServerState) -> None:
        """A new run (or none) of the target: every node's state forgotten."""
        dmon = self.watched()
        (dmon or self.mon).reset_run(state)
        self._dirty = True

    @work(exclusive=True, group="startup-run", exit_on_error=False)
    async def _stop(self) -> None:
        """Every node of the target stopped at once (the `stop` verb's call)."""
        target, dmon = self.ctx.target(), self.watched()
        if target is None or dmon is None:  # acting_target said so already
            return
        self._set_state(dmon, ServerState.STOPPING)
        try:
            result = await stop_target(target, journal=self.ctx.journal)
            self._stopped(result)
            self.notify(result.message, severity="information" if result.stopped else "error")
        except Exception as exc:
            self._set_state(dmon, ServerState.FAILED)
            self.notify(f"stop failed: {describe_error(exc)}", severity="error")
        finally:
            self._dirty = True
