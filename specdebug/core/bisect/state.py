"""What the bisection engine's phases share: its state, declared once (run.py's Bisection fills it).

The engine is one class assembled from its phases, each a module: the ends (ends.py), the check of
what the search named (verify.py), the result (finish.py), the trial loop and the search (run.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from specdebug.core.bisect.book import Book
from specdebug.core.bisect.fit import Fit
from specdebug.core.bisect.judge import Judge
from specdebug.core.bisect.knobs import Candidates
from specdebug.core.bisect.models import (
    BisectOptions,
    Drift,
    Finished,
    Role,
    Settings,
)
from specdebug.core.bisect.plan import Plan
from specdebug.core.bisect.trial import Nodes
from specdebug.core.journal import EventJournal
from specdebug.core.profiles import Profile
from specdebug.remote.api import Remote

Clock = Callable[[], float]
MIN_END_RUNS = 2  # each end at least twice when one run cannot tell them apart (judge.one_run_enough)
# the ends stop repeating once the runs that would settle them (as measured so far) are over this many
# times --repeats: those launches could not decide it (issue 39: 8 launches to end cannot-tell on 2 knobs)
FUTILE = 2
EXIT0 = ("found", "several", "interaction")


class EngineState:
    """The engine's state and the steps one phase asks of another."""

    remote: Remote
    journal: EventJournal | None
    clock: Clock
    nodes: Nodes | None
    options: BisectOptions
    cands: Candidates
    book: Book
    settings: Settings
    id: str
    launches: int
    warnings: list[str]
    plan: Plan | None
    drift: Drift | None
    _map: list[int]
    _phases: list[tuple[Plan, list[int]]]
    _crashed: bool
    _slow_notes: list[str]
    _durations: list[float]
    _references: int
    _proof: Fit | None  # the additive fit that confirmed the answer (verify_phase.py)

    def _real(self, units: frozenset[int]) -> frozenset[int]:
        """The plan's unit indices as the candidates' (a search of part of the knobs maps them)."""
        return frozenset(self._map[i] for i in units)

    # implemented by Bisection (run.py) and the phases: declared here so that each phase reads as a whole
    def _measure(self, profile: Profile, fp: str, role: Role, query: frozenset[int]) -> AsyncIterator[Any]:
        raise NotImplementedError

    def _search(self, judge: Judge) -> AsyncIterator[Any]:
        raise NotImplementedError

    def _cap(self) -> int:
        raise NotImplementedError

    def _naive(self) -> int:
        raise NotImplementedError

    def _finish(
        self,
        verdict: str,
        t0: float,
        judge: Judge,
        *,
        culprits: frozenset[int] = frozenset(),
        search: str | None = None,
        notes: list[str] | None = None,
        confirmed: bool | None = None,
    ) -> Finished:
        raise NotImplementedError
