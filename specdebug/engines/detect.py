"""Which engine wrote a log: evidence per line (each engine's `detect` weights), summed until one leads.

Why evidence and not the first match: a line such as a uvicorn banner is printed by both servers,
and process tags or date prefixes only lean one way; a pack is chosen once one engine leads by
DECIDE_MARGIN, and `best()` answers with whatever evidence there is (None on a tie).
"""

from __future__ import annotations

from collections.abc import Iterable

from specdebug.engines import ENGINES
from specdebug.engines.primitives import WRAPPER_RE

DECIDE_MARGIN = 3


def detect_scores(line: str) -> dict[str, int]:
    """Evidence one line gives for each engine (summed over lines by `PackDetector`)."""
    scores = dict.fromkeys(ENGINES, 0)
    wrapper = WRAPPER_RE.match(line) if line[:1] in "(" or "|" in line[:40] else None
    clean = line[wrapper.end() :] if wrapper else line
    for name, engine in ENGINES.items():
        for weight, rx in engine.detect:
            if rx.search(clean):
                scores[name] += weight
    return scores


def _leader(scores: dict[str, int]) -> tuple[str | None, int]:
    """The engine with the most evidence (None on a tie at the top) and its lead over the next."""
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
    if len(ranked) < 2:
        return (ranked[0][0], ranked[0][1]) if ranked else (None, 0)
    lead = ranked[0][1] - ranked[1][1]
    return (ranked[0][0] if lead > 0 else None), lead


class PackDetector:
    """Accumulates evidence line by line; `decided` once one engine leads by DECIDE_MARGIN."""

    def __init__(self) -> None:
        self.scores = dict.fromkeys(ENGINES, 0)
        self.decided: str | None = None

    def feed(self, line: str) -> str | None:
        if self.decided:
            return self.decided
        for k, v in detect_scores(line).items():
            self.scores[k] += v
        name, lead = _leader(self.scores)
        if name is not None and lead >= DECIDE_MARGIN:
            self.decided = name
        return self.decided

    def best(self) -> str | None:
        """The decided engine, else whichever has more evidence, else None."""
        return self.decided or _leader(self.scores)[0]


def detect_pack(lines: Iterable[str]) -> str | None:
    """The engine name (a pack name) or None (no evidence) for a sample of lines."""
    det = PackDetector()
    for line in lines:
        if det.feed(line):
            break
    return det.best()
