"""The logs pane's one-line status: what is followed, in which state, and what the view is hiding.

Why apart from the pane: the line is a pure function of a few facts (a paused view, lines dropped
from view, the filter and warmup modes), so it is written once here, testable without a screen, and
the pane only gathers the facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rich.text import Text

__all__ = ["BEHIND_SHOWN", "FOLLOW_STATE", "FollowState", "LogsStatus", "human_bytes", "status_text"]


class FollowState(StrEnum):
    """Where the pane's follow of a log stands (shown in the status line)."""

    IDLE = "idle"
    STARTING = "starting"
    FOLLOWING = "following"
    WAITING = "waiting"
    RECONNECTING = "reconnecting"
    ENDED = "ended"
    ERROR = "error"
    STOPPED = "stopped"

    @property
    def busy(self) -> bool:
        """Following (or about to): a new server's log must not take the view over."""
        return self in (
            FollowState.STARTING,
            FollowState.FOLLOWING,
            FollowState.WAITING,
            FollowState.RECONNECTING,
        )


# follow events (core/logs/follow.py kinds) that change the pane's state
FOLLOW_STATE = {
    "opened": FollowState.FOLLOWING,
    "resumed": FollowState.FOLLOWING,
    "missing": FollowState.WAITING,
    "reconnecting": FollowState.RECONNECTING,
    "ended": FollowState.ENDED,
    "error": FollowState.ERROR,
}

NO_LOG = "no log (f: follow profile log, o: open path)"
STATE_STYLE = {
    "following": "green",
    "waiting": "yellow",
    "reconnecting": "bold yellow",
    "error": "bold red",
    "ended": "dim",
}


@dataclass(frozen=True)
class LogsStatus:
    """The facts the status line shows; `paused` is the pending count while paused, else None."""

    where: str | None  # host:path, or the path alone
    state: FollowState
    paused: int | None
    matches: int
    dropped: int
    marks: int
    pack: str | None
    filter_text: str
    hide: bool
    include_warmup: bool
    notice: str | None
    behind: int = 0  # bytes of the file not read yet (measured on the box), 0: caught up or unknown


BEHIND_SHOWN = 256 * 1024  # less is lines in flight, not a reader that cannot keep up


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def status_text(s: LogsStatus) -> Text:
    t = Text(no_wrap=True)
    t.append(s.where or NO_LOG, style="bold")
    t.append(f"  {s.state}", style=STATE_STYLE.get(s.state, "dim"))
    if s.behind >= BEHIND_SHOWN:  # the counts below are of what was read: say what is not yet
        t.append(f"  {human_bytes(s.behind)} behind (counts so far)", style="bold yellow")
    if s.paused is not None:
        t.append(f"  PAUSED {s.paused} pending (End: follow)", style="bold yellow")
    t.append(f"  {s.matches} matches")
    if s.dropped:
        t.append(f"  {s.dropped} dropped from view", style="yellow")
    if s.marks:
        t.append(f"  {s.marks} marks")
    t.append(f"  pack {s.pack or 'auto'}", style="dim")
    if s.filter_text:
        t.append(f"  filter /{s.filter_text}/ ({'hide' if s.hide else 'highlight'})", style="cyan")
    t.append("  warmup " + ("in stats" if s.include_warmup else "excluded"), style="dim")
    if s.notice:
        t.append(f"  {s.notice}", style="bold red")
    return t
