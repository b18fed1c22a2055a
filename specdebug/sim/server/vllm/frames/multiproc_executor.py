"""vllm/v1/executor/multiproc_executor.py: the worker's busy loop and the engine core's RPCs to its
workers (sim.server.vllm.frames)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specdebug.sim.server.vllm.frames.gpu_worker import Worker
from specdebug.sim.server.vllm.frames.shm_broadcast import MessageQueue

OUTPUT_RANK = 0  # the one worker that answers (real: the last rank of the first PP stage at TP 1 PP 1)


class FutureWrapper:
    def __init__(self, get_response: Callable[[], Any]) -> None:
        self.get_response = get_response

    def result(self) -> Any:
        return self._wait_for_response()

    def _wait_for_response(self) -> Any:
        return self.get_response()


class MultiprocExecutor:
    def __init__(self, rpc_broadcast_mq: MessageQueue, response_mq: MessageQueue) -> None:
        self.rpc_broadcast_mq, self.response_mq = rpc_broadcast_mq, response_mq

    def execute_model(self, scheduler_output: tuple[float, ...], non_block: bool = False) -> Any:
        return self.collective_rpc("execute_model", args=(scheduler_output,), non_block=non_block)

    def sample_tokens(self, grammar_output: tuple[float, ...], non_block: bool = False) -> Any:
        return self.collective_rpc("sample_tokens", args=(grammar_output,), non_block=non_block)

    def collective_rpc(self, method: str, args: tuple[Any, ...] = (), non_block: bool = False) -> Any:
        self.rpc_broadcast_mq.enqueue((method, args, {}, OUTPUT_RANK))

        def get_response() -> Any:
            _status, result = self.response_mq.dequeue()
            return result

        future = FutureWrapper(get_response)
        return future if non_block else future.result()


class WorkerProc:
    def __init__(self, rank: int, method: str | None, mq: MessageQueue) -> None:
        self.rank = rank
        self.worker = Worker(method)
        self.rpc_broadcast_mq = self.worker_response_mq = mq  # the sim's one pipe per worker

    @staticmethod
    def worker_main(rank: int, method: str | None, mq: MessageQueue) -> None:
        """Until the engine core goes (its pipe closes) or sends anything but an RPC."""
        try:
            WorkerProc(rank, method, mq).worker_busy_loop()
        except (EOFError, OSError, StopIteration):
            return

    def worker_busy_loop(self) -> None:
        while True:
            self._execute_worker_rpc(self.rpc_broadcast_mq.dequeue(indefinite=True))

    def _execute_worker_rpc(self, rpc_request: Any) -> None:
        if not isinstance(rpc_request, tuple) or len(rpc_request) != 4:
            raise StopIteration  # "exit"
        method, args, kwargs, output_rank = rpc_request
        output = getattr(self.worker, method)(*args, **kwargs)
        if output_rank is None or self.rank == output_rank:
            self.worker_response_mq.enqueue(("SUCCESS", output))
