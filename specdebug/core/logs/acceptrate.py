"""Speculative accept rates: which definition a printed rate uses, and one rate of specdebug's own.

Why: SGLang changed what `accept rate:` means in 0.5.23 (managers/scheduler_components/
metrics_reporter.py:968-985): older releases print accepted tokens *including* the bonus token over
forwards x draft tokens (= accept_len / draft_tokens), 0.5.23 prints accepted drafts *without* it over
forwards x (draft tokens - 1) (= (accept_len - 1) / (draft_tokens - 1)).  For 2 steps / 3 draft tokens
at accept length 1.88 that is 0.63 before and 0.44 after: an upgrade would look like a worse drafter.

So every figure says which definition it uses, and specdebug adds `draft_accept_rate`, computed the
same way for every version and engine from the accept length and the draft tokens (the
`speculative_num_draft_tokens` of the run's server_args line): accepted drafts per drafted token,
bonus left out, which is also what vLLM's `Draft acceptance rate` and SGLang 0.5.23 measure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from specdebug.engines import sglang, vllm
from specdebug.engines.sglang import WITH_BONUS, WITHOUT_BONUS

OWN = "draft_accept_rate"
OWN_DEFINITION = (
    "specdebug's own, the same for every version: (accept length - 1) / (draft tokens - 1), accepted "
    f"drafts per drafted token without the bonus token (what {sglang.ENGINE.title} >= 0.5.23 and "
    f"{vllm.ENGINE.title} print)"
)
# the printed `accept rate:` of the batch lines: its meaning changed in 0.5.23 (engines.sglang)
DEFINITIONS = sglang.ACCEPT_RATE_MEANINGS
UNKNOWN = "cannot tell which definition (draft tokens unknown, or accept length = draft tokens)"
VLLM_DEFINITION = vllm.ACCEPT_RATE_MEANINGS["draft_acceptance_rate"]

# ServerArgs(..., speculative_num_draft_tokens=3, ...) or {'speculative_num_draft_tokens': 3, ...}
_DRAFT_TOKENS_RE = re.compile(r"""\bspeculative_num_draft_tokens['"]?\s*[=:]\s*(\d+)""")
# both printed with 2 decimals: rounding moves the rate by up to 0.005 and L / D by up to 0.005 / D
_TOL = 0.0105


def draft_tokens_in(text: str) -> int | None:
    """speculative_num_draft_tokens from a server_args line (either shape), else None."""
    m = _DRAFT_TOKENS_RE.search(text)
    return int(m.group(1)) if m else None


def own_rate(accept_len: float, draft_tokens: int | None) -> float | None:
    """(accept_len - 1) / (draft_tokens - 1), or None when the draft tokens are unknown or 1."""
    if draft_tokens is None or draft_tokens < 2:
        return None
    return max(accept_len - 1.0, 0.0) / (draft_tokens - 1)


def which_definition(accept_len: float, accept_rate: float, draft_tokens: int | None) -> str | None:
    """WITH_BONUS or WITHOUT_BONUS when the printed rate fits exactly one of them, else None."""
    if draft_tokens is None or draft_tokens < 2:
        return None
    fits = [
        name
        for name, value in (
            (WITH_BONUS, accept_len / draft_tokens),
            (WITHOUT_BONUS, (accept_len - 1.0) / (draft_tokens - 1)),
        )
        if abs(value - accept_rate) <= _TOL
    ]
    return fits[0] if len(fits) == 1 else None


class AcceptRates:
    """Per run: the draft tokens from the args line, the own rate of each batch line, the definitions seen."""

    def __init__(self, draft_tokens: int | None = None) -> None:
        self.given = draft_tokens  # from the profile, when the log has no server_args line
        self.draft_tokens = draft_tokens
        self.seen: Counter[str] = Counter()
        self.vllm = False
        self.derived = 0

    def new_run(self, args_line: str) -> None:
        self.draft_tokens = draft_tokens_in(args_line) or self.given
        self.seen.clear()
        self.vllm, self.derived = False, 0

    def derive(self, event: str, metrics: dict[str, Any]) -> float | None:
        """The own rate for one batch/stats line's metrics (None when it cannot be computed)."""
        rate = self._derive(event, metrics)
        self.derived += rate is not None
        return rate

    def derive_columns(
        self, event: str, names: Sequence[str], cols: Sequence[list[float]]
    ) -> list[float] | None:
        """`derive` for a run of lines with the same metric names (float columns, one per name):
        the own rate of each line, or None when `derive` gives None for every one of them."""
        if event == "spec_decode":
            if "draft_acceptance_rate" not in names:
                return None
            self.vllm = True
            out = [rate / 100.0 for rate in cols[names.index("draft_acceptance_rate")]]
        elif event == "decode_batch" and "accept_len" in names:
            lengths = cols[names.index("accept_len")]
            if "accept_rate" in names and (self.draft_tokens is None or self.draft_tokens < 2):
                if lengths:  # (which_definition cannot tell without them)
                    self.seen[UNKNOWN] += len(lengths)
            elif "accept_rate" in names:
                dt = self.draft_tokens
                self.seen.update(
                    which_definition(length, printed, dt) or UNKNOWN
                    for length, printed in zip(lengths, cols[names.index("accept_rate")], strict=True)
                )
            if self.draft_tokens is None or self.draft_tokens < 2:
                return None
            steps = self.draft_tokens - 1
            out = [max(length - 1.0, 0.0) / steps for length in lengths]
        else:
            return None
        self.derived += len(out)
        return out

    def _derive(self, event: str, metrics: dict[str, Any]) -> float | None:
        if event == "spec_decode":
            rate = metrics.get("draft_acceptance_rate")
            if isinstance(rate, float | int):
                self.vllm = True
                return float(rate) / 100.0
            return None
        if event != "decode_batch":
            return None
        length = metrics.get("accept_len")
        if not isinstance(length, float | int):
            return None
        printed = metrics.get("accept_rate")
        if isinstance(printed, float | int):
            self.seen[which_definition(float(length), float(printed), self.draft_tokens) or UNKNOWN] += 1
        return own_rate(float(length), self.draft_tokens)

    def definitions(self) -> dict[str, str]:
        """{metric: the definition it uses} for the rates this run printed (for a report)."""
        out: dict[str, str] = {}
        known = [k for k in self.seen if k in DEFINITIONS]
        if known:
            # a run has one definition; if lines disagree, the commoner wins and both are named
            best = max(known, key=lambda k: self.seen[k])
            out["accept_rate"] = DEFINITIONS[best] + (
                ""
                if len(known) == 1
                else f" (some lines fit the other: {DEFINITIONS[min(known, key=self.seen.__getitem__)]})"
            )
        elif self.seen:
            out["accept_rate"] = UNKNOWN
        if self.vllm:
            out["draft_acceptance_rate"] = VLLM_DEFINITION
        if self.derived:
            out[OWN] = OWN_DEFINITION
        return out
