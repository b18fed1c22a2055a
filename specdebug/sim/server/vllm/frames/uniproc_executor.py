"""vllm/v1/executor/uniproc_executor.py: the model in the engine core's own process (the sim at TP 1)."""

from __future__ import annotations

from typing import Any

from specdebug.sim.server.vllm.frames.gpu_worker import Worker


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


def run_method(obj: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return getattr(obj, method)(*args, **kwargs)


class UniProcExecutor:
    def __init__(self, method: str | None) -> None:
        self.driver_worker = Worker(method)

    def execute_model(self, scheduler_output: tuple[float, ...], non_block: bool = False) -> Any:
        return self.collective_rpc("execute_model", args=(scheduler_output,), non_block=non_block)

    def sample_tokens(self, grammar_output: tuple[float, ...], non_block: bool = False) -> Any:
        return self.collective_rpc("sample_tokens", args=(grammar_output,), non_block=non_block)

    def collective_rpc(self, method: str, args: tuple[Any, ...] = (), non_block: bool = False) -> Any:
        result = run_method(self.driver_worker, method, args, {})
        return _Done(result) if non_block else result
