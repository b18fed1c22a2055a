"""vllm/v1/engine/core.py: the engine core's busy loop (sim.server.vllm.frames).

The API server's feed arrives on the engine core's pipe; a thread puts it on `input_queue` (real:
EngineCoreProc.process_input_sockets), and the busy loop waits on that queue while there is no work
(`queue.get`, the real idle stack) or steps the model through its executor while there is.
"""

from __future__ import annotations

import queue
import threading
from multiprocessing.connection import Connection
from typing import Any

FORWARD_SHARE = 0.85  # of a step's target time: the forward; the rest is sampling


class EngineCore:
    def __init__(self, model_executor: Any) -> None:
        self.model_executor = model_executor
        self.work: tuple[Any, ...] | None = None  # ("work", draft_ms, verify_ms, speculative)

    def step(self) -> Any:
        """One step as 0.32.0's: execute_model (non-blocking), its result, then sample_tokens; nothing
        when an "idle" came in after the work (real: no unfinished request, nothing scheduled)."""
        if self.work is None:
            return None
        _, draft_ms, verify_ms, speculative = self.work
        forward_s = verify_ms / 1000.0 * FORWARD_SHARE
        future = self.model_executor.execute_model((forward_s,), non_block=True)
        model_output = future.result()
        if model_output is None:
            sample_s = verify_ms / 1000.0 - forward_s
            model_output = self.model_executor.sample_tokens(
                (sample_s, draft_ms / 1000.0 if speculative else 0.0)
            )
        return model_output


class EngineCoreProc(EngineCore):
    def __init__(self, conn: Connection, model_executor: Any) -> None:
        super().__init__(model_executor)
        self.input_queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        threading.Thread(target=self.process_input_sockets, args=(conn,), name="input", daemon=True).start()

    def process_input_sockets(self, conn: Connection) -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = "exit"
            self.input_queue.put_nowait(("ADD", msg))
            if msg == "exit":
                return

    def has_work(self) -> bool:
        return self.work is not None

    def run_busy_loop(self) -> None:
        """Until the API server goes (its pipe closes) or says "exit"."""
        while True:
            self._process_input_queue()
            self._process_engine_step()

    def _process_input_queue(self) -> None:
        while not self.has_work():
            req = self.input_queue.get(block=True)
            self._handle_client_request(*req)
        while not self.input_queue.empty():
            req = self.input_queue.get_nowait()
            self._handle_client_request(*req)

    def _handle_client_request(self, request_type: str, request: Any) -> None:
        if request == "exit":
            raise SystemExit(0)
        if isinstance(request, tuple) and request and request[0] == "work":
            self.work = request
        elif isinstance(request, tuple) and request and request[0] == "idle":
            self.work = None

    def _process_engine_step(self) -> bool:
        self.step()
        return True
