"""What a simulated scheduler's Python stack looks like while it serves, named like SGLang's frames.

Why: `specdebug stacks` dumps (py-spy) the workers of a real server; on the sim the same dump must
show the same shapes.  The launcher's engine models the batches; the feed (`feed`, a task in the
launcher's loop) tells every scheduler over its pipe when decoding starts and stops and what one
draft and one verify cost, and each scheduler then spends that time in frames named like SGLang's:

    idle      event_loop_normal -> recv_requests                          (waiting on the pipe)
    decode    event_loop_normal -> run_batch -> forward_batch_generation -> forward -> forward_decode
              -> replay                                                   (CUDA-graph replay)
    spec      ... -> forward_batch_speculative_generation -> draft -> draft_forward -> replay, then
              verify -> forward_batch_generation -> forward -> forward_extend (the extend-mode verify)

$SPECDEBUG_SIM_STUCK_RANK=N (a sim switch, in the server's env): rank N hangs in forward_decode ->
replay -> synchronize as soon as serving starts, and every other rank waits for it in
all_reduce -> pynccl_all_reduce -> wait_for_peers: the one-rank-stuck pattern of a distributed hang.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from specdebug.sim.server.common.costmodel import MAX_LAG_S

STUCK_ENV = "SPECDEBUG_SIM_STUCK_RANK"
FEED_INTERVAL_S = 0.05


# ---- the launcher side --------------------------------------------------------------------------
async def feed(conns: list[Connection], engine: Any) -> None:
    """Send ("work", draft_ms, verify_ms, speculative) / ("idle",) to every scheduler on a change."""
    import asyncio  # here: the launcher runs this; a scheduler, a spawned process, never pays for asyncio

    last: tuple[Any, ...] | None = None
    while True:
        bs = len(engine.running)
        if bs:
            cost = engine.step_cost(bs)
            msg: tuple[Any, ...] = (
                "work",
                round(cost.draft_ms, 2),
                round(cost.verify_ms, 2),
                engine.spec.enabled,
            )
        else:
            msg = ("idle",)
        if msg != last:
            for conn in conns:
                try:  # a rank that stopped reading (the stuck one) must never block the engine's loop
                    if select.select([], [conn.fileno()], [], 0)[1]:
                        conn.send(msg)
                except (OSError, ValueError):
                    pass
            last = msg
        await asyncio.sleep(FEED_INTERVAL_S)


# ---- the scheduler side: every function below is a frame a stack dump shows ----------------------
def init_torch_distributed(seconds: float) -> None:
    _hold(seconds)


def load_model(seconds: float) -> None:
    _hold(seconds)


def init_memory_pool(seconds: float) -> None:
    _hold(seconds)


def capture(seconds: float) -> None:
    """CudaGraphRunner.capture (target and draft graphs alike)."""
    _hold(seconds)


STARTUP_FRAMES: dict[str, Callable[[float], None]] = {
    "init": init_torch_distributed,
    "load_weights": load_model,
    "draft_load": load_model,
    "kv_cache": init_memory_pool,
    "cuda_graph": capture,
    "draft_graph": capture,
    "draft_extend_graph": capture,
}


def startup_wait(key: str, seconds: float) -> None:
    """A startup step's time, spent in the frame SGLang would be in (see STARTUP_FRAMES)."""
    STARTUP_FRAMES.get(key, _hold)(seconds)


class _Schedule:
    """Serving frames end on a schedule, not each after a sleep of its own: a late wake-up (a loaded
    host) is taken from the next frame, so each frame's share of a scheduler's time stays the cost
    model's.  With a sleep each, a wake-up 4 ms late per frame reads the 3-step verify share (batch
    3, by the cost model's numbers) as 81 % instead of 87 %, under the 2-step's 83 % on a quiet
    host: `stacks --compare` read the host's load, not the configs (the stacks test failed so under
    load).  A gap longer than MAX_LAG_S (idle on the pipe, a stalled host; the engine's own bound
    on catching up) starts afresh."""

    def __init__(self) -> None:
        self.due: float | None = None

    def hold(self, seconds: float) -> None:
        now = time.monotonic()
        if self.due is None or now - self.due > MAX_LAG_S:
            self.due = now
        self.due += max(seconds, 0.0)
        delay = self.due - now
        if delay > 0:
            time.sleep(delay)


