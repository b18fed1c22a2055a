"""Startup pane: launch/stop/restart/attach the profile's server and watch it come up.

Shows the startup phases as a checklist with durations, elapsed time and an ETA from earlier
startups of the same profile (journal verdicts), the last log lines, and the verdict with its
reason (rendering: startup_view.py).  On open it recognises the profile's server if it already
runs.  All the work is `specdebug.core.startup` (the same calls as the headless verbs); the pane
only applies the events it streams.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Static

from specdebug.core import startup
from specdebug.core.observe import observe
from specdebug.core.sanitize import visible
from specdebug.core.startup import (
    GroupChange,
    HealthChange,
    Launched,
    LogLine,
    ServerPhase,
    StartupHistory,
    StopResult,
    Verdict,
)
from specdebug.remote.api import RemoteError
from specdebug.tui.pane import Pane, RunningServer, describe_error
from specdebug.tui.panes.startup_view import StartupView

LOG_LINES_SHOWN = 14
CONNECT_WAIT_S = 30.0
# states in which no server of the profile is known to run: stop/restart need no second press
NOTHING_RUNNING = ("idle", "stopped", "failed", "exited")


class StartupPane(StartupView, Pane):
    PANE_ID = "startup"
    TITLE = "Startup"
    BINDINGS = [
        Binding("l", "launch", "Launch", id="startup.launch"),
        Binding("s", "stop", "Stop", id="startup.stop"),
        Binding("R", "restart", "Restart", id="startup.restart"),
        Binding("a", "attach", "Attach", id="startup.attach"),
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
    """

    def __init__(self, ctx, **kwargs) -> None:
        super().__init__(ctx, **kwargs)
        self.clock = time.time
        self.known: dict[str, RunningServer] = {}  # profile -> server seen running (for the quit note)
        self.reset()

    def reset(self) -> None:
        self.state = "idle"  # idle, launching, starting, ready, failed, stopping, stopped
        self.record: Any = None
        self.phases: list[ServerPhase] = []
        self.verdict: Verdict | None = None
        self.health: int | None = None
        self.pids: list[int] = []
        self._armed: dict[str, float] = {}  # action -> when its first press asked for confirmation
        self.log_lines: deque[str] = deque(maxlen=500)
        self.message = ""
        self.history: StartupHistory | None = None
        self.found: startup.ServerStatus | None = None  # running when we opened: not watched from launch
        self._dirty = True

    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="startup-head")
        with Horizontal(id="startup-body"):
            yield Static(Text(""), id="startup-phases")
            with Vertical(id="startup-verdict"):
                yield Static(Text(""), id="startup-verdict-text")
        yield Static(Text("log"), id="startup-log-title")
        yield Static(Text(""), id="startup-log")

    def on_mount(self) -> None:
        self.load_history()
        self.render_view()
        self.set_interval(0.1, self._refresh_if_dirty)
        self.set_interval(0.5, self._tick)
        self.recognise()

    # -- state ----------------------------------------------------------------------------------

    @property
    def profile(self) -> Any:
        return self.ctx.profile

    def load_history(self) -> None:
        journal = self.ctx.journal
        if journal is None or self.profile is None:
            self.history = None
            return
        try:  # launches too: an attach's verdict is no startup and must not feed the ETA
            events = journal.events({"verdict", "launch"})
        except Exception:
            events = []
        self.history = startup.startup_history(events, self.profile.name)

    def apply(self, ev: Any) -> None:
        """Fold one core event into the pane's state (tests feed events here directly)."""
        if isinstance(ev, Launched):
            self.record = ev.record
            self.found = None
            self._remember(ev.record)
            self.state = "starting"
            self.phases = [ServerPhase(name="launch", at=ev.record.started_at, elapsed_s=0.0)]
            self.verdict = None
            self.log_lines.clear()
        elif isinstance(ev, ServerPhase):
            self.phases.append(ev)
        elif isinstance(ev, LogLine):
            self.log_lines.append(visible(ev.text, tab=" "))
        elif isinstance(ev, HealthChange):
            self.health = ev.status
        elif isinstance(ev, GroupChange):
            self.pids = ev.pids
        elif isinstance(ev, Verdict):
            self.verdict = ev
            self.phases = list(ev.phases)
            self.state = ev.verdict
            self.post_message(self.ServerEvent(ev.verdict))
        elif isinstance(ev, StopResult):
            self.state = "stopped" if ev.stopped else "failed"
            self.message = ev.message
            if ev.stopped:
                self.pids, self.health = [], None
                self.known.pop(ev.profile, None)
            self.post_message(self.ServerEvent("stopped"))
        self._dirty = True

    def apply_status(self, st: startup.ServerStatus) -> None:
        """Fold what `status` found on open into the pane: a running server shows RUNNING (READY
        when healthy) with its PID and log, without a launch or an attach (nothing is written)."""
        self.reset_run("idle")
        if st.state == "running" and st.record is not None:
            self.record, self.pids, self.health, self.found = st.record, list(st.pids), st.health, st
            self._remember(st.record)
            self.state = "ready" if st.health == 200 else "running"
            if self.state == "ready":
                self.post_message(self.ServerEvent("ready"))
        elif st.state == "exited" and st.record is not None:
            self.message = f"the last server (PID {st.record.pid}) is gone: it exited or was killed"
        if self.state == "idle" and st.port_holder is not None and st.port_holder.listening:
            self.message = (self.message + "\n" if self.message else "") + st.port_holder.describe()
        self._dirty = True

    def _remember(self, record: Any) -> None:
        host = self.ctx.selected or getattr(self.ctx.remote(), "name", "") or record.host
        path = str(self.ctx.profile_path) if self.ctx.profile_path else None
        self.known[record.profile] = RunningServer(host, record.profile, path, record.pid, record.port)

    def running_servers(self) -> list[RunningServer]:
        """Servers this pane saw running and did not see stop (the current profile's: by its state)."""
        current = self.profile.name if self.profile is not None else None
        out = [srv for name, srv in self.known.items() if name != current]
        if current in self.known and self.server_alive():
            out.append(self.known[current])
        return out

    def server_alive(self) -> bool:
        """The shown server is (as far as the pane knows) alive: a failed startup only while its
        processes are still there."""
        return self.state in ("ready", "running", "starting", "stopping") or (
            self.state == "failed" and bool(self.pids)
        )

    def elapsed(self) -> float | None:
        if self.verdict is not None:
            return self.verdict.elapsed_s
        if self.record is None:
            return None
        return max(0.0, self.clock() - self.record.started_at)

    # -- rendering ------------------------------------------------------------------------------

    def _refresh_if_dirty(self) -> None:
        if self._dirty:
            self.render_view()

    def _tick(self) -> None:
        if self.state == "starting" or self.found is not None:  # elapsed / uptime move on
            self._dirty = True

    def render_view(self) -> None:
        self._dirty = False
        try:
            self.query_one("#startup-head", Static).update(self.head_text())
            self.query_one("#startup-phases", Static).update(self.phases_view())
            self.query_one("#startup-verdict-text", Static).update(self.verdict_text())
            lines = list(self.log_lines)[-LOG_LINES_SHOWN:]
            self.query_one("#startup-log", Static).update(
                Text("\n".join(lines), no_wrap=True, overflow="ellipsis")
            )
        except NoMatches:  # not mounted yet
            pass

    # -- actions --------------------------------------------------------------------------------

    def _ready_to_act(self) -> Any:
        remote = self.ctx.remote()
        if remote is None:
            self.notify("no host connected", severity="error")
            return None
        if self.profile is None:
            self.notify("no profile loaded: start specdebug with -c PROFILE", severity="error")
            return None
        return remote

    def action_launch(self) -> None:
        if self._ready_to_act() is not None:
            self._run("launch")

    CONFIRM_S = 3.0

    def _confirmed(self, action: str, what: str) -> bool:
        """A running server costs minutes to bring back: stop/restart need a second press within
        CONFIRM_S (the key, or the palette entry again; the palette goes through here too)."""
        if self.state in NOTHING_RUNNING:
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
        keys = getattr(self.app, "_keymap", {}).get(binding.id, binding.key) if binding else action
        key = keys.split(",")[0]
        again = f"press {key} again" + (" (or pick it in the palette again)" if self.from_palette else "")
        return f"{again} within {self.CONFIRM_S:.0f} s to {what} {self.profile.name}"

    def action_restart(self) -> None:
        if self._ready_to_act() is not None and self._confirmed("restart", "restart"):
            self._run("restart")

    def action_attach(self) -> None:
        if self._ready_to_act() is not None:
            self._run("attach")

    def action_stop(self) -> None:
        if self._ready_to_act() is not None and self._confirmed("stop", "stop"):
            self._stop()

    @work(exclusive=True, group="startup-run", exit_on_error=False)
    async def _run(self, mode: str) -> None:
        remote = self.ctx.remote()
        if remote is None:  # _ready_to_act said so already
            return
        profile = self.profile
        journal = self.ctx.journal
        self.load_history()
        try:
            if mode == "restart":
                self.state = "stopping"
                self._dirty = True
                self.apply(await startup.stop(remote, profile, journal=journal))
            self.reset_run("launching")
            if mode == "attach":
                if self.ctx.readonly:  # observe the driver's server: its record is read, nothing written
                    journal, record = None, await observe(remote, profile)
                else:
                    record = await startup.attach(remote, profile, journal=journal)
                self.apply(Launched(record=record))
                deadline = self.clock() + profile.ready.timeout_s
                events = startup.watch(remote, record, profile, journal=journal, deadline=deadline)
            else:
                events = startup.launch_and_watch(remote, profile, journal=journal)
            async for ev in events:
                self.apply(ev)
            self.load_history()
            if self.state == "ready" and self.record is not None:
                await self._monitor(remote, self.record, profile)
        except startup.LaunchRefused as exc:
            self.state = "idle"
            self.message = str(exc)
            self.notify(str(exc), severity="error")
            if exc.record is not None:  # the profile's server already runs: show it as if found
                self.call_later(self.recognise)
        except Exception as exc:
            self.state = "failed" if self.state in ("launching", "starting") else self.state
            self.message = describe_error(exc)
            self.notify(f"{mode} failed: {describe_error(exc)}", severity="error")
        finally:
            self._dirty = True

    def server_event(self, kind: str) -> None:
        """Another profile was picked: this pane's phases and verdict belonged to the old one."""
        if kind == "profile":
            self.workers.cancel_group(self, "startup-run")
            if self.record is not None and not self.server_alive():
                self.known.pop(self.record.profile, None)  # only live servers are worth the quit note
            self.reset_run("idle")
            self.log_lines.clear()
            self.pids, self.health = [], None
            self.load_history()
            self.recognise()

    def recognise(self) -> None:
        """Is the profile's server already running (state record + liveness + health)?  Asked on
        open and after a profile switch, through core `status`: reads only, so a read-only seat
        may ask too, and nothing is journaled."""
        if self.profile is None or self.ctx.remote() is None or self.state != "idle":
            return  # a launch (the demo's, or a quick key) already runs: it knows better
        self.reset_run("checking")
        self._recognise()

    @work(exclusive=True, group="startup-run", exit_on_error=False)
    async def _recognise(self) -> None:
        remote, profile = self.ctx.remote(), self.profile
        if remote is None:
            return
        try:
            await remote.wait_connected(CONNECT_WAIT_S)
            st = await startup.status(remote, profile)
        except Exception as exc:  # a down host is the header's news; the pane just cannot tell
            if self.state == "checking":
                self.reset_run("idle")
                self.message = f"could not check for a running server: {describe_error(exc)}"
            return
        if profile is not self.profile:
            return
        self.apply_status(st)
        if self.state in ("ready", "running") and self.record is not None:
            await self._monitor(remote, self.record, profile)

    MONITOR_S = 3.0

    async def _monitor(self, remote: Any, record: Any, profile: Any) -> None:
        """After ready (or found running), keep watching: a server that dies later must not keep
        saying READY, and one found still starting turns READY when its health answers."""
        while self.state in ("ready", "running"):
            await asyncio.sleep(self.MONITOR_S)
            try:
                pids, health = await startup.liveness(remote, record, profile)
            except RemoteError:
                continue  # connection trouble is the header's news; try again
            if self.state not in ("ready", "running"):
                return  # stopped or relaunched meanwhile
            self.pids, self.health = pids, health
            if not pids:
                self.state = "exited"
                self.found = None
                self.known.pop(profile.name, None)
                self.message = "the server's process group is gone (crashed or killed outside specdebug)"
                self.notify(f"{profile.name}: server exited", severity="error")
                self.post_message(self.ServerEvent("stopped"))
            elif self.state == "running" and health == 200:
                self.state = "ready"
                self.post_message(self.ServerEvent("ready"))
            self._dirty = True

    def reset_run(self, state: str) -> None:
        self.found = None
        self.record = None
        self.phases = []
        self.verdict = None
        self.health = None
        self.pids = []
        self.message = ""
        self.state = state
        self._dirty = True

    @work(exclusive=True, group="startup-run", exit_on_error=False)
    async def _stop(self) -> None:
        self.state = "stopping"
        self._dirty = True
        try:
            remote = self.ctx.remote()
            if remote is None:  # _ready_to_act said so already
                return
            result = await startup.stop(remote, self.profile, journal=self.ctx.journal)
            self.apply(result)
            self.notify(result.message, severity="information" if result.stopped else "error")
        except Exception as exc:
            self.state = "failed"
            self.notify(f"stop failed: {describe_error(exc)}", severity="error")
        finally:
            self._dirty = True
