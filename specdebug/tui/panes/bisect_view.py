"""The Bisect pane's state, folded from the engine's events (pure: no widgets, tests feed events)."""

from __future__ import annotations

from typing import Any

from specdebug.core.bisect import models as bm


class BisectView:
    """The pane's state, folded from the engine's events (pure: tests feed events directly)."""

    def __init__(self) -> None:
        self.planned: bm.Planned | None = None
        self.states: dict[str, str] = {}
        self.stage = ""
        self.trials: dict[int, bm.TrialRow] = {}
        self.running: bm.TrialStarted | None = None
        self.progress: bm.TrialProgress | None = None
        self.estimate: bm.Estimate | None = None
        self.evidence: bm.Evidence | None = None
        self.awaiting: bm.AwaitJudgement | None = None
        self.paused = False
        self.result: bm.Result | None = None

    def apply(self, ev: Any) -> None:
        if isinstance(ev, bm.Planned):
            self.__init__()  # type: ignore[misc]
            self.planned = ev
            self.states = {k.name: "suspect" for k in ev.knobs}
        elif isinstance(ev, bm.TrialStarted):
            self.running, self.progress = ev, None
        elif isinstance(ev, bm.TrialProgress):
            self.progress = ev
        elif isinstance(ev, bm.TrialDone):
            self.trials[ev.row.index] = ev.row
            if self.running is not None and self.running.index == ev.row.index:
                self.running = self.progress = None
        elif isinstance(ev, bm.EndsJudged):
            self.evidence = ev.evidence
        elif isinstance(ev, bm.KnobStates):
            self.states, self.stage = dict(ev.states), ev.stage
        elif isinstance(ev, bm.Estimate):
            self.estimate = ev
        elif isinstance(ev, bm.AwaitJudgement):
            self.awaiting = ev
        elif isinstance(ev, bm.Paused):
            self.paused = ev.paused
        elif isinstance(ev, bm.Finished):
            self.result, self.running, self.progress, self.awaiting = ev.result, None, None, None
            for row in ev.result.trials:
                self.trials[row.index] = row
