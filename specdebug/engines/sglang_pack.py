"""The SGLang pattern pack: batch/stats lines, startup milestones, ready and error lines.

Formats: shared/formats/serving-formats.md (SGLang 1.1-1.4) and current-sources.md 3.1 (0.5.23:
`server_args={...}` as a dict, `Init parallel begin.` / `Init parallel ends.`); both shapes are read.
"""

from __future__ import annotations

import re

from specdebug.engines.pack import ERR_COMMON, GENERIC_EXC, TIMINGS_COMMON, TIMINGS_PREFILTER, Pack

# printed on node 0 only, after warmup; no regex metacharacters, so it is its own pattern (box prefilter)
READY_LINE = "The server is fired up and ready to roll!"
# the server start: `server_args=ServerArgs(...)` (dataclass repr, up to 0.5.2x) or `server_args={...}`
# (0.5.23 engine.py:311, `resolved_dict()`); either marks a new run in an appended log
ARGS_RE = r"server_args=(?:ServerArgs\(|\{)"

SGLANG = Pack(
    name="sglang",
    heads=(
        ("decode_batch", re.compile(r"Decode batch(?: \[(?P<iter>\d+)\])?[.,] ")),
        # 2024 (tp_worker.py/scheduler.py): "Prefill batch(mixed #running-req: N). #new-seq: ..."
        (
            "prefill_batch",
            re.compile(
                r"Prefill batch(?: \[(?P<iter>\d+)\])?(?:\(mixed #running-req: (?P<mixed_running_req>\d+)\))?[.,] "
            ),
        ),
    ),
    metric_map={
        "decode_batch": {
            "accept_len": "accept_len",
            "accept_rate": "accept_rate",
            "gen_throughput": "gen_throughput",
            "running_req": "running_req",
            "queue_req": "queue_req",
            "token_usage": "token_usage",
            "full_token_usage": "token_usage",
        },
        "prefill_batch": {
            "input_throughput": "input_throughput",
            "running_req": "running_req",
            "mixed_running_req": "running_req",
            "queue_req": "queue_req",
            "token_usage": "token_usage",
            "full_token_usage": "token_usage",
        },
    },
    milestones=(
        ("args", re.compile(ARGS_RE)),
        ("init_distributed", re.compile(r"Init (?:torch distributed|parallel) begin")),
        ("init_distributed_done", re.compile(r"Init (?:torch distributed|parallel) ends")),
        ("load_weights", re.compile(r"Load weight begin")),
        ("load_weights_done", re.compile(r"Load weight end")),
        ("kv_cache", re.compile(r"KV Cache is allocated|Using KV cache dtype")),
        ("memory_pool_done", re.compile(r"Memory pool end")),
        (
            "draft_cuda_graph",
            re.compile(r"Capture draft(?: extend)? cuda graph begin|Capture draft \w+ CUDA graph begin"),
        ),
        (
            "draft_cuda_graph_done",
            re.compile(r"Capture draft(?: extend)? cuda graph end|Capture draft \w+ CUDA graph end"),
        ),
        ("cuda_graph", re.compile(r"Capture cuda graph begin|Capture target \w+ CUDA graph begin")),
        ("cuda_graph_done", re.compile(r"Capture cuda graph end|Capture target \w+ CUDA graph end")),
        ("scheduler_ready", re.compile(r"max_total_num_tokens=\d+")),
        ("startup_timings", re.compile(r"Engine startup timings")),
        ("http_server", re.compile(r"Started server process|Waiting for application startup")),
        ("http_ready", re.compile(r"Application startup complete|Uvicorn running on")),
        ("warmup", re.compile(r'"(?:GET /(?:get_)?model_info|POST /generate) HTTP')),
        ("ready", re.compile(READY_LINE)),
    ),
    errors=tuple(
        (k, re.compile(r))
        for k, r in (
            ("scheduler_exception", r"Scheduler hit an exception"),
            ("detokenizer_exception", r"DetokenizerManager hit an exception"),
            ("sigquit", r"Received sigquit from a child proces|SIGQUIT received"),
            ("watchdog", r"watchdog timeout"),
            ("cuda_graph", r"Capture cuda graph failed"),
            *ERR_COMMON,
            ("rank_load_failed", r"could finish the model loading, but there are other ranks"),
            ("health_check", r"Health check failed"),
            ("warmup", r"Initialization failed\. warmup error"),
            ("not_enough_memory", r"Not enough memory\. Please try to increase --mem-fraction-static"),
            ("exception", GENERIC_EXC),
        )
    ),
    # SGLang's own wrappers: the scheduler's header line (its traceback follows), the launcher's
    # reaction to a dead child
    wrappers=re.compile(
        r"Scheduler hit an exception|DetokenizerManager hit an exception|Received sigquit from a child proces|"
        r"SIGQUIT received"
    ),
    max_of={
        event: {"token_usage": ("full_token_usage", "swa_token_usage")}
        for event in ("decode_batch", "prefill_batch")
    },
    ready_re=re.compile(READY_LINE),
    warmup_done_re=re.compile(READY_LINE + r"|Warmup ended"),
    restart_re=re.compile(ARGS_RE),
    prefilter=(
        "Decode batch",
        "Prefill batch",
        "server_args=",
        "Init torch distributed",
        "Init parallel",
        "Load weight",
        "KV Cache is allocated",
        "Using KV cache dtype",
        "Memory pool end",
        "Capture ",
        "max_total_num_tokens=",
        "Engine startup timings",
        "Started server process",
        "Waiting for application startup",
        "Application startup complete",
        "Uvicorn running on",
        "model_info HTTP",
        "POST /generate HTTP",
        "fired up and ready",
        "Warmup ended",
        "hit an exception",
        "sigquit",
        "SIGQUIT",
        "watchdog timeout",
        "NCCL error",
        "could finish the model loading",
        "Health check failed",
        "Initialization failed",
        "Not enough memory",
        "out of memory",
        "Error",
        "ERROR:",
        "Exception",
        "set by environment to",
        *TIMINGS_PREFILTER,
    ),
    timings=TIMINGS_COMMON,
)
