"""What the app needs to start: its pane classes, every binding id, and the Boot of the command line.

The app's module (tui.app) is what the first screen needs and no more: textual and a few light
modules of ours.  The panes, the core and the transport (pydantic models, asyncssh: ~1.3 CPU-s of
imports) are imported here when asked for, and by the command line's app in a thread after its
first screen (Boot): the hosts show as connecting at once, and as connected when they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.binding import Binding

from specdebug.errors import SpecdebugError

if TYPE_CHECKING:
    from textual.command import Provider

    from specdebug.tui.context import AppContext
    from specdebug.tui.pane import Pane


def load_panes() -> list[type[Pane]]:
    """The pane classes in tab order (their modules are the heavy part of the app's imports)."""
    from specdebug.tui.panes.bench import BenchPane
    from specdebug.tui.panes.bisect import BisectPane
    from specdebug.tui.panes.env import EnvPane
    from specdebug.tui.panes.hosts import HostsPane
    from specdebug.tui.panes.logs import LogsPane
    from specdebug.tui.panes.startup import StartupPane

    return [HostsPane, StartupPane, LogsPane, EnvPane, BenchPane, BisectPane]


def binding_ids() -> set[str]:
    """Every binding id a keymap may name: those of the app, its panes, screens and widgets (their
    modules imported here, as some are only imported when first shown) and Textual's own."""
    import importlib
    import pkgutil

    from textual.dom import DOMNode

    import specdebug.tui.screens
    import specdebug.tui.widgets

    load_panes()
    for package in (specdebug.tui.screens, specdebug.tui.widgets):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    ids: set[str] = set()
    todo: list[type] = [DOMNode]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        ids.update(b.id for b in vars(cls).get("BINDINGS", ()) if isinstance(b, Binding) and b.id)
    return ids


class BootFailed(SpecdebugError):
    """What the command line cannot open (a bad host, a profile that does not load): said on stderr."""


class Boot(Protocol):
    """How the command line's app gets its hosts and context after its first screen.

    `hosts` and `readonly` are known from the arguments.  Then, in turn: `imports` (in a thread: the
    connections' modules), `build` (on the app's loop: the connections and the journal; BootFailed
    for what cannot open), the connections start, `imports_panes` (in a thread, while they connect),
    `keymap` (on the loop), and the panes are mounted."""

    hosts: list[str]
    readonly: bool

    def imports(self) -> None: ...

    def build(self) -> AppContext: ...

    def imports_panes(self) -> None: ...

    def keymap(self) -> dict[str, str]: ...


def actions_provider() -> type[Provider]:
    from specdebug.tui.palette import ActionsProvider

    return ActionsProvider


def seats_provider() -> type[Provider]:
    from specdebug.tui.widgets.seats import SeatsProvider

    return SeatsProvider
