"""vllm/v1/sample/sampler.py (sim.server.vllm.frames)."""

from __future__ import annotations

import time


class Sampler:
    def forward(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))
