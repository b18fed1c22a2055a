"""Seats of a pairing session, from tmux's own words: pure parsing and comparing (no tmux run here).

`server-access -l` says who is granted and how (`bob (R)`); `list-clients` says who is attached
now.  The app polls both and turns the difference into toasts; these functions are the pure part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Mode(StrEnum):
    RO = "ro"
    RW = "rw"


@dataclass
class Client:
    user: str
    uid: int
    readonly: bool
    activity: int  # unix seconds of the client's last key or mouse event
    tty: str = ""


@dataclass
class Seat:
    user: str
    mode: Mode
    attached: int = 0  # clients of this user attached now


def parse_access_list(text: str) -> dict[str, Mode]:
    """`server-access -l` lines (`bob (R)`, `carol (W)`) -> user -> mode."""
    out: dict[str, Mode] = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\S+)\s+\((R|W)\)\s*", line)
        if m:
            out[m.group(1)] = Mode.RO if m.group(2) == "R" else Mode.RW
    return out


CLIENT_FORMAT = "#{client_uid}\t#{client_user}\t#{client_readonly}\t#{client_activity}\t#{client_tty}"


def parse_clients(text: str) -> list[Client]:
    clients = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        clients.append(
            Client(
                user=parts[1],
                uid=int(parts[0]),
                readonly=parts[2] == "1",
                activity=int(parts[3]) if parts[3].isdigit() else 0,
                tty=parts[4],
            )
        )
    return clients


def seats_now(acl: dict[str, Mode], attached: list[Client]) -> list[Seat]:
    """Granted users with their mode and how many clients each has attached now (pure)."""
    count: dict[str, int] = {}
    for c in attached:
        count[c.user] = count.get(c.user, 0) + 1
    return [Seat(user, mode, count.get(user, 0)) for user, mode in sorted(acl.items())]


def seat_changes(before: list[Seat], after: list[Seat]) -> list[str]:
    """Who joined, left, or changed mode between two looks (for the app's toasts; pure)."""
    old = {s.user: s for s in before}
    new = {s.user: s for s in after}
    notes = []
    for user, s in new.items():
        prev = old.get(user)
        label = "read-only" if s.mode is Mode.RO else "read-write"
        if s.attached and (prev is None or not prev.attached):
            notes.append(f"{user} joined ({label})")
        elif prev is not None and prev.attached and not s.attached:
            notes.append(f"{user} left")
        if prev is not None and prev.mode is not s.mode:
            notes.append(f"{user} is now {label}")
    for user, prev in old.items():
        if user not in new:
            notes.append(f"{user}'s seat was revoked" + (" (disconnected)" if prev.attached else ""))
    return notes


def acting_client(attached: list[Client], owner_uid: int) -> Client | None:
    """The client that typed last (the one whose key opened the palette); a tie goes to the owner.

    tmux keeps activity in whole seconds, so this is a courtesy check that stops a guest from
    changing seats by mistake, not a boundary: a read-write guest can run commands as the owner
    through tmux itself.
    """
    if not attached:
        return None
    return max(attached, key=lambda c: (c.activity, c.uid == owner_uid))
