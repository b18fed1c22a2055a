"""The footer: the keys of the focused pane, drawn as one line of one widget.

Why not Textual's Footer: it recomposes on every focus change, mounting a new widget per key, and each
new key's `compact` reactive flips a CSS class twice (its default is True, the footer binds False), so
every pane switch restyled ~30 widgets and laid the screen out again: about two thirds of the CPU of
a pane switch (py-spy, tests/perf/bench_keys.py).  Here a change of bindings only marks this one
line for repaint; the keys are read when it is drawn, so a burst of focus changes costs one line.

It draws what Footer draws with the default theme (same component classes, so a theme's footer
colours apply): ` key description ` per shown binding, the command palette's key on the right after a
thin bar; a key whose action is disabled is dim; a click on a key presses it.
"""

from __future__ import annotations

from typing import NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget


class _Key(NamedTuple):
    key: str  # what a click presses
    display: str
    description: str
    enabled: bool


class KeyBar(Widget):
    """One-line footer of the active bindings (see the module doc for why not Textual's Footer)."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"footer-key--key", "footer-key--description", "keybar--bar"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        width: 1fr;
        color: $footer-foreground;
        background: $footer-background;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        .keybar--bar { color: $foreground 20%; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 (Textual's name)
        super().__init__(id=id)
        self._spans: list[tuple[int, int, _Key]] = []  # x range drawn -> key (for clicks)

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, _screen: object) -> None:
        self.refresh()  # repaint this line only; the keys are read when it is drawn

    def _keys(self) -> tuple[list[_Key], _Key | None]:
        """The keys to show (one per action, in binding order) and the command palette's."""
        app = self.app
        active = self.screen.active_bindings
        shown: dict[str, _Key] = {}
        for _node, binding, enabled, _tooltip in active.values():
            if binding.show and binding.action not in shown:
                shown[binding.action] = _Key(
                    binding.key, app.get_key_display(binding), binding.description, enabled
                )
        palette = None
        if app.ENABLE_COMMAND_PALETTE and (found := active.get(app.COMMAND_PALETTE_BINDING)) is not None:
            b = found.binding
            palette = _Key(b.key, app.get_key_display(b), b.description, found.enabled)
        return list(shown.values()), palette

    def render(self) -> Text:
        keys, palette = self._keys()
        key_style = self.get_component_rich_style("footer-key--key")
        desc_style = self.get_component_rich_style("footer-key--description")
        width = self.size.width
        right = Text()
        if palette is not None:
            right.append("▏", self.get_component_rich_style("keybar--bar"))
            right.append(palette.display, key_style)
            right.append(f" {palette.description}", desc_style)
            right.append(" ")  # Footer's padding there: the bar's own colours
        line, spans, x = Text(no_wrap=True, overflow="crop"), [], 0
        room = max(0, width - right.cell_len)
        for k in keys:
            item = Text.assemble((f" {k.display} ", key_style), (f"{k.description} ", desc_style))
            if not k.enabled:
                item.stylize_before(Style(dim=True))
            spans.append((x, x + item.cell_len, k))
            line.append_text(item)
            x += item.cell_len
        line.truncate(room, pad=True)
        if palette is not None:
            spans.append((room, width, palette))
            line.append_text(right)
        self._spans = spans
        return line

    def on_mouse_down(self, event: events.MouseDown) -> None:
        key = next((k for start, end, k in self._spans if start <= event.x < end), None)
        if key is None:
            return
        if key.enabled:
            self.app.simulate_key(key.key)
        else:
            self.app.bell()
