"""The sim's injected failures: real exceptions raised through call chains named like SGLang's.

The traceback a scheduler prints is a genuine Python traceback (`traceback.format_exc()`); only the
exception classes pretend to come from torch / safetensors, by their `__module__`, so the last line
reads exactly like on a GPU box (e.g. `torch.OutOfMemoryError: CUDA out of memory. ...`).
"""

from __future__ import annotations

import math

# SGLang's cuda_graph_runner.py message appended to "Capture cuda graph failed: ..."
CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


class OutOfMemoryError(RuntimeError):
    """Stands in for torch.OutOfMemoryError."""


OutOfMemoryError.__module__ = "torch"


class SafetensorError(Exception):
    """Stands in for safetensors_rust.SafetensorError."""


SafetensorError.__module__ = "safetensors_rust"


class AcceleratorError(RuntimeError):
    """Stands in for torch.AcceleratorError (CUDA errors in recent torch)."""


AcceleratorError.__module__ = "torch"


class DistError(RuntimeError):
    """Stands in for torch.distributed.DistError (the c10d errors below derive from it)."""


class DistStoreError(DistError):
    """Stands in for torch.distributed.DistStoreError (a TCPStore timeout or failure)."""


class DistNetworkError(DistError):
    """Stands in for torch.distributed.DistNetworkError (a socket the store could not open or use)."""


class DistBackendError(DistError):
    """Stands in for torch.distributed.DistBackendError (an NCCL error in ProcessGroupNCCL)."""


for _cls in (DistError, DistStoreError, DistNetworkError, DistBackendError):
    _cls.__module__ = "torch.distributed"

CUDA_ILLEGAL_ACCESS = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


def oom_message(gpu: int, total_gb: float, free_gb: float, tried_gb: float = 2.0) -> str:
    in_use = total_gb - free_gb
    return (
        f"CUDA out of memory. Tried to allocate {tried_gb:.2f} GiB. GPU {gpu} has a total capacity of "
        f"{total_gb:.2f} GiB of which {free_gb:.2f} GiB is free. Including non-PyTorch memory, this process has "
        f"{in_use:.2f} GiB memory in use. Of the allocated memory {in_use - 1.9:.2f} GiB is allocated by PyTorch, "
        "and 1.92 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
        "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
        "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


# --- call chains ---------------------------------------------------------------------------------


def init_torch_distributed(rank: int) -> None:
    raise RuntimeError("NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")


def load_model(shard: str) -> None:
    _load_weights_and_postprocess(shard)


def _load_weights_and_postprocess(shard: str) -> None:
    _safe_open(shard)


def _safe_open(shard: str) -> None:
    raise SafetensorError("Error while deserializing header: MetadataIncompleteBuffer")


def init_memory_pool(total_gpu_memory: float, mem_fraction_static: float) -> None:
    raise RuntimeError(
        "Not enough memory. Please try to increase --mem-fraction-static. "
        f"Current value: self.server_args.mem_fraction_static={mem_fraction_static}"
    )


def init_cuda_graphs(rank: int, total_gb: float, free_gb: float, *, oom: bool) -> None:
    """CudaGraphRunner.__init__: capture() failures are re-raised with SGLang's advice block."""
    try:
        _capture(rank, total_gb, free_gb, oom=oom)
    except RuntimeError as e:
        raise Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")  # noqa: B904


def _capture(rank: int, total_gb: float, free_gb: float, *, oom: bool) -> None:
    _capture_one_batch_size(rank, total_gb, free_gb, oom=oom)


def _capture_one_batch_size(rank: int, total_gb: float, free_gb: float, *, oom: bool) -> None:
    if oom:
        raise OutOfMemoryError(oom_message(rank, total_gb, free_gb))
    raise AcceleratorError(CUDA_ILLEGAL_ACCESS)


def event_loop_normal() -> None:
    """Scheduler.event_loop_normal -> run_batch -> forward_extend: the warmup forward crashes."""
    _run_batch()


def _run_batch() -> None:
    _forward_extend()


def _forward_extend() -> None:
    raise AcceleratorError(CUDA_ILLEGAL_ACCESS)


# --- failed requests (--fail-requests FRACTION) ----------------------------------------------------


class RequestFaults:
    """Fails a fixed share of the generation requests, spread evenly and deterministically.

    The n-th request fails when floor((n+1)*f) > floor(n*f): of any N consecutive requests, about
    f*N fail (exactly floor(N*f) from the first), whatever the timing, so a test knows the count.
    """

    def __init__(self, fraction: float) -> None:
        self.fraction = min(max(fraction, 0.0), 1.0)
        self.count = 0

    def next_fails(self) -> bool:
        n = self.count
        self.count += 1
        return math.floor((n + 1) * self.fraction) > math.floor(n * self.fraction)


def failed_request_body() -> dict:
    """SGLang's error body for a request the server could not serve (HTTP 500)."""
    return {
        "object": "error",
        "message": "Internal server error: the scheduler dropped the request (sim --fail-requests)",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
