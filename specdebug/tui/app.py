"""The Textual app: header with connection states, one tab per pane, footer, palette, help.

The app owns the remotes (one Connection per host), the journal and the layout; panes get an
AppContext and act through core services.  Every binding has an id, remappable from
~/.config/specdebug/keymap.toml; every action is in the command palette; a worker failure
becomes a notification, never a crash.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.css.query import NoMatches
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane, Tabs
from textual.worker import Worker, WorkerState

from specdebug.capability import ReadOnlyError, hold_readonly
from specdebug.remote.api import ConnState, ConnStatus
from specdebug.remote.hostkeys import HostKeyInfo, KeyDecision
from specdebug.tui.context import AppContext
from specdebug.tui.pane import Pane, RunningServer, describe_error
from specdebug.tui.panes.bench import BenchPane
from specdebug.tui.panes.bisect import BisectPane
from specdebug.tui.panes.env import EnvPane
from specdebug.tui.panes.hosts import HostsPane
from specdebug.tui.panes.logs import LogsPane
from specdebug.tui.panes.startup import StartupPane
from specdebug.tui.screens.help import keys_label
from specdebug.tui.settings import KEYMAP_FILE, LAYOUT_DIRS, KeymapFile, find_layout, load_keymap
from specdebug.tui.widgets.seats import JournalFollower, SeatsBar, SeatsProvider

__all__ = ["KEYMAP_FILE", "LAYOUT_DIRS", "KeymapFile", "SpecdebugApp", "find_layout", "load_keymap"]

PANES: list[type[Pane]] = [HostsPane, StartupPane, LogsPane, EnvPane, BenchPane, BisectPane]  # tab order
log = logging.getLogger(__name__)


def load_panes() -> list[type[Pane]]:
    return list(PANES)


class ActionsProvider(Provider):
    """Every binding of the app and of every pane, searchable in the command palette."""

    def _entries(self):
        app = self.app
        assert isinstance(app, SpecdebugApp)
        seen = set()
        sources = [(app, "app")] + [(p, p.TITLE) for p in app.query(Pane)]
        for node, scope in sources:
            for binding in node.BINDINGS:
                if (
                    not isinstance(binding, Binding)
                    or not binding.description
                    or (scope, binding.action) in seen
                ):
                    continue
                seen.add((scope, binding.action))
                text = f"{scope}: {binding.description}"
                if isinstance(node, Pane) and app.ctx.readonly and binding.action in node.MUTATING_ACTIONS:
                    text += " (disabled: read-only)"
                yield text, binding, node

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, binding, node in self._entries():
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(text), partial(self._run, node, binding), help=binding.id or ""
                )

    async def discover(self) -> Hits:
        for text, binding, node in self._entries():
            yield Hit(1.0, text, partial(self._run, node, binding), help=binding.id or "")

    async def _run(self, node, binding: Binding) -> None:
        """Run as the key would: read-only refusals and second-press confirmations included."""
        if isinstance(node, Pane):
            assert isinstance(self.app, SpecdebugApp)
            self.app.show_pane(node.PANE_ID)
            if node.is_refused(binding.action):
                return
            node.from_palette = True
        try:
            await node.run_action(binding.action)
        finally:
            if isinstance(node, Pane):
                node.from_palette = False


class SpecdebugApp(App):
    TITLE = "specdebug"
    COMMANDS = App.COMMANDS | {ActionsProvider, SeatsProvider}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("ctrl+c", "quit", "Quit", id="app.quit_ctrl_c", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", id="app.help"),
        Binding("ctrl+l", "cycle_layout", "Layout", id="app.layout"),
        Binding("P", "pick_profile", "Profile", id="app.profile"),
        Binding("1", "show_tab(0)", "Hosts", id="app.tab1", show=False),
        Binding("2", "show_tab(1)", "Startup", id="app.tab2", show=False),
        Binding("3", "show_tab(2)", "Logs", id="app.tab3", show=False),
        Binding("4", "show_tab(3)", "Env", id="app.tab4", show=False),
        Binding("5", "show_tab(4)", "Bench", id="app.tab5", show=False),
        Binding("6", "show_tab(5)", "Bisect", id="app.tab6", show=False),
    ]
    CSS = """
    TabbedContent { height: 1fr; }
    #status-line { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(
        self,
        ctx: AppContext,
        *,
        layout: str = "default",
        keymap: dict[str, str] | None = None,
        owns_remotes: bool = True,
        panes: list[type[Pane]] | None = None,
    ) -> None:
        self.layout_path = find_layout(layout)
        super().__init__(css_path=[self.layout_path])
        self.ctx = ctx
        self.layout_name = layout
        self._keymap = keymap if keymap is not None else {}
        ctx.keymap = self._keymap  # panes read it through ctx.keys_of
        self._owns_remotes = owns_remotes
        self.pane_classes = panes if panes is not None else load_panes()
        self._unsubscribe: list[Callable[[], None]] = []  # status listeners, removed on unmount
        self.autorun: list[str] = []  # binding ids to run once mounted (the demo launches the sim)
        self.still_running: list[RunningServer] = []  # servers left running at quit (printed after exit)
        if ctx.readonly:
            self.sub_title = "read-only"
            hold_readonly(*ctx.remotes.values(), ctx.journal)  # core refuses writes through them

    # ---- composition -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(id="status-line")
        yield SeatsBar(readonly=self.ctx.readonly)  # shown only inside a `specdebug pair` session
        yield JournalFollower(self.ctx)  # live updates from a journal kept on the box
        with TabbedContent(id="tabs"):
            for cls in self.pane_classes:
                with TabPane(cls.TITLE, id=f"tab-{cls.PANE_ID}"):
                    yield cls(self.ctx)
        yield Footer()

    async def on_mount(self) -> None:
        for problem in self._keymap.problems if isinstance(self._keymap, KeymapFile) else ():
            self.notify(problem, severity="warning", timeout=10)
        if self._keymap:
            try:
                self.set_keymap(self._keymap)
            except Exception as exc:  # a key string Textual cannot use: report, keep the defaults
                self.notify(f"keymap ignored: {exc}", severity="warning", timeout=10)
                self.set_keymap({})
        # Tab cycles inside the shown pane; leaving focus on the tab bar would hide the pane's keys
        self.query_one(TabbedContent).query_one(Tabs).can_focus = False
        self.watch(self.screen, "focused", self._focus_changed, init=False)
        if self.ctx.host_key_prompt is not None:
            self.ctx.host_key_prompt.ask = self.ask_host_key
        for remote in self.ctx.remotes.values():
            self._unsubscribe.append(remote.subscribe(self._status_changed))
            for warning in remote.warnings:
                self.notify(f"{remote.name}: {warning}", severity="warning", timeout=10)
            await remote.start()
        self.refresh_status()
        if self.autorun:
            self.call_after_refresh(self._run_autorun)

    def _status_changed(self, _status: ConnStatus) -> None:
        self.call_later(self.refresh_status)

    async def _run_autorun(self) -> None:
        for binding_id in self.autorun:
            for pane in self.query(Pane):
                for b in pane.BINDINGS:
                    if isinstance(b, Binding) and b.id == binding_id:
                        self.show_pane(pane.PANE_ID)
                        await pane.run_action(b.action)

    def refresh_status(self) -> None:
        parts = Text()
        for name, remote in self.ctx.remotes.items():
            st = remote.status
            style = {"connected": "green", "failed": "bold red", "reconnecting": "bold yellow"}.get(
                st.state.value, "yellow"
            )
            if parts:
                parts.append("  ")
            parts.append(f"{name} ", style="bold")
            parts.append(st.state.value, style=style)
            if st.state is ConnState.CONNECTED and st.rtt_ms is not None:
                parts.append(f" {st.rtt_ms:.1f}ms", style="dim")
            if st.state is ConnState.RECONNECTING:
                parts.append(f" (attempt {st.attempt}: {st.last_error or ''})", style="dim")
            if st.state is ConnState.FAILED:
                parts.append(f" ({st.last_error or ''})"[:100], style="dim")
        if self.ctx.profile is not None:
            parts.append(f"   profile {self.ctx.profile.name}", style="cyan")
        if self.ctx.readonly:
            parts.append("   READ-ONLY", style="bold magenta")
        try:
            self.query_one("#status-line", Static).update(parts)
        except NoMatches:  # a status change before compose or after the screen went: nothing to show
            pass

    # ---- host keys ---------------------------------------------------------------------------------
    async def ask_host_key(self, info: HostKeyInfo) -> KeyDecision:
        from specdebug.tui.screens.hostkey import HostKeyScreen

        future: asyncio.Future[KeyDecision] = asyncio.get_running_loop().create_future()

        def done(decision: KeyDecision | None) -> None:
            if not future.done():
                future.set_result(decision or KeyDecision.REFUSE)

        self.push_screen(HostKeyScreen(info), done)
        return await future

    # ---- actions ------------------------------------------------------------------------------------
    def action_help(self) -> None:
        from specdebug.tui.screens.help import HelpScreen

        rows = []
        active = self.query_one(TabbedContent).active
        panes = [p for p in self.query(Pane) if f"tab-{p.PANE_ID}" == active]
        for scope, node in [(p.TITLE, p) for p in panes] + [("app", self)]:
            for b in node.BINDINGS:
                if isinstance(b, Binding) and b.description:
                    keys = ",".join(self.ctx.keys_of(b))
                    desc = b.description
                    if isinstance(node, Pane) and self.ctx.readonly and b.action in node.MUTATING_ACTIONS:
                        desc += " (disabled: read-only)"
                    rows.append((scope, keys_label(keys), desc, b.id or ""))
        self.push_screen(HelpScreen(rows, f"specdebug keys: {panes[0].TITLE if panes else 'app'}"))

    def action_pick_profile(self) -> None:
        from specdebug.tui.screens.profiles import ProfilePicker

        choices = []
        for path in self.ctx.profile_choices:
            desc = ""
            try:
                for line in path.read_text().splitlines():
                    if line.startswith("description"):
                        desc = line.partition("=")[2].strip().strip('"')
                        break
            except OSError:
                continue
            choices.append((path, desc))
        if not choices:
            self.notify(
                "no profiles to choose from: start with -c PROFILE (its folder is offered)",
                severity="warning",
            )
            return
        current = self.ctx.profile_path.stem if self.ctx.profile_path else None
        ends = getattr(self.active_pane(), "end_marker", lambda: None)()  # the Bisect pane: g/b mark ends
        self.push_screen(ProfilePicker(choices, current, ends=ends), self._profile_picked)

    def _profile_picked(self, path: Path | None) -> None:
        if path is None:
            return
        from specdebug.core.profiles import ProfileError, load_profile

        loader = self.ctx.profile_loader or load_profile
        try:
            profile = loader(path)
        except (ProfileError, OSError, ValueError) as exc:
            self.notify(f"{path.name}: {exc}", severity="error")
            return
        self.ctx.profile, self.ctx.profile_path = profile, path
        self.refresh_status()
        self.post_message(Pane.ProfileChanged(profile))
        self.notify(f"profile: {profile.name}")

    def action_show_tab(self, index: int) -> None:
        if 0 <= index < len(self.pane_classes):
            self.show_pane(self.pane_classes[index].PANE_ID)

    def show_pane(self, pane_id: str) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == f"tab-{pane_id}":  # no TabActivated follows: put focus back ourselves
            for pane in self.query(Pane):
                if pane.PANE_ID == pane_id and not self._inside(self.focused, pane):
                    self.focus_pane(pane)
            return
        # focus left inside the old tab would pull the old tab back: drop it first
        self.set_focus(None)
        tabs.active = f"tab-{pane_id}"

    @staticmethod
    def _inside(widget, pane: Pane) -> bool:
        return widget is not None and (widget is pane or pane in widget.ancestors)

    def active_pane(self) -> Pane | None:
        active = self.query_one(TabbedContent).active
        return next((p for p in self.query(Pane) if f"tab-{p.PANE_ID}" == active), None)

    def _focus_changed(self, focused) -> None:
        """Focus lost (a hidden widget, a resize, Tab off the end) or left in a hidden tab (the
        screen's first auto-focus): give it back to the shown pane, so the pane's keys keep
        working and stay in the footer."""
        pane = self.active_pane()
        if pane is not None and not self._inside(focused, pane):
            self.call_after_refresh(self._refocus)

    def _refocus(self) -> None:
        if self.screen is not self.screen_stack[0]:
            return  # a modal is up: it owns focus
        pane = self.active_pane()
        if pane is not None and not self._inside(self.focused, pane):
            self.focus_pane(pane)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Put focus inside the shown pane, so its keys work without a click."""
        pane_id = (event.pane.id or "").removeprefix("tab-")
        for pane in self.query(Pane):
            if pane.PANE_ID == pane_id:
                self.call_after_refresh(self.focus_pane, pane)

    def focus_pane(self, pane: Pane) -> None:
        """Focus the pane's main widget; never a text box, which would swallow the pane's keys."""
        from textual.widgets import Input, TextArea

        if self.query_one(TabbedContent).active != f"tab-{pane.PANE_ID}":
            return  # another tab was chosen meanwhile; focusing here would pull it back
        for widget in pane.query("*"):
            if widget.focusable and not isinstance(widget, Input | TextArea):
                widget.focus()
                return
        pane.focus()

    def action_cycle_layout(self) -> None:
        names = sorted({p.stem for d in LAYOUT_DIRS if d.is_dir() for p in d.glob("*.tcss")})
        if not names:
            return
        nxt = (
            names[(names.index(self.layout_name) + 1) % len(names)] if self.layout_name in names else names[0]
        )
        self.set_layout(nxt)

    def set_layout(self, name: str) -> None:
        """Swap the layout stylesheet at runtime (a bad file is reported; the old one stays)."""
        try:
            path = find_layout(name)
            sheet = self.stylesheet.copy()
            sheet.source.pop((str(self.layout_path.resolve()), ""), None)
            sheet.read(path)
            sheet.parse()
        except Exception as exc:  # StylesheetParseError, OSError, ValueError
            self.notify(f"layout {name}: {exc}", severity="error")
            return
        self.stylesheet = sheet
        self.layout_path, self.layout_name = path, name
        self.refresh_css(animate=False)
        self.notify(f"layout: {name}")

    NARROW_COLUMNS = 140

    def on_resize(self, event) -> None:
        """Panes give side panels less room on small terminals (tmux splits, laptops)."""
        for pane in self.query(Pane):
            pane.set_class(event.size.width < self.NARROW_COLUMNS, "-narrow")

    def on_pane_server_state_changed(self, event: Pane.ServerStateChanged) -> None:
        for pane in self.query(Pane):
            pane.server_state_changed(event.state, event.record)

    def on_pane_profile_changed(self, event: Pane.ProfileChanged) -> None:
        for pane in self.query(Pane):
            pane.profile_changed(event.profile)

    def on_pane_journal_changed(self, event: Pane.JournalChanged) -> None:
        for pane in self.query(Pane):
            pane.journal_changed()

    def notify(self, message, *, title="", severity="information", timeout=None, markup=True):
        """Notifications carry remote text (errors, paths, log lines): never parse them as markup,
        whatever the caller asked (a `[` in an exception must not restyle or break the toast)."""
        return super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # ---- failures -----------------------------------------------------------------------------------
    async def _dispatch_action(self, namespace, action_name, params) -> bool:
        """Read-only is enforced in the core: an action that reaches a write says so, never crashes."""
        try:
            return await super()._dispatch_action(namespace, action_name, params)
        except ReadOnlyError as exc:
            self.notify(str(exc), severity="warning")
            return True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            err = event.worker.error
            self.notify(f"{event.worker.name or 'task'} failed: {describe_error(err)}", severity="error")

    # ---- quitting ----------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Servers are left running on purpose (they take minutes to start): remember which, so
        the command line can say so, with the command that stops them, once the screen is gone."""
        self.still_running = [s for pane in self.query(Pane) for s in pane.running_servers()]
        self.exit()

    async def on_unmount(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        if self.ctx.host_key_prompt is not None and self.ctx.host_key_prompt.ask == self.ask_host_key:
            self.ctx.host_key_prompt.ask = None  # no screen left to ask on: unknown keys are refused
        if self._owns_remotes:
            for remote in self.ctx.remotes.values():
                try:
                    await asyncio.wait_for(remote.close(), 3.0)
                except TimeoutError:
                    log.debug("%s: close took more than 3 s; leaving it", remote.name)
                except Exception:  # closing goes on for the other hosts; the traceback is kept
                    log.debug("%s: close failed", remote.name, exc_info=True)


__all__ = ["SpecdebugApp", "HostsPane", "RunningServer", "find_layout", "load_keymap"]
