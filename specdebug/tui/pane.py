"""Base class of every pane: its id and title, its context, and read-only enforcement.

A pane lists the actions that change the box in MUTATING_ACTIONS; with --readonly those
actions are disabled (check_action returns False, so the footer does not offer them), and
pressing one of their keys, or choosing one in the palette, says "read-only" instead of
doing nothing silently.  That list only greys keys out: the enforcement is in the core
(specdebug/capability.py), which refuses every write of a read-only app whichever action reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from specdebug.core.startup.events import ServerState
from specdebug.tui.context import AppContext

if TYPE_CHECKING:
    from specdebug.core.profiles import Profile
    from specdebug.core.servers import ServerRecord

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


class Pane(Widget):
    PANE_ID: ClassVar[str] = "pane"
    TITLE: ClassVar[str] = "Pane"
    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    can_focus = True  # fallback focus target when a pane has no focusable child
    DEFAULT_CSS = """
    Pane { height: 1fr; width: 1fr; }
    """

    def __init__(self, ctx: AppContext, **kwargs) -> None:
        super().__init__(id=kwargs.pop("id", self.PANE_ID), **kwargs)
        self.ctx = ctx
        self.from_palette = False  # set while the command palette runs one of this pane's actions

    class ServerStateChanged(Message):
        """A pane saw the profile's server change state (ready, failed, stopped, exited); the app
        tells every pane (`server_state_changed`)."""

        def __init__(self, state: ServerState, record: ServerRecord | None = None) -> None:
            super().__init__()
            self.state = state
            self.record = record

    class ProfileChanged(Message):
        """Another profile was picked; the app tells every pane (`profile_changed`)."""

        def __init__(self, profile: Profile) -> None:
            super().__init__()
            self.profile = profile

    class JournalChanged(Message):
        """Another seat wrote to the shared journal; the app tells every pane (`journal_changed`)."""

    def server_state_changed(self, state: ServerState, record: ServerRecord | None) -> None:
        """Hook: the profile's server changed state.  Panes that show server state refresh here."""

    def profile_changed(self, profile: Profile) -> None:
        """Hook: another profile was picked (ctx.profile is it already)."""

    def journal_changed(self) -> None:
        """Hook: the session journal got events from elsewhere."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker messages do not bubble to the app: a pane's failed worker becomes a toast here."""
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self.notify(f"{event.worker.name or 'task'} failed: {event.worker.error}", severity="error")

    def running_servers(self) -> list[RunningServer]:
        """Hook: servers this pane knows are still running (asked when the user quits)."""
        return []

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.ctx.readonly and action in self.MUTATING_ACTIONS:
            return False
        return True

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
