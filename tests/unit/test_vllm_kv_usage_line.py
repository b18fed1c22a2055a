"""vLLM names the KV cache's device in its stats line ("%s KV cache usage", v1/metrics/loggers.py): "GPU" on
CUDA, else the device type upper-cased ("CPU" on the CPU build the real-engine tier runs).  Both read as
kv_cache_usage; V0's line, which also printed the swap space as "CPU KV cache usage", keeps the GPU's."""

from __future__ import annotations

from specdebug.core.logs.scan import scan_lines

V1_CPU = (
    "(APIServer pid=1) INFO 12-06 05:00:10 [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 14.6 tokens/s, Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 3.0%, "
    "Prefix cache hit rate: 0.0%"
)
V0_BOTH = (
    "INFO 11-03 15:47:45 metrics.py:345] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "80.2 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.2%, "
    "CPU KV cache usage: 0.0%."
)


def test_the_cpu_builds_kv_usage_is_read() -> None:
    assert scan_lines([V1_CPU]).metrics["kv_cache_usage"]["last"] == 3.0


def test_v0s_swap_usage_does_not_replace_the_gpus() -> None:
    assert scan_lines([V0_BOTH]).metrics["kv_cache_usage"]["last"] == 1.2
