"""The Bisect pane's state, folded from the engine's events, and the text helpers of its tables
(pure: no widgets, tests feed events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specdebug.core.bisect import models as bm
from specdebug.core.profiles import ProfileError, load_profile


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


def short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def progress_bar(fraction: float | None, width: int = 20) -> str:
    if fraction is None:
        return ""
    full = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * full + "░" * (width - full)


def profile_for(result_profile: str | None, choices: list[Path]) -> Path | None:
    """The profile file a Bench history row was measured with: same name (a loader may prefix it)."""
    if not result_profile:
        return None
    names = {}
    for path in choices:
        try:
            names[path] = load_profile(path).name
        except (ProfileError, OSError):
            continue
    exact = next((p for p, n in names.items() if n == result_profile), None)
    return exact or next((p for p, n in names.items() if result_profile.endswith(f"-{n}")), None)
