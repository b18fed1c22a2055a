"""Who is watching: the seats of a pairing session, under the header, and the driver's seat commands.

Inside a `specdebug pair` session (SPECDEBUG_PAIR_SOCKET set) the bar polls tmux once a second
(`server-access -l` and `list-clients`, two local forks of a few ms) and shows every granted user
with ro/rw and attached or not; a toast says who joined, left or changed mode.  The command
palette gets "Seat: ..." commands for the driver (the socket's owner, whose app this is) to grant
write, make read-only or revoke a seat; they refuse when the last key came from someone else's
seat, and in a read-only app (the capability check in core.pair.session refuses them too).

Also here: JournalFollower, which follows a journal kept on the box (`--session box:NAME`) and tells
the panes when another instance wrote to it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.css.query import NoMatches
from textual.widget import Widget

from specdebug.capability import process_is_readonly
from specdebug.core.boxjournal import BoxJournal
from specdebug.core.pair import session as pair
from specdebug.core.pair import view as pair_view
from specdebug.core.pair.session import Mode, Seat
from specdebug.core.records import JournalRecord
from specdebug.tui.context import AppContext
from specdebug.tui.widgets.steady import Steady


class SeatsBar(Steady):
    """One line: `pairing NAME  driver alice ●  bob ro ●  carol rw ○` (● attached, ○ not)."""

    DEFAULT_CSS = """
    SeatsBar { height: 1; padding: 0 1; background: $boost; display: none; }
    SeatsBar.-pair { display: block; }
    """
    POLL_S = 1.0

    def __init__(
        self, socket: str | None = None, name: str | None = None, *, readonly: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(Text(""), id=kwargs.pop("id", "seats"), **kwargs)
        self.readonly = readonly  # a read-only seat offers no seat changes (the driver grants them)
        self.socket = socket if socket is not None else os.environ.get(pair.ENV_SOCKET)
        self.pair_name = name if name is not None else os.environ.get(pair.ENV_NAME, "")
        self.seats: list[Seat] = []
        self.clients: list[pair.Client] = []
        self.owner_uid = os.getuid()

    @property
    def active(self) -> bool:
        return bool(self.socket)

    def on_mount(self) -> None:
        if not self.active:
            return
        self.add_class("-pair")
        self.watch_seats()

    @work(exclusive=True, group="seats-watch", exit_on_error=False)
    async def watch_seats(self) -> None:
        """tmux is an outside process with no event to wait on: ask it every POLL_S (the app's own
        state never needs this; it comes through the store)."""
        while True:
            await self._ask_tmux()
            await asyncio.sleep(self.POLL_S)

    @work(exclusive=True, group="seats-poll", exit_on_error=False)
    async def poll(self) -> None:
        await self._ask_tmux()

    async def _ask_tmux(self) -> None:
        socket = self.socket
        assert socket is not None
        folder = Path(socket).parent  # read-only seats are on views of their own (core/pair/view.py)
        acl, attached, _ = await asyncio.gather(
            asyncio.to_thread(pair_view.seat_modes, socket, folder),
            asyncio.to_thread(pair_view.seat_clients, socket, folder, pair.CLIENT_FORMAT),
            # read-only seats' views follow the driver's screen size (their status says when cut off)
            asyncio.to_thread(pair_view.fit_views, socket, self.pair_name, folder),
        )
        seats = pair.seats_now(acl, attached)
        notes = pair.seat_changes(self.seats, seats)
        self.seats, self.clients = seats, attached
        self.update(self.render_seats())
        for note in notes:
            self.app.notify(note, title="pairing", timeout=6)

    def render_seats(self) -> Text:
        text = Text()
        text.append(f"pairing {self.pair_name}", style="bold")
        driver_on = sum(1 for c in self.clients if c.uid == self.owner_uid)
        text.append("  driver ", style="dim")
        text.append(pair.user_name(self.owner_uid), style="bold")
        text.append(" ●" if driver_on else " ○", style="green" if driver_on else "dim")
        if not self.seats:
            text.append("  no seats granted", style="dim")
        for seat in self.seats:
            text.append("  ")
            text.append(seat.user, style="bold")
            text.append(f" {seat.mode}", style="yellow" if seat.mode is Mode.RW else "cyan")
            text.append(
                " ● attached" if seat.attached else " ○ away", style="green" if seat.attached else "dim"
            )
        return text

    def who_typed_from(self) -> list[pair.Client]:
        """The session's clients, a view's inner client named as its seat (it runs as the driver)."""
        assert self.socket is not None
        return pair_view.attribute(pair.clients(self.socket), self.socket, Path(self.socket).parent)

    async def change(self, user: str, action: str) -> None:
        """Grant write (`rw`), make read-only (`ro`) or revoke (`revoke`) a seat: the driver only."""
        socket = self.socket
        if socket is None:
            return
        attached = await asyncio.to_thread(self.who_typed_from)
        actor = pair.acting_client(attached, self.owner_uid)
        if actor is not None and actor.uid != self.owner_uid:
            self.app.notify(
                f"only the driver ({pair.user_name(self.owner_uid)}) changes seats; the last key came from {actor.user}",
                severity="warning",
            )
            return
        try:
            if action == "revoke":
                await asyncio.to_thread(pair.revoke, socket, user)
            else:
                await asyncio.to_thread(pair.grant, socket, user, Mode(action))
        except (pair.PairError, PermissionError, OSError) as exc:
            self.app.notify(f"seat {user}: {exc}", severity="error")
            return
        self.poll()


def acting_seat(socket: str) -> str | None:
    """The user whose key came last in the pairing session (tmux's client activity; a view's inner
    client counts as its seat), for the journal's `seat` field; None when tmux cannot tell."""
    try:
        folder = Path(socket).parent
        actor = pair.acting_client(pair_view.attribute(pair.clients(socket), socket, folder), os.getuid())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return actor.user if actor is not None else None


