"""vllm/v1/spec_decode/eagle.py: a draft model's proposals (EAGLE, MTP) (sim.server.vllm.frames)."""

from __future__ import annotations

import time


class EagleProposer:
    def propose(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))
