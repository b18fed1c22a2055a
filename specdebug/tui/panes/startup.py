"""Startup pane: launch/stop/restart/attach the profile's server and watch it come up.

Shows the startup phases as a checklist with durations, elapsed time and an ETA from earlier
startups of the same profile (journal verdicts), the last log lines, and the verdict with its
reason.  All the work is `specdebug.core.startup` (the same calls as the headless verbs); the pane
only applies the events it streams.  Log text is rendered as plain `Text`, never markup.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from rich.table import Table
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
from specdebug.tui.pane import Pane

# phases shown as pending before they happen (per kind); others appear when seen
EXPECTED_PHASES = {
    "sglang": ["launch", "args", "load_weights", "kv_cache", "cuda_graph", "http_server", "warmup", "ready"],
    "vllm": ["launch", "args", "engine_init", "load_weights", "kv_cache", "http_server", "ready"],
    "custom": ["launch", "ready"],
}
LOG_LINES_SHOWN = 14


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


class StartupPane(Pane):
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

    # -- state ----------------------------------------------------------------------------------

    @property
    def profile(self) -> Any:
        return self.ctx.profile

    def load_history(self) -> None:
        journal = self.ctx.journal
        if journal is None or self.profile is None:
            self.history = None
            return
        try:
            events = journal.events({"verdict"})
        except Exception:
            events = []
        self.history = startup.startup_history(events, self.profile.name)

    def apply(self, ev: Any) -> None:
        """Fold one core event into the pane's state (tests feed events here directly)."""
        if isinstance(ev, Launched):
            self.record = ev.record
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
            self.post_message(self.ServerEvent("stopped"))
        self._dirty = True

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
        if self.state == "starting":
            self._dirty = True

    def render_view(self) -> None:
        self._dirty = False
        try:
            self.query_one("#startup-head", Static).update(self.head_text())
            self.query_one("#startup-phases", Static).update(self.phases_table())
            self.query_one("#startup-verdict-text", Static).update(self.verdict_text())
            lines = list(self.log_lines)[-LOG_LINES_SHOWN:]
            self.query_one("#startup-log", Static).update(
                Text("\n".join(lines), no_wrap=True, overflow="ellipsis")
            )
        except NoMatches:  # not mounted yet
            pass

    def head_text(self) -> Text:
        text = Text()
        if self.profile is None:
            text.append("no profile: start specdebug with -c PROFILE", style="yellow")
            return text
        text.append(self.profile.name, style="bold cyan")
        text.append(f"  port {self.profile.server.port}  ")
        style = {
            "ready": "bold green",
            "failed": "bold red",
            "starting": "bold yellow",
            "launching": "yellow",
            "stopping": "yellow",
            "stopped": "dim",
            "exited": "bold red",
            "running": "green",
        }.get(self.state, "dim")
        text.append(self.state.upper(), style=style)
        elapsed = self.elapsed()
        if elapsed is not None:
            text.append(f"  elapsed {_fmt_s(elapsed)}")
        if self.history is not None:
            if self.state == "starting" and elapsed is not None:
                text.append(f"  ETA {_fmt_s(self.history.eta(elapsed))}", style="cyan")
            text.append(
                f"  (usually {_fmt_s(self.history.expected_total_s)} over {self.history.runs} "
                f"run{'s' if self.history.runs != 1 else ''})",
                style="dim",
            )
        if self.record is not None:
            text.append(f"\nPID {self.record.pid}  PGID {self.record.pgid}  processes {len(self.pids)}  ")
            text.append(f"health {self.health if self.health is not None else '-'}  ")
            text.append(f"log {self.record.log_file}", style="dim")
        elif self.state == "idle":
            text.append("\nl launch  a attach  s stop  R restart", style="dim")
        return text

    def phases_table(self) -> Table:
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=False)
        table.add_column("", width=1)
        table.add_column("phase", min_width=16)
        table.add_column("at", justify="right", min_width=7)
        table.add_column("took", justify="right", min_width=7)
        table.add_column("usually at", justify="right", min_width=7)
        kind = self.profile.server.kind if self.profile is not None else "custom"
        seen = {p.name: p for p in self.phases}
        names = [p.name for p in self.phases]
        expected = list(self.history.phase_starts) if self.history else EXPECTED_PHASES.get(kind, [])
        for name in expected:
            if name not in seen:
                names.append(name)
        if "ready" in names:  # ready always last
            names = [n for n in names if n != "ready"] + ["ready"]
        current = self.phases[-1].name if self.phases else None
        for i, name in enumerate(names):
            p = seen.get(name)
            usual = self.history.phase_starts.get(name) if self.history else None
            if p is None:
                if self.verdict is not None and self.verdict.verdict == "ready":
                    continue  # this server never printed that milestone
                table.add_row(
                    Text("·", style="dim"), Text(name, style="dim"), "", "", Text(_fmt_s(usual), style="dim")
                )
                continue
            nxt = next((seen[n] for n in names[i + 1 :] if n in seen), None)
            if nxt is not None:
                took: float | None = nxt.at - p.at
            elif self.verdict is not None:
                took = self.verdict.at - p.at if name != "ready" else None
            else:
                took = self.clock() - p.at if self.state == "starting" else None
            failed_here = self.verdict is not None and self.verdict.verdict == "failed" and name == current
            if failed_here:
                mark = Text("✗", style="bold red")
            elif name == current and self.state == "starting":
                mark = Text("▶", style="bold yellow")
            else:
                mark = Text("✓", style="green")
            table.add_row(
                mark, Text(name), _fmt_s(p.elapsed_s), _fmt_s(took), Text(_fmt_s(usual), style="dim")
            )
        return table

    def verdict_text(self) -> Text:
        v = self.verdict
        text = Text(no_wrap=True, overflow="ellipsis")
        if v is None:
            if self.message:
                text.append(self.message)
            return text
        if v.verdict == "ready":
            text.append(f"READY after {_fmt_s(v.elapsed_s)}", style="bold green")
            return text
        text.append(f"FAILED after {_fmt_s(v.elapsed_s)} in phase {v.last_phase}", style="bold red")
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
        """A running server costs minutes to bring back: stop/restart need the key pressed twice."""
        if self.state not in ("ready", "running", "starting"):
            return True
        now = time.monotonic()
        last = self._armed.get(action)
        if last is not None and now - last < self.CONFIRM_S:
            self._armed.pop(action, None)
            return True
        self._armed[action] = now
        key = next((b.key for b in self.BINDINGS if isinstance(b, Binding) and b.action == action), action)
        self.notify(
            f"press {key} again to {what} {self.profile.name}", severity="warning", timeout=self.CONFIRM_S
        )
        return False

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
            self.state = "running" if exc.record is not None else "idle"
            self.message = str(exc)
            self.notify(str(exc), severity="error")
        except Exception as exc:
            self.state = "failed" if self.state in ("launching", "starting") else self.state
            self.message = f"{type(exc).__name__}: {exc}"
            self.notify(f"{mode} failed: {exc}", severity="error")
        finally:
            self._dirty = True

    def server_event(self, kind: str) -> None:
        """Another profile was picked: this pane's phases and verdict belonged to the old one."""
        if kind == "profile":
            self.workers.cancel_group(self, "startup-run")
            self.reset_run("idle")
            self.pids, self.health = [], None
            self.load_history()

    MONITOR_S = 3.0

    async def _monitor(self, remote: Any, record: Any, profile: Any) -> None:
        """After ready, keep watching: a server that dies later must not keep saying READY."""
        while self.state == "ready":
            await asyncio.sleep(self.MONITOR_S)
            try:
                pids, health = await startup.liveness(remote, record, profile)
            except RemoteError:
                continue  # connection trouble is the header's news; try again
            if self.state != "ready":
                return  # stopped or relaunched meanwhile
            self.pids, self.health = pids, health
            if not pids:
                self.state = "exited"
                self.message = "the server's process group is gone (crashed or killed outside specdebug)"
                self.notify(f"{profile.name}: server exited", severity="error")
                self.post_message(self.ServerEvent("stopped"))
            self._dirty = True

    def reset_run(self, state: str) -> None:
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
            self.notify(f"stop failed: {exc}", severity="error")
        finally:
            self._dirty = True
