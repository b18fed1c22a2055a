"""vllm/distributed/device_communicators/shm_broadcast.py's reader path, over a pipe (sim.server.vllm.frames)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any


class SpinCondition:
    """The reader's wait for a write (real: sched_yield, then a zmq poll when idle)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def wait(self, timeout_ms: int | None = None) -> None:
        self.conn.poll(None if timeout_ms is None else timeout_ms / 1000)


class MessageQueue:
    """One writer to many readers (the engine core's RPC broadcast), or one reader (a response queue)."""

    def __init__(self, conns: Sequence[Connection]) -> None:
        self.conns = list(conns)
        self._spin_condition = SpinCondition(self.conns[0])

    def enqueue(self, obj: Any) -> None:
        for conn in self.conns:
            conn.send(obj)

    @contextmanager
    def acquire_read(self, timeout: float | None = None, indefinite: bool = False) -> Iterator[Connection]:
        while not self.conns[0].poll(0):
            self._spin_condition.wait(None if timeout is None else int(timeout * 1000))
        yield self.conns[0]

    def dequeue(self, timeout: float | None = None, indefinite: bool = False) -> Any:
        """EOFError when the writer is gone (the sim's way to end a reader)."""
        with self.acquire_read(timeout, indefinite) as buf:
            return buf.recv()
