"""The Textual app: header with connection states, one tab per pane, footer, palette, help.

The app owns the remotes (one Connection per host), the journal and the layout; panes get an
AppContext and act through core services.  The app is also the store (specdebug/tui/store.py): the
profile, the selected host and the news panes share are reactives here, bound down into every pane;
panes post messages up and never call each other.  Every binding has an id, remappable from
~/.config/specdebug/keymap.toml; every action is in the command palette; a worker failure
becomes a notification, never a crash.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Header, Static, TabbedContent, TabPane, Tabs
from textual.worker import Worker, WorkerState

from specdebug.tui.boot import Boot, BootFailed, actions_provider, binding_ids, load_panes, seats_provider
from specdebug.tui.context import AppContext
from specdebug.tui.driver import terminal_driver
from specdebug.tui.early_keys import EarlyKeys
from specdebug.tui.settings import KEYMAP_FILE, LAYOUT_DIRS, KeymapFile, find_layout, load_keymap
from specdebug.tui.widgets.keybar import KeyBar
from specdebug.tui.widgets.status_line import connection_line
from specdebug.tui.widgets.steady import Steady

if TYPE_CHECKING:
    from pathlib import Path

    from specdebug.core.profiles import Profile
    from specdebug.remote.api import ConnStatus
    from specdebug.transport.ssh.hostkeys import HostKeyInfo, KeyDecision
    from specdebug.tui.pane import Pane, RunningServer
    from specdebug.tui.store import EndPick, JournalNews, ServerNews

# This module is what the first screen needs and no more (see tui.boot): the panes, the core and the
# transport are imported when used, and by the command line's app in a thread after its first screen.

__all__ = [  # and, imported when asked for (__getattr__): ActionsProvider, HostsPane, RunningServer
    "Boot",
    "BootFailed",
    "KEYMAP_FILE",
    "LAYOUT_DIRS",
    "KeymapFile",
    "load_panes",
    "binding_ids",
    "SpecdebugApp",
    "find_layout",
    "load_keymap",
]

log = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    """The names this module used to import at its top, imported when asked for."""
    if name == "ActionsProvider":
        from specdebug.tui.palette import ActionsProvider

        return ActionsProvider
    if name == "HostsPane":
        from specdebug.tui.panes.hosts import HostsPane

        return HostsPane
    if name == "RunningServer":
        from specdebug.tui.pane import RunningServer

        return RunningServer
    raise AttributeError(name)


class AppTabPane(TabPane):
    """A tab whose pane never pulls itself to the front: the app alone chooses the tab shown.

    (TabbedContent shows the tab of any widget that gets focus; a focus change still queued from
    the previous pane would bring that pane back after a quick switch.)"""

    def on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.stop()


class AppBody(Widget):
    """Everything under the status line that needs the heavy modules: the seats bar, the journal
    follower and the tabs (SpecdebugApp._compose_body).  Composed with the app, or mounted once
    the command line's Boot is in."""

    DEFAULT_CSS = "AppBody { height: 1fr; layout: vertical; }"


