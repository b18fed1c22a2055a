"""Base class of every pane: its id and title, its context, and read-only enforcement.

A pane lists the actions that change the box in MUTATING_ACTIONS; with --readonly those
actions are disabled (check_action returns False, so the footer does not offer them), and
pressing one of their keys, or choosing one in the palette, says "read-only" instead of
doing nothing silently.  That list only greys keys out: the enforcement is in the core
(specdebug/capability.py), which refuses every write of a read-only app whichever action reaches it;
an action that reaches such a refusal says so in a toast (every `action_*` of a pane is wrapped).

Errors: the core raises SpecdebugError subclasses (with a `hint` where the user can act); a pane
catches none of them.  The one handler is `error_toast`: every pane action is wrapped, and a pane's
failed worker reaches it through `on_worker_state_changed` (here and in the app), so an error is one
notification: what failed, the message, the hint.

What panes share (the profile, the host, server news, ...) comes down as reactives bound to the
app's (specdebug/tui/store.py); a pane tells the app something with a message, never by calling
another pane.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from specdebug.capability import ReadOnlyError
from specdebug.core.control.events import ServerState
from specdebug.errors import SpecdebugError
from specdebug.tui.context import AppContext
from specdebug.tui.store import EndPick, JournalNews, ServerNews

if TYPE_CHECKING:
    from textual.app import App

    from specdebug.core.control.records import ServerRecord
    from specdebug.core.profiles import Profile
    from specdebug.core.records import JournalRecord
    from specdebug.core.target import Target

READONLY_HINT = "read-only seat: {what} would change the box"


@dataclass(frozen=True)
class RunningServer:
    """A server the TUI leaves running at quit (it is told to the user with its stop command)."""

    host: str
    profile: str
    profile_path: str | None
    pid: int | None
    port: int | None


def describe_error(exc: BaseException) -> str:
    """`ReadError: connection reset`, or just `ReadError` when the exception has no message."""
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def error_toast(app: App[Any], exc: SpecdebugError, doing: str = "") -> None:
    """The TUI's one rendering of the error root: a notification with what failed (`doing`), the
    message and, on its own line, the hint.  A read-only refusal is a warning, the rest errors."""
    text = f"{doing}: {exc}" if doing else str(exc)
    if exc.hint:
        text += f"\nhint: {exc.hint}"
    app.notify(text, severity="warning" if isinstance(exc, ReadOnlyError) else "error")


def worker_toast(app: App[Any], worker: Worker[Any], describe: Callable[[BaseException], str] = str) -> None:
    """A failed worker's toast: the error root through `error_toast` (its hint too), else described."""
    doing = f"{worker.name or 'task'} failed"
    if isinstance(worker.error, SpecdebugError):
        error_toast(app, worker.error, doing)
    elif worker.error is not None:
        app.notify(f"{doing}: {describe(worker.error)}", severity="error")


def _action_doing(action: Callable[..., Any]) -> str:
    """`action_measure_again` -> `measure again failed`: names the action in its error toast."""
    return action.__name__.removeprefix("action_").replace("_", " ") + " failed"