_SCHEDULE = _Schedule()


def _hold(seconds: float) -> None:
    time.sleep(max(seconds, 0.0))


def _serve(seconds: float) -> None:
    """A serving kernel's time (graph replay, the extend-mode verify): on the schedule."""
    _SCHEDULE.hold(seconds)


def replay(seconds: float) -> None:
    """CudaGraphRunner.replay: the captured graph runs."""
    _serve(seconds)


def synchronize() -> None:
    """A kernel that never finishes (the stuck rank)."""
    while True:
        time.sleep(3600)


def forward_decode(seconds: float, stuck: bool = False) -> None:
    if stuck:
        replay(0.0)
        synchronize()
    replay(seconds)


def forward_extend(seconds: float) -> None:
    """The extend-mode forward: no CUDA graph, every kernel launched one by one."""
    _serve(seconds)


def forward(mode: str, seconds: float, stuck: bool = False) -> None:
    if mode == "extend":
        forward_extend(seconds)
    else:
        forward_decode(seconds, stuck)


def forward_batch_generation(mode: str, seconds: float, stuck: bool = False) -> None:
    forward(mode, seconds, stuck)


def draft_forward(seconds: float) -> None:
    replay(seconds)


def draft(seconds: float) -> None:
    draft_forward(seconds)


def verify(seconds: float) -> None:
    forward_batch_generation("extend", seconds)


def forward_batch_speculative_generation(draft_s: float, verify_s: float) -> None:
    draft(draft_s)
    verify(verify_s)


def wait_for_peers() -> None:
    """NCCL all-reduce waiting on a rank that never arrives."""
    while True:
        time.sleep(3600)


def pynccl_all_reduce() -> None:
    wait_for_peers()


def all_reduce() -> None:
    pynccl_all_reduce()


def run_batch(work: tuple[Any, ...], stuck_rank: int | None, rank: int) -> None:
    _, draft_ms, verify_ms, speculative = work
    if stuck_rank is not None:
        if rank == stuck_rank:
            forward_batch_generation("decode", 0.0, stuck=True)
        all_reduce()
    if speculative:
        forward_batch_speculative_generation(draft_ms / 1000.0, verify_ms / 1000.0)
    else:
        forward_batch_generation("decode", verify_ms / 1000.0)


def recv_requests(conn: Connection, timeout: float | None) -> Any:
    if conn.poll(timeout):
        return conn.recv()
    return None


def _stuck_rank() -> int | None:
    text = os.environ.get(STUCK_ENV, "").strip()
    return int(text) if text.isdigit() else None


def event_loop_normal(conn: Connection, rank: int, on_fail: Callable[[], None]) -> None:
    """The scheduler's loop: idle on the pipe, or one forward per turn while the engine decodes."""
    work: tuple[Any, ...] | None = None
    stuck = _stuck_rank()
    if stuck is not None:  # the hang comes with the first batch; the sim's first batch is now
        run_batch(("work", 0.0, 0.0, False), stuck, rank)
    while True:
        try:
            msg = recv_requests(conn, 0.0 if work else None)
        except (EOFError, OSError):
            return
        if msg == "fail_forward":
            on_fail()
        elif msg == "exit":
            return
        elif isinstance(msg, tuple) and msg and msg[0] == "work":
            work = msg
        elif isinstance(msg, tuple) and msg and msg[0] == "idle":
            work = None
        if work is not None:
            run_batch(work, stuck, rank)
