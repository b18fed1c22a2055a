"""vllm/v1/worker/gpu_model_runner.py: forward in execute_model, sampling and the drafter in
sample_tokens, as 0.32.0's runner splits them (sim.server.vllm.frames)."""

from __future__ import annotations

import time
from typing import Any

from specdebug.sim.server.vllm.frames.eagle import EagleProposer
from specdebug.sim.server.vllm.frames.ngram_proposer import NgramProposer
from specdebug.sim.server.vllm.frames.rejection_sampler import RejectionSampler
from specdebug.sim.server.vllm.frames.sampler import Sampler

DRAFTERS = {"ngram": NgramProposer, "eagle": EagleProposer, "eagle3": EagleProposer, "mtp": EagleProposer}


class GPUModelRunner:
    def __init__(self, method: str | None) -> None:
        self.drafter: Any = DRAFTERS.get(method or "", NgramProposer)() if method else None
        self.sampler = Sampler()
        self.rejection_sampler = RejectionSampler()

    def execute_model(self, scheduler_output: tuple[float, ...]) -> None:
        """None: the output comes from sample_tokens (the engine core asks for it next)."""
        self._model_forward(scheduler_output[0])

    def _model_forward(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))

    def sample_tokens(self, grammar_output: tuple[float, ...]) -> str:
        sample_s, draft_s = grammar_output
        self._sample(sample_s)
        if self.drafter is not None:
            self.propose_draft_token_ids(draft_s)
        return "ModelRunnerOutput"

    def _sample(self, seconds: float) -> None:
        (self.rejection_sampler if self.drafter is not None else self.sampler).forward(seconds)

    def propose_draft_token_ids(self, seconds: float) -> None:
        self.drafter.propose(seconds)
