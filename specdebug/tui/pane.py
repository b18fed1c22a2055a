"""Base class of every pane: its id and title, its context, and read-only enforcement.

A pane lists the actions that change the box in MUTATING_ACTIONS; with --readonly those
actions are disabled (check_action returns False), so read-only mode is one switch.  That list
only greys keys out: the enforcement is in the core (core/capability.py), which refuses every
write of a read-only app whichever action reaches it.
"""

from __future__ import annotations

from typing import ClassVar

from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from specdebug.tui.context import AppContext


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

    class ServerEvent(Message):
        """A pane changed the server (launched, ready, failed, stopped); the app tells every pane."""

        def __init__(self, kind: str) -> None:
            super().__init__()
            self.kind = kind

    def server_event(self, kind: str) -> None:
        """Hook: the profile's server changed state.  Panes that show server state refresh here."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker messages do not bubble to the app: a pane's failed worker becomes a toast here."""
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self.notify(f"{event.worker.name or 'task'} failed: {event.worker.error}", severity="error")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.ctx.readonly and action in self.MUTATING_ACTIONS:
            return False
        return True
