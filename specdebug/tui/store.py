"""The app's shared state, as Textual means it: reactives on the app, bound down into the panes.

Why a module of its own: panes never call each other and the app never calls hook methods on every
pane. A pane that learns something posts a message up (`Pane.ServerStateChanged`, `Pane.EndPicked`,
`Pane.HostSelected`); the app puts it into one of the reactives below; every pane has the same
reactives, bound to the app's with `data_bind` when the app composes it, and its watchers run the
pane's hooks (`profile_changed`, `server_state_changed`, ...). So data flows one way: messages
up, attributes down, and nothing polls.

The values are frozen and carry a sequence number where the same news may come twice (a server
READY twice in a row is two pieces of news; a reactive would drop an equal second value).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specdebug.core.control.events import ServerState

if TYPE_CHECKING:
    from specdebug.core.control.records import ServerRecord
    from specdebug.core.records import JournalRecord

__all__ = ["BOUND", "EndPick", "JournalNews", "ServerNews", "next_seq"]

_seq = itertools.count(1)


def next_seq() -> int:
    """A number that tells two equal pieces of news apart."""
    return next(_seq)


@dataclass(frozen=True)
class ServerNews:
    """A pane saw the profile's server change state (ready, failed, stopped, exited)."""

    state: ServerState
    record: ServerRecord | None = None
    seq: int = field(default_factory=next_seq)


@dataclass(frozen=True)
class EndPick:
    """A benchmark row's profile was chosen as a bisection end (the Bench pane's g/B)."""

    side: str  # "good" | "bad"
    result_profile: str | None
    seq: int = field(default_factory=next_seq)


@dataclass(frozen=True)
class JournalNews:
    """Events another seat (or instance) wrote to the shared journal, as read back from the box."""

    events: tuple[JournalRecord, ...]
    seq: int = field(default_factory=next_seq)


# the reactives every pane has and the app binds (name -> what it is)
BOUND = {
    "profile": "the profile every pane acts on",
    "selected": "the host every pane acts on",
    "server_news": "the latest ServerNews",
    "journal_news": "the latest JournalNews (events others wrote to the shared journal)",
    "end_pick": "the latest EndPick",
}
