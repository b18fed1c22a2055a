"""vllm/v1/sample/rejection_sampler.py: the target's tokens checked against the drafts (sim.server.vllm.frames)."""

from __future__ import annotations

import time


class RejectionSampler:
    def forward(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))
