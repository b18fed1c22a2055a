"""vllm/v1/spec_decode/ngram_proposer.py (sim.server.vllm.frames)."""

from __future__ import annotations

import time


class NgramProposer:
    def propose(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))
