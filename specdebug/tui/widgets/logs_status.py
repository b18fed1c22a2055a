"""The logs pane's one-line status: what is followed, in which state, and what the view is hiding.

Why apart from the pane: the line is a pure function of a few facts (a paused view, lines dropped
from view, the filter and warmup modes), so it is written once here, testable without a screen, and
the pane only gathers the facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

__all__ = ["LogsStatus", "status_text"]

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
    state: str
    paused: int | None
    matches: int
    dropped: int
    marks: int
    pack: str | None
    filter_text: str
    hide: bool
    include_warmup: bool
    notice: str | None


def status_text(s: LogsStatus) -> Text:
    t = Text(no_wrap=True)
    t.append(s.where or NO_LOG, style="bold")
    t.append(f"  {s.state}", style=STATE_STYLE.get(s.state, "dim"))
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