class SpecdebugApp(App[None]):
    TITLE = "specdebug"
    COMMANDS = App.COMMANDS | {actions_provider, seats_provider}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("ctrl+c", "quit", "Quit", id="app.quit_ctrl_c", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", id="app.help"),
        Binding("ctrl+l", "cycle_layout", "Layout", id="app.layout"),
        Binding("P", "pick_profile", "Profile", id="app.profile"),
        Binding("1", "show_tab(0)", "Hosts", id="app.tab1", show=False, priority=True),
        Binding("2", "show_tab(1)", "Startup", id="app.tab2", show=False, priority=True),
        Binding("3", "show_tab(2)", "Logs", id="app.tab3", show=False, priority=True),
        Binding("4", "show_tab(3)", "Env", id="app.tab4", show=False, priority=True),
        Binding("5", "show_tab(4)", "Bench", id="app.tab5", show=False, priority=True),
        Binding("6", "show_tab(5)", "Bisect", id="app.tab6", show=False, priority=True),
    ]
    CSS = """
    TabbedContent { height: 1fr; }
    #status-line { height: 1; padding: 0 1; background: $boost; }
    #boot-hosts { height: 1fr; padding: 1 2; }
    """

    # the store (specdebug/tui/store.py): bound into every pane at compose
    profile: reactive[Profile | None] = reactive(None, init=False)
    selected: reactive[str | None] = reactive(None, init=False)
    server_news: reactive[ServerNews | None] = reactive(None, init=False)
    journal_news: reactive[JournalNews | None] = reactive(None, init=False)
    end_pick: reactive[EndPick | None] = reactive(None, init=False)

    def get_driver_class(self) -> type[Driver]:
        return terminal_driver(super().get_driver_class())  # a hangup's SIGCONT restarts nothing

    def __init__(
        self,
        ctx: AppContext | None = None,
        *,
        layout: str = "default",
        keymap: dict[str, str] | None = None,
        owns_remotes: bool = True,
        panes: list[type[Pane]] | None = None,
        boot: Boot | None = None,
    ) -> None:
        """`ctx`: the hosts and context, ready; or `boot` (the command line): the first screen shows
        `boot.hosts` connecting while the rest is imported and built (see Boot)."""
        self.layout_path = find_layout(layout)
        super().__init__(css_path=[self.layout_path])
        # no animations: the tab bar's underline slid for ~0.3 s after every pane switch, ~15 full
        # screen updates each (a switch cost 1.5x its CPU with them); a debugger's screen jumps
        self.animation_level = "none"
        if ctx is None and boot is None:
            raise ValueError("SpecdebugApp needs a ctx or a boot")
        self._boot = boot if ctx is None else None
        self.ctx = ctx if ctx is not None else AppContext(readonly=boot.readonly if boot else False)
        self.layout_name = layout
        self._keymap: dict[str, str] = {}
        self._owns_remotes = owns_remotes
        self._panes_given = panes
        self.pane_classes: list[type[Pane]] = []
        self._unsubscribe: list[Callable[[], None]] = []  # status listeners, removed on unmount
        self.autorun: list[str] = []  # binding ids to run once mounted (the demo launches the sim)
        self.still_running: list[RunningServer] = []  # servers left running at quit (printed after exit)
        # the command line's app freezes what start-up built (see _freeze_start_up); tests share one
        # process between many apps, whose garbage a freeze would keep for good
        self.freeze_gc = False
        self._status_due = False  # a status-line redraw is scheduled (_status_changed)
        self._wanted_tab: int | None = None  # a tab key pressed before the panes were there
        self._early_keys = EarlyKeys()  # other keys typed before the panes were there (replayed)
        self.boot_error: str | None = None  # what the Boot could not open (the command line says it)
        if self.ctx.readonly:
            self.sub_title = "read-only"
        if ctx is not None:
            self._adopt(ctx, keymap if keymap is not None else {})

    def _adopt(self, ctx: AppContext, keymap: dict[str, str]) -> None:
        """Take the hosts and context (at construction, or once the Boot has built them)."""
        self.ctx = ctx
        self.set_reactive(SpecdebugApp.profile, ctx.profile)
        self.set_reactive(SpecdebugApp.selected, ctx.selected)
        self._keymap = keymap
        ctx.keymap = self._keymap  # panes read it through ctx.keys_of
        self.pane_classes = self._panes_given if self._panes_given is not None else load_panes()
        if ctx.readonly:
            from specdebug.capability import hold_readonly

            self.sub_title = "read-only"
            hold_readonly(*ctx.remotes.values(), ctx.journal)  # core refuses writes through them

    @property
    def ready(self) -> bool:
        """Whether the panes are there (always, but for the command line's first screen)."""
        return self._boot is None

    # ---- composition -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Steady(id="status-line")
        if self._boot is None:
            yield from self._compose_body()
        else:  # the first screen: the hosts, connecting, before the heavy imports
            yield Static(self._boot_hosts_text(), id="boot-hosts")
        yield KeyBar()

    def _compose_body(self) -> ComposeResult:
        """The body (AppBody), composed here: the panes bind to the app's reactives, which Textual
        allows only while the app composes or mounts."""
        from specdebug.tui.widgets.seats import JournalFollower, SeatsBar

        with AppBody():
            yield SeatsBar(readonly=self.ctx.readonly)  # shown only inside a `specdebug pair` session
            yield JournalFollower(self.ctx)  # live updates from a journal kept on the box
            # a tab key pressed on the first screen: the body comes with that pane shown (switching it
            # right after mounting raced TabbedContent's own start: the tab marked, its pane blank)
            wanted = self._wanted_tab
            initial = ""
            if wanted is not None and 0 <= wanted < len(self.pane_classes):
                initial = f"tab-{self.pane_classes[wanted].PANE_ID}"
            with TabbedContent(id="tabs", initial=initial):
                for cls in self.pane_classes:
                    with AppTabPane(cls.TITLE, id=f"tab-{cls.PANE_ID}"):
                        yield cls(self.ctx).data_bind(
                            bound_profile=SpecdebugApp.profile,
                            bound_host=SpecdebugApp.selected,
                            server_news=SpecdebugApp.server_news,
                            journal_news=SpecdebugApp.journal_news,
                            end_pick=SpecdebugApp.end_pick,
                        )

    def _boot_hosts_text(self) -> Text:
        text = Text()
        for host in self._boot.hosts if self._boot is not None else []:
            text.append(f"{host}  ", style="bold")
            text.append("connecting…\n", style="yellow")
        return text

    async def on_mount(self) -> None:
        self.refresh_status()
        if self._boot is None:
            await self._start()
        else:
            self.call_after_refresh(self._begin_boot)  # after the first screen is painted

    def _begin_boot(self) -> None:
        self.run_worker(self._run_boot(), name="start-up", exit_on_error=False)

    async def _run_boot(self) -> None:
        """The connections' modules in a thread (the screen keeps answering), the connections
        started, then the panes' modules in a thread while they connect, and the panes."""
        boot = self._boot
        assert boot is not None
        try:
            await asyncio.to_thread(boot.imports)
            ctx = boot.build()
        except BootFailed as exc:
            self.boot_error = str(exc)
            self.exit(return_code=2)
            return
        self.ctx = ctx
        await self._connect()
        await asyncio.to_thread(boot.imports_panes)
        if self._exit:  # quit or the terminal hung up meanwhile: nothing to mount (an error would turn
            return  # the hangup's 129 into 1)
        self._adopt(ctx, boot.keymap())
        await self.screen.mount_compose(self._compose_body(), before=self.query_one(KeyBar))
        if self._exit:
            return
        # ready only once the body is mounted: a tab key while it mounted switched a TabbedContent that
        # had not started (the tab marked, its pane blank: the real tier's TUI test, `2` at "connected")
        self._boot = None
        await self.query_one("#boot-hosts").remove()
        await self._start_panes()
        if self._wanted_tab is not None:  # pressed while the body mounted: once it has settled
            self.call_after_refresh(self.action_show_tab, self._wanted_tab)
        self.call_after_refresh(self._replay_early_keys)  # after that tab: in the order typed

    async def on_event(self, event: events.Event) -> None:
        """Keys typed before the panes are there wait for them (see tui.early_keys)."""
        if isinstance(event, events.Key) and self._early_keys.hold(
            event, self.ready, lambda key: key in self.active_bindings
        ):
            return
        await super().on_event(event)

    def _replay_early_keys(self) -> None:
        for key in self._early_keys.release():
            self.post_message(key)

    async def _start(self) -> None:
        await self._start_panes()
        await self._connect()

    async def _start_panes(self) -> None:
        """Once the panes are there: the keymap and the focus."""
        for problem in self._keymap.problems if isinstance(self._keymap, KeymapFile) else ():
            self.notify(problem, severity="error", timeout=10)
        if self._keymap:
            try:
                self.set_keymap(self._keymap)
            except Exception as exc:  # a key string Textual cannot use: report, keep the defaults
                self.notify(f"keymap ignored: {exc}", severity="warning", timeout=10)
                self.set_keymap({})
        # Tab cycles inside the shown pane; leaving focus on the tab bar would hide the pane's keys
        self.query_one(TabbedContent).query_one(Tabs).can_focus = False
        pane = self.active_pane()
        if pane is not None:
            self.focus_pane(pane)
        if self.freeze_gc:
            self.call_after_refresh(self._freeze_start_up)
        if self.autorun:
            self.call_after_refresh(self._run_autorun)

    async def _connect(self) -> None:
        """Start every connection, heard by the status line (the host-key screen answers them)."""
        if self.ctx.host_key_prompt is not None:
            self.ctx.host_key_prompt.ask = self.ask_host_key
        for remote in self.ctx.remotes.values():
            self._unsubscribe.append(remote.subscribe(self._status_changed))
            for warning in remote.warnings:
                self.notify(f"{remote.name}: {warning}", severity="warning", timeout=10)
            await remote.start()
        self.refresh_status()

    @staticmethod
    def _freeze_start_up() -> None:
        """Move what start-up built (modules, widgets, styles: ~100k objects) out of the collector's
        reach: a full collection walked them all, ~100 ms on a loaded client, at random keys (the
        tail of the key latency, tests/perf/bench_keys.py).  They live as long as the app anyway."""
        gc.collect()
        gc.freeze()

    STATUS_BATCH_S = 0.2  # the status line is redrawn at most this often, however many hosts change

    def _status_changed(self, _status: ConnStatus) -> None:
        """One redraw of the status line per batch: with 64 hosts an RTT figure changes ~13 times a
        second, and each redraw built and drew every host's state again."""
        if not self._status_due:
            self._status_due = True
            # armed from the app's own queue: this callback runs in the connection's task, outside the
            # app's context, and a timer made there fails when it fires (no active app)
            self.call_later(self._arm_status_batch)

    def _arm_status_batch(self) -> None:
        self.set_timer(self.STATUS_BATCH_S, self._status_batch_due)

    def _status_batch_due(self) -> None:
        self._status_due = False
        self.refresh_status()

    def panes(self) -> list[Pane]:
        """The panes mounted (none on the command line's first screen)."""
        if not self.ready:
            return []
        from specdebug.tui.pane import Pane

        return list(self.query(Pane))

    async def _run_autorun(self) -> None:
        for binding_id in self.autorun:
            for pane in self.panes():
                for b in pane.BINDINGS:
                    if isinstance(b, Binding) and b.id == binding_id:
                        self.show_pane(pane.PANE_ID)
                        await pane.run_action(b.action)

    def refresh_status(self) -> None:
        line = connection_line(
            self._boot.hosts if self._boot is not None and not self.ctx.remotes else [],
            self.ctx.remotes,
            self.ctx.profile.name if self.ctx.profile is not None else None,
            self.ctx.readonly,
        )
        try:
            self.query_one("#status-line", Static).update(line)
        except NoMatches:  # a status change before compose or after the screen went: nothing to show
            pass

    # ---- host keys ---------------------------------------------------------------------------------
    async def ask_host_key(self, info: HostKeyInfo) -> KeyDecision:
        from specdebug.transport.ssh.hostkeys import KeyDecision
        from specdebug.tui.screens.hostkey import HostKeyScreen

        future: asyncio.Future[KeyDecision] = asyncio.get_running_loop().create_future()

        def done(decision: KeyDecision | None) -> None:
            if not future.done():
                future.set_result(decision or KeyDecision.REFUSE)

        self.push_screen(HostKeyScreen(info), done)
        return await future

    # ---- actions ------------------------------------------------------------------------------------
    def action_help(self) -> None:
        from specdebug.tui.pane import Pane
        from specdebug.tui.screens.help import HelpScreen, keys_label

        rows = []
        active = self.query_one(TabbedContent).active if self.ready else None
        panes = [p for p in self.panes() if f"tab-{p.PANE_ID}" == active]
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
        from specdebug.tui.profile_action import pick_profile

        pick_profile(self)

    def _profile_picked(self, path: Path | None) -> None:
        """What the profile picker calls with the chosen file (None: none chosen)."""
        from specdebug.tui.profile_action import profile_picked

        profile_picked(self, path)

    def watch_profile(self, profile: Profile | None) -> None:
        self.ctx.profile = profile
        self.refresh_status()

    def watch_selected(self, host: str | None) -> None:
        self.ctx.selected = host

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The tab keys are priority bindings (decided as they arrive, see Pane.__init_subclass__):
        they are text while a text box has focus, and belong to a modal screen while one is up."""
        if action == "show_tab":
            from textual.widgets import Input, TextArea

            if isinstance(self.focused, Input | TextArea) or self.screen is not self.screen_stack[0]:
                return False
        return True

    def action_show_tab(self, index: int) -> None:
        if not self.ready:  # a tab key on the first screen: shown once the panes are there
            self._wanted_tab = index
            return
        if self._exit:  # leaving (a hangup while the body mounted): the tabs may be gone
            return
        if 0 <= index < len(self.pane_classes):
            self.show_pane(self.pane_classes[index].PANE_ID)

    def show_pane(self, pane_id: str) -> None:
        """Show a pane and put focus in it at once (not later): the next key, already queued
        behind this one, must reach the pane shown, not the one left."""
        tabs = self.query_one(TabbedContent)
        tabs.active = f"tab-{pane_id}"
        pane = self.active_pane()
        if pane is not None and not self._inside(self.focused, pane):
            self.focus_pane(pane)

    @staticmethod
    def _inside(widget: Widget | None, pane: Pane) -> bool:
        return widget is not None and (widget is pane or pane in widget.ancestors)

    def active_pane(self) -> Pane | None:
        if not self.ready:
            return None
        try:
            active = self.query_one(TabbedContent).active
        except NoMatches:  # quitting: the screen is gone
            return None
        return next((p for p in self.panes() if f"tab-{p.PANE_ID}" == active), None)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """A click on a tab: put focus inside the shown pane, so its keys work without a click."""
        pane = self.active_pane()
        if pane is not None and not self._inside(self.focused, pane):
            self.focus_pane(pane)

    def focus_pane(self, pane: Pane) -> None:
        """Focus the pane's main widget now; never a text box, which would swallow the pane's keys."""
        from textual.widgets import Input, TextArea

        target = next(
            (w for w in pane.query("*") if w.focusable and not isinstance(w, Input | TextArea)), pane
        )
        self.screen.set_focus(target)

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

    def on_resize(self, event: events.Resize) -> None:
        """Panes give side panels less room on small terminals (tmux splits, laptops).

        Every resize repaints every cell. A terminal shrunk and grown back (tmux zoom twice, a
        window dragged) has lost the rows below the cursor and grown blank ones, yet the screen may
        never see the smaller size: one signal for both when the app was too busy to run its
        SIGWINCH handler in between, or two resizes inside the 1/120 s Textual waits before it lays
        the screen out. Either way the screen's last size is its old one, Textual paints nothing
        for that, and the footer stayed blank until something redrew it.
        """
        for pane in self.panes():
            pane.set_class(event.size.width < self.NARROW_COLUMNS, "-narrow")
        if self.screen_stack:
            self.screen.refresh()  # the whole screen's region is dirty: a full update

    # ---- messages up, into the store ---------------------------------------------------------------
    def on_pane_server_state_changed(self, event: Pane.ServerStateChanged) -> None:
        from specdebug.tui.store import ServerNews

        self.server_news = ServerNews(event.state, event.record)

    def on_pane_journal_changed(self, event: Pane.JournalChanged) -> None:
        from specdebug.tui.store import JournalNews

        self.journal_news = JournalNews(tuple(event.events))

    def on_pane_end_picked(self, event: Pane.EndPicked) -> None:
        from specdebug.tui.store import EndPick

        self.end_pick = EndPick(event.side, event.result_profile)

    def on_pane_host_selected(self, event: Pane.HostSelected) -> None:
        self.selected = event.host

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Notifications carry remote text (errors, paths, log lines): never parse them as markup,
        whatever the caller asked (a `[` in an exception must not restyle or break the toast)."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # ---- failures (a pane action that reaches a read-only refusal says so: pane.py) -----------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            from specdebug.tui.pane import describe_error, worker_toast

            worker_toast(self, event.worker, describe_error)

    # ---- quitting ----------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Servers are left running on purpose (they take minutes to start): remember which, so
        the command line can say so, with the command that stops them, once the screen is gone."""
        self.still_running = [s for pane in self.panes() for s in pane.running_servers()]
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
