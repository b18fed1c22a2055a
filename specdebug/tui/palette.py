"""The command palette's actions: every binding of the app and of every pane, with its keys.

Why apart from the app: the palette is one provider over the bindings (it knows nothing of the
panes' work); an entry runs as its key would, read-only refusals and confirmations included.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.binding import Binding
from textual.command import Hit, Hits, Provider

from specdebug.tui.pane import Pane
from specdebug.tui.screens.help import keys_label

if TYPE_CHECKING:
    from specdebug.tui.app import SpecdebugApp

__all__ = ["ActionsProvider"]


class ActionsProvider(Provider):
    """Every binding of the app and of every pane, searchable in the command palette."""

    @property
    def _app(self) -> SpecdebugApp:
        return cast("SpecdebugApp", self.app)  # the provider is in SpecdebugApp.COMMANDS only

    def _entries(self) -> Iterator[tuple[str, Binding, SpecdebugApp | Pane]]:
        app = self._app
        ctx = app.ctx
        seen: set[tuple[str, str]] = set()
        sources: list[tuple[SpecdebugApp | Pane, str]] = [(app, "app")] + [
            (p, p.TITLE) for p in app.query(Pane)
        ]
        for node, scope in sources:
            for binding in node.BINDINGS:
                if (
                    not isinstance(binding, Binding)
                    or not binding.description
                    or (scope, binding.action) in seen
                ):
                    continue
                seen.add((scope, binding.action))
                keys = keys_label(",".join(ctx.keys_of(binding)))  # the keymap's, not only the default
                text = f"{scope}: {binding.description}" + (f"  ({keys})" if keys else "")
                if isinstance(node, Pane) and ctx.readonly and binding.action in node.MUTATING_ACTIONS:
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

    async def _run(self, node: SpecdebugApp | Pane, binding: Binding) -> None:
        """Run as the key would: read-only refusals and second-press confirmations included."""
        if isinstance(node, Pane):
            self._app.show_pane(node.PANE_ID)
            if node.is_refused(binding.action):
                return
            node.from_palette = True
        try:
            await node.run_action(binding.action)
        finally:
            if isinstance(node, Pane):
                node.from_palette = False
