"""Keys typed on the command line's first screen, before the panes are there: held, then replayed in order.

Why: the first screen paints before the panes are imported and mounted (tui.boot), so a user who
types at once (`3 / verify Enter`, as they would once the app is up) had keys with nothing to take
them: the letters were lost and Enter reached the hosts table once it appeared (CI, issue 41: the
busy-loops keys test typed as soon as the host showed "connected").  Keys the app itself answers on
the first screen (Quit, a tab key: the body then comes with that pane shown) run at once while
nothing is held; once a key is held, every key after it is held too, so none overtakes another, and
`q` inside a held filter word is a letter, not Quit.  Ctrl+C always runs at once.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import events

__all__ = ["EarlyKeys"]

LIMIT = 4096  # a paste into the first screen is held up to this many keys; the rest are dropped
ALWAYS_AT_ONCE = frozenset({"ctrl+c"})


class EarlyKeys:
    """The held keys of one app (None once replayed: the app holds no more)."""

    def __init__(self) -> None:
        self.held: list[tuple[str, str | None]] | None = []
        self.dropped = 0

    def hold(self, event: events.Key, ready: bool, app_answers: Callable[[str], bool]) -> bool:
        """Whether `event` is held (the app must not handle it now).  `app_answers(key)`: the app has
        a binding for it on the first screen (asked only then)."""
        if self.held is None or event.is_forwarded or event.key in ALWAYS_AT_ONCE:
            return False
        if ready and not self.held:
            self.held = None  # up and nothing waiting: hold no more
            return False
        if not self.held and not ready and app_answers(event.key):
            return False
        if len(self.held) < LIMIT:
            self.held.append((event.key, event.character))
        else:
            self.dropped += 1
        return True

    def release(self) -> list[events.Key]:
        """The held keys as new events, in the order typed; nothing is held after this."""
        held, self.held = self.held or [], None
        return [events.Key(key, character) for key, character in held]
