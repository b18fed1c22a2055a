"""Acceptance overall and per position from /metrics, and which span it is over (issue 37).

A server's window may hold no drafts (an idle server between benchmarks): its acceptance is then the
counters' since the server started, and the answer says so instead of showing none.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specdebug.core.metrics import PromRates
from specdebug.core.model import Model

Basis = Literal["window", "since_start", "gauge"]


class Acceptance(Model):
    """Acceptance overall and per position, and where it came from: the window's counters (or gauges),
    or, when the window saw no drafts (an idle server), the counters since the server started."""

    basis: Basis
    source: str  # in words: "over the 2.0 s window", "since server start (counters) ..."
    accept_length: float | None = None  # incl. the bonus token
    accept_rate: float | None = None
    per_position: list[float] = Field(default_factory=list)
    drafts: float | None = None  # drafts counted in that span (counters only)
    metrics: dict[str, str] = Field(default_factory=dict)  # field -> the metric, as PromRates.sources


_ACCEPT_FIELDS = ("accept_length", "accept_rate", "per_position")


def acceptance(window: PromRates, since_start: PromRates | None) -> Acceptance | None:
    """The window's acceptance; with no drafts in the window, the counters since start, named so.

    None when neither has any: no speculative figures exported, or no draft since the server started."""
    if window.accept_length is not None or window.accept_rate is not None:
        counted = window.drafts is not None
        basis: Basis
        if counted and window.window_s:
            basis, source = "window", f"over the {window.window_s:.1f} s window (counters)"
        elif counted:
            basis, source = "since_start", "since server start (counters)"
        else:
            basis, source = "gauge", "the server's gauges (its last log interval)"
        return _acceptance(window, basis, source)
    if (
        since_start is None
        or since_start.drafts is None
        or (since_start.accept_length is None and since_start.accept_rate is None)
    ):
        return None
    idle = f"no drafts over the {window.window_s:.1f} s window" if window.window_s else "no window"
    return _acceptance(since_start, "since_start", f"since server start (counters); {idle}")


def _acceptance(r: PromRates, basis: Basis, source: str) -> Acceptance:
    return Acceptance(
        basis=basis,
        source=source,
        accept_length=r.accept_length,
        accept_rate=r.accept_rate,
        per_position=list(r.per_position),
        drafts=r.drafts,
        metrics={k: r.sources[k] for k in _ACCEPT_FIELDS if k in r.sources},
    )


def no_acceptance_reason(window: PromRates, since_start: PromRates | None) -> str | None:
    """Why there is no acceptance although the server counts drafts (None: it exports none)."""
    drafts = since_start.drafts if since_start is not None else window.drafts
    if drafts is None or drafts > 0:
        return None
    return "no drafts since the server started: nothing to measure acceptance on yet"