class SeatsProvider(Provider):
    """Palette: `Seat: grant write to bob`, `Seat: make bob read-only`, `Seat: revoke bob`."""

    _bar: SeatsBar | None = None
    _fresh: tuple[dict[str, Mode], list[str]] = ({}, [])

    async def startup(self) -> None:
        """Seats and revoked seats as tmux and the seat list say now, when the palette opens."""
        try:
            bar = self.app.query_one(SeatsBar)
        except NoMatches:  # no seats bar: this session is not shared
            return
        if bar.readonly or not bar.active or bar.socket is None or process_is_readonly():
            return
        folder = Path(bar.socket).parent
        modes = await asyncio.to_thread(pair_view.seat_modes, bar.socket, folder)
        listed = await asyncio.to_thread(pair.read_seats, folder)
        revoked = [u for u in (listed or {}).get("revoked", []) if isinstance(u, str) and u not in modes]
        self._bar, self._fresh = bar, (modes, revoked)

    def _commands(self) -> Iterator[tuple[str, Callable[[], Awaitable[None]], str]]:
        bar = self._bar
        if bar is None:
            return
        modes, revoked = self._fresh
        driver = pair.user_name(bar.owner_uid)
        for seat in [Seat(u, m) for u, m in sorted(modes.items())]:
            if seat.user in (driver, "root"):  # the driver's own seat (and root's) is not a seat to change
                continue
            if seat.mode is Mode.RO:
                yield (
                    f"Seat: grant write to {seat.user}",
                    partial(bar.change, seat.user, "rw"),
                    ("they can then type, and run commands as you through tmux"),
                )
            else:
                yield f"Seat: make {seat.user} read-only", partial(bar.change, seat.user, "ro"), ""
            yield f"Seat: revoke {seat.user}", partial(bar.change, seat.user, "revoke"), "disconnects them"
        for user in revoked:
            if user in (driver, "root"):
                continue
            yield f"Seat: grant read-only again to {user}", partial(bar.change, user, "ro"), "revoked earlier"
            yield f"Seat: grant write again to {user}", partial(bar.change, user, "rw"), "revoked earlier"

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands():
            yield DiscoveryHit(text, callback, help=help_text)


class JournalFollower(Widget):
    """Invisible: follows a journal kept on the box and tells the panes when others wrote to it."""

    DEFAULT_CSS = "JournalFollower { display: none; }"
    POLL_S = 0.5

    def __init__(self, ctx: AppContext, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ctx = ctx

    def on_mount(self) -> None:
        journal = self.ctx.journal
        socket = os.environ.get(pair.ENV_SOCKET)
        if socket and journal is not None and hasattr(journal, "seat"):
            journal.seat = partial(acting_seat, socket)  # each event names the seat that typed it
        if isinstance(journal, BoxJournal):  # a local journal has no other writers to hear from
            journal.listeners.append(self._new_events)
            self.follow(journal)

    @work(exclusive=True, group="journal-follow", exit_on_error=False)
    async def follow(self, journal: BoxJournal) -> None:
        await journal.follow(self.POLL_S)

    def _new_events(self, events: list[JournalRecord]) -> None:
        from specdebug.tui.pane import Pane

        self.post_message(Pane.JournalChanged(events))
        for ev in events:
            if ev.kind in ("bench_result", "mark") and ev.by:
                what = "a benchmark result" if ev.kind == "bench_result" else "a mark"
                who = ev.by if not ev.seat else f"{ev.seat} (seat of {ev.by})"
                if ev.forged:  # the box saw ev.by write it (core.boxjournal.attribute)
                    who += f", forged as {str(ev.by_claimed)[:64]}"
                self.app.notify(f"{who} recorded {what}", title="shared journal", timeout=4)
