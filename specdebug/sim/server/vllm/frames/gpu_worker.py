"""vllm/v1/worker/gpu_worker.py: the RPCs a worker answers pass through Worker (sim.server.vllm.frames)."""

from __future__ import annotations

from specdebug.sim.server.vllm.frames.gpu_model_runner import GPUModelRunner


class Worker:
    def __init__(self, method: str | None) -> None:
        self.model_runner = GPUModelRunner(method)

    def execute_model(self, scheduler_output: tuple[float, ...]) -> None:
        return self.model_runner.execute_model(scheduler_output)

    def sample_tokens(self, grammar_output: tuple[float, ...]) -> str:
        return self.model_runner.sample_tokens(grammar_output)
