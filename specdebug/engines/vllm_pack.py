"""The vLLM pattern pack: spec-decoding metrics, throughput lines, startup milestones, ready and
error lines.

Formats: shared/formats/serving-formats.md (vLLM 2.1-2.4); current-sources.md (0.33, 0.34: the load line).
"""

from __future__ import annotations

import re

from specdebug.engines.pack import ERR_COMMON, GENERIC_EXC, TIMINGS_COMMON, TIMINGS_PREFILTER, Pack

# uvicorn's, on the API server (head node only); no regex metacharacters: it is its own pattern
READY_LINE = "Application startup complete"

VLLM = Pack(
    name="vllm",
    heads=(
        ("engine_stats", re.compile(r"(?:Engine (?P<engine>\d+): )?(?=Avg prompt throughput: )")),
        ("spec_decode", re.compile(r"(?P<spec_format>SpecDecoding|Speculative) metrics: ")),
    ),
    metric_map={
        "engine_stats": {
            "avg_prompt_throughput": "avg_prompt_throughput",
            "avg_generation_throughput": "avg_generation_throughput",
            # "%s KV cache usage": the device type, "GPU" on CUDA, else its upper-case name (v1/metrics/loggers.py)
            "gpu_kv_cache_usage": "kv_cache_usage",
            "cpu_kv_cache_usage": "kv_cache_usage",
            "xpu_kv_cache_usage": "kv_cache_usage",
            "tpu_kv_cache_usage": "kv_cache_usage",
            "hpu_kv_cache_usage": "kv_cache_usage",
            "kv_cache_usage": "kv_cache_usage",
        },
        "spec_decode": {
            "mean_acceptance_length": "mean_acceptance_length",
            "accepted_throughput": "accepted_throughput",
            "drafted_throughput": "drafted_throughput",
            "avg_draft_acceptance_rate": "draft_acceptance_rate",
            "draft_acceptance_rate": "draft_acceptance_rate",
            "per_position_acceptance_rate": "per_position_acceptance",
        },
    },
    milestones=(
        # newest (utils log_version_and_model): "vLLM server version X, serving model M", or the logo
        # whose second line ends "█ ▀▄▀ █  version X"
        (
            "args",
            re.compile(r"vLLM (?:API )?server version|▀▄▀ █\s+version |non-default args: |args: Namespace\("),
        ),
        ("engine_init", re.compile(r"Initializing a V1 LLM engine|Initializing an LLM engine")),
        ("init_distributed", re.compile(r"vLLM is using nccl==")),
        # 0.34 (v1/worker/gpu/model_runner.py, the only runner left): "Loading model from scratch...";
        # up to 0.33 the old GPU runner and 0.32's CPU runner (cpu_model_runner.py): "Starting to load model M..."
        ("load_weights", re.compile(r"Starting to load model|Loading model from scratch")),
        ("load_weights_done", re.compile(r"Loading weights took|Model loading took")),
        ("kv_cache", re.compile(r"Available KV cache memory|GPU KV cache size")),
        ("cuda_graph_done", re.compile(r"Graph capturing finished")),
        ("engine_ready", re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
        (
            "http_server",
            re.compile(
                r"Starting vLLM (?:API )?server|Started server process|Waiting for application startup"
            ),
        ),
        ("ready", re.compile(READY_LINE)),
    ),
    errors=tuple(
        (k, re.compile(r))
        for k, r in (
            ("engine_core_failed", r"EngineCore failed to start|Engine core initialization failed"),
            ("worker_init_failed", r"WorkerProc initialization failed"),
            ("engine_dead", r"EngineDeadError"),
            *ERR_COMMON,
            ("no_cache_memory", r"No available memory for the cache blocks"),
            ("exception", GENERIC_EXC),
        )
    ),
    ready_re=re.compile(READY_LINE),
    warmup_done_re=re.compile(READY_LINE),
    restart_re=re.compile(r"vLLM (?:API )?server version|▀▄▀ █\s+version "),
    prefilter=(
        "Avg prompt throughput",
        "SpecDecoding metrics",
        "Speculative metrics",
        "vLLM API server version",
        "vLLM server version",
        "▀▄▀ █",
        "non-default args",
        "args: Namespace",
        "Initializing a V1 LLM engine",
        "Initializing an LLM engine",
        "vLLM is using nccl",
        "Starting to load model",
        "Loading model from scratch",
        "Loading weights took",
        "Model loading took",
        "Available KV cache memory",
        "GPU KV cache size",
        "Graph capturing finished",
        "init engine",
        "Starting vLLM",
        "Started server process",
        "Waiting for application startup",
        "Application startup complete",
        "ERROR ",
        "ERROR:",
        "CRITICAL ",
        "failed to start",
        "initialization failed",
        "EngineDeadError",
        "out of memory",
        "No available memory",
        "NCCL error",
        "Error",
        "Exception",
        "set by environment to",
        *TIMINGS_PREFILTER,
    ),
    timings=TIMINGS_COMMON,
    percent_fields=frozenset({"draft_acceptance_rate"}),
    error_levels=frozenset({"ERROR", "CRITICAL"}),
    list_metrics=frozenset({"per_position_acceptance"}),
    # vLLM's own wrappers (0.32-0.34: v1/engine/core.py, v1/engine/utils.py, v1/executor/
    # multiproc_executor.py): each process that sees a failure below it says so in general words
    wrappers=re.compile(
        r"EngineCore failed to start|Engine core initialization failed|WorkerProc failed to start|"
        r"WorkerProc initialization failed|Executor failed|Worker proc \S+ died unexpectedly|"
        r"Engine core proc \S+ died unexpectedly|See root cause above|See stack trace for root cause|"
        r"EngineDeadError|Engine core failed to start"
    ),
)