def _errors_said(action: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a pane action so an error of the root (a read-only refusal, a profile that does not load,
    a refused launch...) becomes its toast (`error_toast`), not a crash."""
    doing = _action_doing(action)
    if inspect.iscoroutinefunction(action):

        @functools.wraps(action)
        async def run_async(self: Pane, *args: Any, **kwargs: Any) -> Any:
            try:
                return await action(self, *args, **kwargs)
            except ReadOnlyError as exc:
                error_toast(self.app, exc)
            except SpecdebugError as exc:
                error_toast(self.app, exc, doing)
            return None

        return run_async

    @functools.wraps(action)
    def run(self: Pane, *args: Any, **kwargs: Any) -> Any:
        try:
            return action(self, *args, **kwargs)
        except ReadOnlyError as exc:
            error_toast(self.app, exc)
        except SpecdebugError as exc:
            error_toast(self.app, exc, doing)
        return None

    return run


def _action_name(action: str) -> str:
    """`bisect_end('good')` -> `bisect_end` (a binding's action may carry arguments)."""
    return action.split("(", 1)[0].strip()


class Pane(Widget):
    PANE_ID: ClassVar[str] = "pane"
    TITLE: ClassVar[str] = "Pane"
    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    can_focus = True  # fallback focus target when a pane has no focusable child
    DEFAULT_CSS = """
    Pane { height: 1fr; width: 1fr; }
    """

    # the store, bound down from the app (specdebug/tui/store.py); watchers below run the hooks
    bound_profile: reactive[Profile | None] = reactive(None, init=False)
    bound_host: reactive[str | None] = reactive(None, init=False)
    server_news: reactive[ServerNews | None] = reactive(None, init=False)
    journal_news: reactive[JournalNews | None] = reactive(None, init=False)
    end_pick: reactive[EndPick | None] = reactive(None, init=False)

    # actions that still run while one of the pane's text boxes has focus (Esc, Enter)
    TYPING_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    # actions that act on the row (or line) under the cursor of the pane's focused table (or log):
    # they wait their turn behind the keys ahead of them (see __init_subclass__)
    IN_TURN_ACTIONS: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A pane key is a priority binding: the app decides it the moment it arrives, with the
        focus of that moment (a key that bubbled back up later would be judged after the keys queued
        behind it, and a focus change it makes, such as opening a text box, would come too late for
        them). Keys meant for a text box reach it because check_action says no while one has focus
        (TYPING_ACTIONS aside).

        IN_TURN_ACTIONS are the exception: they read the cursor of the focused widget, whose arrow
        keys are its own (non-priority) bindings, run when the key comes back up from that widget.
        A priority key would overtake an arrow still queued for the table (Down then g, typed fast,
        marked the row the cursor left), so these stay normal bindings: the app hands them to the
        focused widget behind the keys already sent to it, and they come back up to the pane in
        that order."""
        if "BINDINGS" in vars(cls):  # before Textual merges them (in its __init_subclass__)
            cls.BINDINGS = [
                dataclasses.replace(b, priority=_action_name(b.action) not in cls.IN_TURN_ACTIONS)
                if isinstance(b, Binding)
                else b
                for b in cls.BINDINGS
            ]
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if name.startswith("action_") and callable(value) and not hasattr(value, "__wrapped__"):
                setattr(cls, name, _errors_said(value))

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(id=kwargs.pop("id", self.PANE_ID), **kwargs)
        self.ctx = ctx
        self.from_palette = False  # set while the command palette runs one of this pane's actions
        # what the bound reactives last said: a binding's first (initial) value is no news
        self._seen: dict[str, object] = {
            "bound_profile": ctx.profile,
            "bound_host": ctx.selected,
            "server_news": None,
            "journal_news": None,
            "end_pick": None,
        }

    # -- redrawing: on change, never on a clock --------------------------------------------------------
    # A pane sets `self._dirty = True` when what it shows changed; one redraw follows REDRAW_S later,
    # however many changes came meanwhile (a flood of events costs one redraw per REDRAW_S, and an
    # idle pane costs nothing: no timer runs while nothing changes).
    REDRAW_S: ClassVar[float] = 0.08
    _dirty_flag = False
    _redraw_timer: Timer | None = None

    @property
    def _dirty(self) -> bool:
        return self._dirty_flag

    @_dirty.setter
    def _dirty(self, value: bool) -> None:
        self._dirty_flag = value
        if value and self._redraw_timer is None and self.is_mounted:
            self._redraw_timer = self.set_timer(self.REDRAW_S, self._redraw_due)

    def _redraw_due(self) -> None:
        self._redraw_timer = None
        if self._dirty_flag:
            self.redraw()

    def redraw(self) -> None:
        """Hook: draw what changed (called once per burst of `_dirty = True`)."""
        self._dirty_flag = False

    def on_mount(self) -> None:
        if self._dirty_flag:  # changed before it was on screen
            self._dirty = True

    def _news(self, name: str, value: object) -> bool:
        if value is self._seen.get(name) or value == self._seen.get(name):
            return False
        self._seen[name] = value
        return True

    def watch_bound_profile(self, profile: Profile | None) -> None:
        if self._news("bound_profile", profile) and profile is not None:
            self.profile_changed(profile)

    def watch_bound_host(self, host: str | None) -> None:
        if self._news("bound_host", host):
            self.host_changed(host)

    def watch_server_news(self, news: ServerNews | None) -> None:
        if news is not None and self._news("server_news", news):
            self.server_state_changed(news.state, news.record)

    def watch_journal_news(self, news: JournalNews | None) -> None:
        if news is not None and self._news("journal_news", news):
            self.journal_changed(list(news.events))

    def watch_end_pick(self, pick: EndPick | None) -> None:
        if pick is not None and self._news("end_pick", pick):
            self.end_picked(pick.side, pick.result_profile)

    class ServerStateChanged(Message):
        """A pane saw the profile's server change state (ready, failed, stopped, exited); the app
        puts it in the store (`server_news`), every pane's `server_state_changed` runs."""

        def __init__(self, state: ServerState, record: ServerRecord | None = None) -> None:
            super().__init__()
            self.state = state
            self.record = record

    class JournalChanged(Message):
        """Another seat wrote to the shared journal; the app puts the events in the store."""

        def __init__(self, events: list[JournalRecord] | None = None) -> None:
            super().__init__()
            self.events = list(events or [])

    class EndPicked(Message):
        """A row's profile should be a bisection end; the app puts it in the store (`end_pick`)."""

        def __init__(self, side: str, result_profile: str | None) -> None:
            super().__init__()
            self.side = side
            self.result_profile = result_profile

    class HostSelected(Message):
        """The user chose the host every pane acts on; the app puts it in the store (`selected`)."""

        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def server_state_changed(self, state: ServerState, record: ServerRecord | None) -> None:
        """Hook: the profile's server changed state.  Panes that show server state refresh here."""

    def profile_changed(self, profile: Profile) -> None:
        """Hook: another profile was picked (ctx.profile is it already)."""

    def journal_changed(self, events: list[JournalRecord]) -> None:
        """Hook: the session journal got `events` from elsewhere (another seat, another app)."""

    def host_changed(self, host: str | None) -> None:
        """Hook: another host was selected (ctx.selected is it already)."""

    def end_picked(self, side: str, result_profile: str | None) -> None:
        """Hook: a benchmark row's profile was chosen as the bisection's good or bad end."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker messages do not bubble to the app: a pane's failed worker becomes a toast here."""
        if event.state is WorkerState.ERROR:
            worker_toast(self.app, event.worker)

    def running_servers(self) -> list[RunningServer]:
        """Hook: servers this pane knows are still running (asked when the user quits)."""
        return []

    def typing(self) -> bool:
        """True while a text box of this pane has focus: its letters are text, not pane keys."""
        from textual.widgets import Input, TextArea

        focused = self.app.focused
        return isinstance(focused, Input | TextArea) and self in focused.ancestors

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.typing() and action not in self.TYPING_ACTIONS:
            return False
        if self.ctx.readonly and action in self.MUTATING_ACTIONS:
            return False
        return True

    # -- the target -----------------------------------------------------------------------------

    def acting_target(self, profile: Profile | None = None) -> Target | None:
        """The target an action acts on (`ctx.target`: the chosen profile, or `profile`, placed), or
        None after saying why: no profile, no host, or a node of the deployment that this app holds no
        connection to (acting on the others would act on part of a server)."""
        target = self.ctx.target(profile)
        if target is None:
            if (profile or self.ctx.profile) is None:
                self.notify("no profile loaded: start specdebug with -c PROFILE", severity="error")
            else:
                self.notify("no host connected", severity="error")
            return None
        if target.unreachable:
            self.notify(
                f"{target.profile.name}: no connection to {', '.join(target.unreachable)} here "
                "(its [deployment] nodes): open it with `specdebug -c PROFILE`",
                severity="error",
            )
            return None
        return target

    # -- read-only ------------------------------------------------------------------------------

    def is_refused(self, action: str) -> bool:
        """True (and the user is told why) when read-only mode forbids `action`."""
        if not (self.ctx.readonly and action in self.MUTATING_ACTIONS):
            return False
        binding = next((b for b in self.BINDINGS if isinstance(b, Binding) and b.action == action), None)
        what = binding.description if binding is not None and binding.description else action
        self.app.notify(READONLY_HINT.format(what=what), severity="warning", timeout=4)
        return True

    def _keys_of(self, binding: Binding) -> list[str]:
        return self.ctx.keys_of(binding)

    def on_key(self, event: events.Key) -> None:
        """A disabled (read-only) binding's key reaches the pane instead of its action: say so."""
        if not self.ctx.readonly or not self.MUTATING_ACTIONS:
            return
        for binding in self.BINDINGS:
            if not isinstance(binding, Binding) or binding.action not in self.MUTATING_ACTIONS:
                continue
            keys = self._keys_of(binding)
            if event.key in keys or (event.character and event.character in keys):
                event.stop()
                event.prevent_default()
                self.is_refused(binding.action)
                return
