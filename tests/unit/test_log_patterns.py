"""Every SGLang and vLLM line shape from shared/formats/serving-formats.md parses to the right
metric names and values (sample lines written from the documented formats, values invented)."""

from __future__ import annotations

import pytest

from specdebug.core.logs.parser import LogParser
from specdebug.engines.detect import PackDetector, detect_pack
from specdebug.engines.primitives import norm_key, parse_kv_tail, parse_nccl_env_line, split_prefix
from specdebug.engines.sglang_pack import SGLANG
from specdebug.engines.vllm_pack import VLLM

# ---- SGLang 1.2: decode/prefill batch lines -------------------------------------------------------

SGLANG_DECODE = [
    (  # 0.5.x: "." separator, trailing ", "
        "[2026-01-15 12:00:01 TP0] Decode batch. #running-req: 2, #token: 311, token usage: 0.01, accept len: 2.42, "
        "accept rate: 0.61, cuda graph: True, gen throughput (token/s): 0.52, #queue-req: 0, ",
        dict(
            running_req=2,
            token_usage=0.01,
            accept_len=2.42,
            accept_rate=0.61,
            gen_throughput=0.52,
            queue_req=0,
        ),
    ),
    (  # mid 2025: no accept rate, DP prefix
        "[2026-01-15 12:00:02 DP0 TP0] Decode batch. #running-req: 4, #token: 20480, token usage: 0.07, "
        "accept len: 3.10, cuda graph: True, gen throughput (token/s): 201.77, #queue-req: 1",
        dict(running_req=4, token_usage=0.07, accept_len=3.10, gen_throughput=201.77, queue_req=1),
    ),
    (  # current "," separator, EP prefix, npu graph
        "[2026-01-15 12:00:03 TP0 EP0] Decode batch, #running-req: 16, #token: 150000, token usage: 0.41, "
        "accept len: 2.95, accept rate: 0.74, npu graph: True, gen throughput (token/s): 310.40, #queue-req: 0",
        dict(
            running_req=16,
            token_usage=0.41,
            accept_len=2.95,
            accept_rate=0.74,
            gen_throughput=310.40,
            queue_req=0,
        ),
    ),
    (  # PD-disaggregation decode server
        "[2026-01-15 12:00:04 TP0] Decode batch, #running-req: 2, #token: 99999, token usage: 0.12, accept len: 1.88, "
        "accept rate: 0.22, pre-allocated usage: 0.10, #prealloc-req: 1, #transfer-req: 0, #retracted-req: 0, "
        "cuda graph: True, gen throughput (token/s): 150.00, #queue-req: 0",
        dict(
            running_req=2,
            token_usage=0.12,
            accept_len=1.88,
            accept_rate=0.22,
            gen_throughput=150.0,
            queue_req=0,
        ),
    ),
    (  # non-spec, Ray-prefixed, trailing ", "
        "(SGLangEngine pid=4242) [2026-01-15 12:00:05 TP0] Decode batch, #running-req: 3, #token: 9000, "
        "token usage: 0.02, cuda graph: True, gen throughput (token/s): 812.30, #queue-req: 0, ",
        dict(running_req=3, token_usage=0.02, gen_throughput=812.30, queue_req=0),
    ),
    (  # SGLANG_LOG_FORWARD_ITERS, hybrid SWA + mamba fields, MFU estimate tail, dictConfig prefix
        "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] Decode batch [4120], "
        "#running-req: 5, #full token: 100, full token usage: 0.20, #swa token: 40, swa token usage: 0.10, "
        "mamba num: 3, mamba usage: 0.05, accept len: 3.00, accept rate: 0.50, cuda graph: True, "
        "gen throughput (token/s): 55.50, #queue-req: 2, est. decode TFLOPS/s (per GPU): 1.20, "
        "est. read BW (GB/s per GPU): 800.00, est. write BW (GB/s per GPU): 10.00",
        dict(
            running_req=5, token_usage=0.20, accept_len=3.0, accept_rate=0.5, gen_throughput=55.5, queue_req=2
        ),
    ),
    (  # docker compose wrapper, no rank in prefix
        "deepseek-v32-exp  | [2026-04-05 20:02:51] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, "
        "accept len: 1.50, accept rate: 0.17, cuda graph: True, gen throughput (token/s): 0.39, #queue-req: 0",
        dict(
            running_req=1, token_usage=0.0, accept_len=1.5, accept_rate=0.17, gen_throughput=0.39, queue_req=0
        ),
    ),
    (  # very old (2024) prefix
        "[gpu_id=0] Decode batch. #running-req: 1, #token: 12, token usage: 0.00, gen throughput (token/s): 20.00, "
        "#queue-req: 0",
        dict(running_req=1, token_usage=0.0, gen_throughput=20.0, queue_req=0),
    ),
]

SGLANG_PREFILL = [
    (  # current: throughput last
        "[2026-01-15 12:00:06 TP0] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, cuda graph: False, input throughput (token/s): 12.50",
        dict(input_throughput=12.5, running_req=0, queue_req=0, token_usage=0.0),
    ),
    (  # @44cedc2b order: throughput then cuda graph; newest #pending-token; PD prefill fields
        "[2026-01-15 12:00:06 TP0] Prefill batch [17], #new-seq: 2, #new-token: 512, #cached-token: 128, "
        "token usage: 0.03, #running-req: 1, #queue-req: 3, #pending-token: 64, #prealloc-req: 0, #inflight-req: 1, "
        "input throughput (token/s): 4096.00, cuda graph: False",
        dict(input_throughput=4096.0, running_req=1, queue_req=3, token_usage=0.03),
    ),
    (  # 0.5.x: ".", trailing ", ", no throughput
        "[2026-01-15 12:00:06 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, ",
        dict(running_req=0, queue_req=0, token_usage=0.0),
    ),
    (  # early 2025: cache hit rate
        "[2026-01-15 12:00:06 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, cache hit rate: 0.00%, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0",
        dict(running_req=0, queue_req=0, token_usage=0.0),
    ),
]


@pytest.mark.parametrize(("line", "want"), SGLANG_DECODE)
def test_sglang_decode_shapes(line: str, want: dict) -> None:
    m = LogParser("sglang").parse(line)
    assert m is not None and m.event == "decode_batch"
    assert m.metrics == pytest.approx({k: float(v) for k, v in want.items()})
    for start, end, name in m.spans:  # highlight spans cover the printed value
        assert float(m.line[start:end]) == pytest.approx(m.metrics[name])


def test_sglang_decode_extra_fields_kept() -> None:
    m = LogParser("sglang").parse(SGLANG_DECODE[5][0])
    assert m.fields["iter"] == 4120
    assert m.fields["full_token"] == 100 and m.fields["swa_token_usage"] == 0.10
    assert m.fields["est_decode_tflops_s"] == 1.2
    assert m.fields["cuda_graph"] is True
    assert m.ts == "2025-10-20 03:02:22"
    m3 = LogParser("sglang").parse(SGLANG_DECODE[3][0])
    assert m3.fields["prealloc_req"] == 1 and m3.fields["pre_allocated_usage"] == 0.10


@pytest.mark.parametrize(("line", "want"), SGLANG_PREFILL)
def test_sglang_prefill_shapes(line: str, want: dict) -> None:
    m = LogParser("sglang").parse(line)
    assert m is not None and m.event == "prefill_batch"
    assert m.metrics == pytest.approx({k: float(v) for k, v in want.items()})
    assert m.fields["new_seq"] >= 1


# ---- vLLM 2.2 / 2.3 -------------------------------------------------------------------------------

VLLM_LINES = [
    (
        "(APIServer pid=1) INFO 05-04 01:06:43 [loggers.py:271] Engine 000: Avg prompt throughput: 12.3 tokens/s, "
        "Avg generation throughput: 41.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.5%, "
        "Prefix cache hit rate: 0.0%",
        "engine_stats",
        dict(avg_prompt_throughput=12.3, avg_generation_throughput=41.0, kv_cache_usage=0.5),
    ),
    (  # newer: MM cache hit rate appended; colour codes around the process tag
        "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 05-04 01:06:53 [loggers.py:271] Engine 001: Avg prompt throughput: "
        "0.0 tokens/s, Avg generation throughput: 88.8 tokens/s, Running: 4 reqs, Waiting: 2 reqs, "
        "GPU KV cache usage: 12.5%, Prefix cache hit rate: 50.0%, MM cache hit rate: 0.0%",
        "engine_stats",
        dict(avg_prompt_throughput=0.0, avg_generation_throughput=88.8, kv_cache_usage=12.5),
    ),
    (  # V0
        "INFO 11-03 15:47:45 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 11.2 "
        "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.0%, CPU KV cache usage: 0.0%.",
        "engine_stats",
        dict(avg_prompt_throughput=0.0, avg_generation_throughput=11.2, kv_cache_usage=1.0),
    ),
    (  # current spec line
        "(APIServer pid=1) INFO 05-04 01:06:43 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.40, "
        "Accepted throughput: 41.10 tokens/s, Drafted throughput: 120.30 tokens/s, Accepted: 411 tokens, "
        "Drafted: 1203 tokens, Per-position acceptance rate: 0.700, 0.450, 0.250, Avg Draft acceptance rate: 34.2%",
        "spec_decode",
        dict(
            mean_acceptance_length=2.40,
            accepted_throughput=41.10,
            drafted_throughput=120.30,
            draft_acceptance_rate=34.2,
            per_position_acceptance=[0.7, 0.45, 0.25],
        ),
    ),
    (  # Sep 2025
        "INFO 09-04 01:06:43 [metrics.py:101] SpecDecoding metrics: Draft acceptance rate: 71.5%, Mean acceptance "
        "length: 3.86, Accepted throughput: 12.00 tokens/s, Drafted throughput: 16.80 tokens/s, Accepted: 120 tokens, "
        "Drafted: 168 tokens, Per-position acceptance rate: 0.900, 0.700",
        "spec_decode",
        dict(
            mean_acceptance_length=3.86,
            accepted_throughput=12.0,
            drafted_throughput=16.8,
            draft_acceptance_rate=71.5,
            per_position_acceptance=[0.9, 0.7],
        ),
    ),
    (  # Apr 2025
        "INFO 04-04 01:06:43 [metrics.py:101] SpecDecoding metrics: Draft acceptance rate: 50.0%, Accepted: 30 tokens, "
        "Drafted: 60 tokens",
        "spec_decode",
        dict(draft_acceptance_rate=50.0),
    ),
    (  # early V1: fraction, trailing ", "
        "INFO 02-04 01:06:43 [metrics.py:101] Speculative metrics: Draft acceptance rate: 0.500, Number of accepted "
        "tokens: 30, Number of draft tokens: 60, ",
        "spec_decode",
        dict(draft_acceptance_rate=50.0),
    ),
    (  # V0: fraction, final "."
        "INFO 11-03 15:47:45 metrics.py:1671] Speculative metrics: Draft acceptance rate: 0.550, System efficiency: "
        "0.480, Number of speculative tokens: 4, Number of accepted tokens: 1100, Number of draft tokens: 2000, "
        "Number of emitted tokens: 1500.",
        "spec_decode",
        dict(draft_acceptance_rate=55.0),
    ),
    (  # one speculative token: the per-position "list" has one element
        "INFO 05-04 01:06:43 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 1.80, Accepted throughput: "
        "8.00 tokens/s, Drafted throughput: 10.00 tokens/s, Accepted: 80 tokens, Drafted: 100 tokens, "
        "Per-position acceptance rate: 0.800, Avg Draft acceptance rate: 80.0%",
        "spec_decode",
        dict(
            mean_acceptance_length=1.8,
            accepted_throughput=8.0,
            drafted_throughput=10.0,
            draft_acceptance_rate=80.0,
            per_position_acceptance=[0.8],
        ),
    ),
]


@pytest.mark.parametrize(("line", "event", "want"), VLLM_LINES)
def test_vllm_shapes(line: str, event: str, want: dict) -> None:
    m = LogParser("vllm").parse(line)
    assert m is not None and m.event == event
    assert set(m.metrics) == set(want)
    for k, v in want.items():
        assert m.metrics[k] == pytest.approx(v)


def test_vllm_fields_and_nan() -> None:
    m = LogParser("vllm").parse(VLLM_LINES[0][0])
    assert m.fields["engine"] == 0 and m.fields["running"] == 1 and m.fields["waiting"] == 0
    assert m.fields["prefix_cache_hit_rate"] == 0.0
    v0 = LogParser("vllm").parse(VLLM_LINES[7][0])
    assert v0.fields["number_of_emitted_tokens"] == 1500 and v0.fields["system_efficiency"] == 0.48
    nan = LogParser("vllm").parse(
        "INFO 05-04 01:06:43 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 1.00, Accepted "
        "throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, "
        "Per-position acceptance rate: nan, nan, Avg Draft acceptance rate: nan%"
    )
    assert "draft_acceptance_rate" not in nan.metrics  # NaN is no sample
    assert nan.fields["avg_draft_acceptance_rate"] is None


# ---- errors (SGLang 1.4, vLLM 2.4) ------------------------------------------------------------------

SGLANG_ERRORS = [
    (
        "[2026-01-15 12:00:07 TP2] Scheduler hit an exception: Traceback (most recent call last):",
        "scheduler_exception",
    ),
    (
        "[2026-01-15 12:00:07] Received sigquit from a child process. It usually means the child failed.",
        "sigquit",
    ),
    (
        "[2026-01-15 12:00:07] Received sigquit from a child proces. It usually means the child failed.",
        "sigquit",
    ),
    ("[2026-01-15 12:00:07] SIGQUIT received. signum=None, frame=None.", "sigquit"),
    (
        "[2026-01-15 12:00:07] DetokenizerManager hit an exception: Traceback (most recent call last):",
        "detokenizer_exception",
    ),
    (
        "[2026-01-15 12:00:07 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
        "watchdog",
    ),
    ("[2026-01-15 12:00:07] TokenizerManager watchdog timeout (self.watchdog_timeout=300)", "watchdog"),
    ("Exception: Capture cuda graph failed: CUDA error: out of memory", "cuda_graph"),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "nccl"),
    (
        "ValueError: TP rank 1 could finish the model loading, but there are other ranks that didn't finish loading. "
        "It is likely due to unexpected failures (e.g., OOM) or a slow node.",
        "rank_load_failed",
    ),
    (
        "[2026-01-15 12:00:07] Health check failed. Server couldn't get a response from detokenizer for last 20 "
        "seconds. tic start time: 1.0 last_heartbeat time: 2.0",
        "health_check",
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB",
        "oom",
    ),
    (
        "[2026-01-15 12:00:07] Initialization failed. warmup error: Traceback (most recent call last):",
        "warmup",
    ),
    (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "self.server_args.mem_fraction_static=0.5",
        "not_enough_memory",
    ),
    ("KeyError: 'model.layers.0.weight'", "exception"),
]

VLLM_ERRORS = [
    (
        "(EngineCore_DP0 pid=77) ERROR 05-04 01:06:44 [core.py:700] EngineCore failed to start.",
        "engine_core_failed",
    ),
    (
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}",
        "engine_core_failed",
    ),
    (
        "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for "
        "root cause.",
        "worker_init_failed",
    ),
    ("vllm.v1.engine.exceptions.EngineDeadError", "engine_dead"),
    (
        "(EngineCore_DP0 pid=77) ERROR 05-04 01:06:44 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 1.00 GiB.",
        "oom",
    ),
    (
        "ValueError: No available memory for the cache blocks. Try increasing gpu_memory_utilization when initializing "
        "the engine.",
        "no_cache_memory",
    ),
    (
        "(APIServer pid=1) ERROR 05-04 01:06:44 [serving.py:10] Error in preprocessing prompt inputs",
        "error_log",
    ),
]


@pytest.mark.parametrize(("line", "kind"), SGLANG_ERRORS)
def test_sglang_errors(line: str, kind: str) -> None:
    m = LogParser("sglang").parse(line)
    assert m is not None and m.event == "error" and m.fields["error_kind"] == kind
    assert SGLANG.is_error(line) and SGLANG.error_kind(line) == kind


@pytest.mark.parametrize(("line", "kind"), VLLM_ERRORS)
def test_vllm_errors(line: str, kind: str) -> None:
    m = LogParser("vllm").parse(line)
    assert m is not None and m.event == "error" and m.fields["error_kind"] == kind
    assert VLLM.error_kind(line) == kind


@pytest.mark.parametrize(
    "line",
    [
        "(EngineCore_DP0 pid=77) ERROR 05-04 01:06:44 [core.py:700] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=77) ERROR 05-04 01:06:44 [core.py:700]   File "/x/core.py", line 1, in run',
        '  File "/sglang/srt/managers/scheduler.py", line 10, in event_loop',
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "(APIServer pid=1) INFO 05-04 01:06:43 [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.5%, "
        "Prefix cache hit rate: 0.0%",
    ],
)
def test_not_errors(line: str) -> None:
    assert not SGLANG.is_error(line) and not VLLM.is_error(line)


# ---- startup milestones and ready ------------------------------------------------------------------

SGLANG_STARTUP = [
    ("[2026-01-15 11:59:00] server_args=ServerArgs(model_path='m', tp_size=2)", "args"),
    ("[2026-01-15 11:59:01 TP0] Init torch distributed begin.", "init_distributed"),
    (
        "[2026-01-15 11:59:02 TP0] Init torch distributed ends. elapsed=1.20 s, mem usage=0.50 GB",
        "init_distributed_done",
    ),
    ("[2026-01-15 11:59:02 TP0] Load weight begin. avail mem=78.00 GB", "load_weights"),
    (
        "[2026-01-15 11:59:12 TP0] Load weight end. elapsed=10.00 s, type=LlamaForCausalLM, avail mem=60.00 GB, "
        "mem usage=18.00 GB.",
        "load_weights_done",
    ),
    (
        "[2026-01-15 11:59:12 TP0] Load weight end. type=Gemma3ForConditionalGeneration, dtype=torch.bfloat16, "
        "avail mem=131.08 GB, mem usage=8.13 GB.",
        "load_weights_done",
    ),
    ("[2026-01-15 11:59:13 TP0] Using KV cache dtype: torch.bfloat16", "kv_cache"),
    (
        "[2026-01-15 11:59:13 TP0] KV Cache is allocated. #tokens: 500000, K size: 10.00 GB, V size: 10.00 GB",
        "kv_cache",
    ),
    ("[2026-01-15 11:59:13 TP0] Memory pool end. avail mem=30.00 GB", "memory_pool_done"),
    (
        "[2026-01-15 11:59:13 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=30.00 GB",
        "cuda_graph",
    ),
    (
        "[2026-01-15 11:59:20 TP0] Capture cuda graph end. Time elapsed: 7.00 s. mem usage=1.00 GB. avail mem=29.00 GB.",
        "cuda_graph_done",
    ),
    (
        "[2026-01-15 11:59:20 TP0] Capture draft cuda graph begin. This can take up to several minutes. avail mem=29.00 GB",
        "draft_cuda_graph",
    ),
    (
        "[2026-01-15 11:59:25 TP0] Capture draft cuda graph end. Time elapsed: 5.00 s. avail mem=28.00 GB. "
        "mem usage=1.00 GB.",
        "draft_cuda_graph_done",
    ),
    (
        "[2026-01-15 11:59:25 TP0] Capture draft extend cuda graph begin. This can take up to several minutes. "
        "avail mem=28.00 GB",
        "draft_cuda_graph",
    ),
    (
        "[2026-01-15 11:59:25 TP0] Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, "
        "bs=[1, 2], avail mem=28.00 GB",
        "cuda_graph",
    ),
    (
        "[2026-01-15 11:59:25 TP0] Capture target decode CUDA graph end. elapsed=16.40 s, mem usage=1.00 GB, "
        "avail mem=27.00 GB.",
        "cuda_graph_done",
    ),
    (
        "[2026-01-15 11:59:25 TP0] Capture draft decode CUDA graph end. elapsed=3.00 s, mem usage=0.50 GB, "
        "avail mem=26.00 GB.",
        "draft_cuda_graph_done",
    ),
    (
        "[2026-01-15 11:59:26 TP0] max_total_num_tokens=500000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=256, context_len=8192, available_gpu_mem=26.00 GB",
        "scheduler_ready",
    ),
    ("[2026-01-15 11:59:27] INFO:     Started server process [1234]", "http_server"),
    ("[2026-01-15 11:59:27] INFO:     Application startup complete.", "http_ready"),
    (
        "[2026-01-15 11:59:27] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
        "http_ready",
    ),
    ('[2026-01-15 11:59:28] INFO:     127.0.0.1:40052 - "GET /get_model_info HTTP/1.1" 200 OK', "warmup"),
    ("[2026-01-15 11:59:29] The server is fired up and ready to roll!", "ready"),
]

VLLM_STARTUP = [
    ("(APIServer pid=1) INFO 05-04 01:00:00 [api_server.py:1800] vLLM API server version 0.10.2", "args"),
    ("(APIServer pid=1) INFO 05-04 01:00:00 [utils.py:300] non-default args: {'model': 'm'}", "args"),
    (
        "(EngineCore_DP0 pid=7) INFO 05-04 01:00:01 [core.py:70] Initializing a V1 LLM engine (v0.10.2) with config: "
        "model='m', speculative_config=SpeculativeConfig(method='eagle3')",
        "engine_init",
    ),
    ("(Worker_TP0 pid=8) INFO 05-04 01:00:02 [pynccl.py:70] vLLM is using nccl==2.27.3", "init_distributed"),
    (
        "(EngineCore_DP0 pid=7) INFO 05-04 01:00:12 [default_loader.py:260] Loading weights took 12.34 seconds",
        "load_weights_done",
    ),
    (
        "(EngineCore_DP0 pid=7) INFO 05-04 01:00:12 [gpu_model_runner.py:2000] Model loading took 15.2 GiB and 20.1 "
        "seconds",
        "load_weights_done",
    ),
    (
        "(EngineCore_DP0 pid=7) INFO 05-04 01:00:13 [gpu_worker.py:270] Available KV cache memory: 112.61 GiB",
        "kv_cache",
    ),
    (
        "(EngineCore_DP0 pid=7) INFO 05-04 01:00:13 [kv_cache_utils.py:900] GPU KV cache size: 922,496 tokens",
        "kv_cache",
    ),
    (
        "(EngineCore_DP0 pid=7) INFO 05-04 01:00:25 [gpu_model_runner.py:2500] Graph capturing finished in 12 secs, "
        "took 0.55 GiB",
        "cuda_graph_done",
    ),
    (
        "(EngineCore_DP0 pid=7) INFO 05-04 01:00:25 [core.py:200] init engine (profile, create kv cache, warmup model) "
        "took 1.06 seconds",
        "engine_ready",
    ),
    (
        "(APIServer pid=1) INFO 05-04 01:00:26 [api_server.py:1900] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "http_server",
    ),
    ("(APIServer pid=1) INFO:     Started server process [1]", "http_server"),
    ("(APIServer pid=1) INFO:     Application startup complete.", "ready"),
]


@pytest.mark.parametrize(("line", "phase"), SGLANG_STARTUP)
def test_sglang_milestones(line: str, phase: str) -> None:
    assert SGLANG.phase_of(line) == phase
    m = LogParser("sglang").parse(line)
    assert m is not None and m.phase == phase
    assert m.event == ("ready" if phase == "ready" else "startup")


@pytest.mark.parametrize(("line", "phase"), VLLM_STARTUP)
def test_vllm_milestones(line: str, phase: str) -> None:
    assert VLLM.phase_of(line) == phase
    m = LogParser("vllm").parse(line)
    assert m is not None and m.phase == phase


def test_milestone_numbers_and_ready_helpers() -> None:
    m = LogParser("sglang").parse(SGLANG_STARTUP[4][0])
    assert m.fields["elapsed"] == 10.0 and m.fields["avail_mem"] == 60.0
    assert SGLANG.is_ready("[2026-01-15 11:59:29] The server is fired up and ready to roll!")
    assert not SGLANG.is_ready("[2026-01-15 11:59:27] INFO:     Application startup complete.")
    assert VLLM.is_ready("(APIServer pid=1) INFO:     Application startup complete.")
    assert SGLANG.is_warmup_done("[2026-01-15 11:59:29] Warmup ended")
    assert LogParser("sglang").parse("[2026-01-15 11:59:29] Warmup ended").event == "warmup_done"


def test_milestone_data_is_importable() -> None:
    phases = [p for p, _ in SGLANG.milestones]
    assert phases.index("load_weights") < phases.index("cuda_graph") < phases.index("ready")
    assert all(hasattr(rx, "search") for _, rx in VLLM.errors)


# ---- NCCL env lines (4.2) ------------------------------------------------------------------------------


def test_nccl_env_lines() -> None:
    assert parse_nccl_env_line(
        "gpuhost:41733:41790 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1."
    ) == {
        "host": "gpuhost",
        "pid": 41733,
        "tid": 41790,
        "rank": 1,
        "name": "NCCL_IB_DISABLE",
        "value": "1",
    }
    d = parse_nccl_env_line(
        "(Worker_TP0 pid=5) box-1:5:9 [0] NCCL INFO NCCL_PROTO set by environment to Simple"
    )
    assert d["name"] == "NCCL_PROTO" and d["value"] == "Simple" and d["pid"] == 5 and d["rank"] == 0
    assert (
        parse_nccl_env_line("h:1:2 [3] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n")["value"]
        == "LOC"
    )
    assert parse_nccl_env_line("h:1:2 [3] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC") is None
    assert parse_nccl_env_line("random text") is None
    m = LogParser("auto").parse(
        "gpuhost:41733:41790 [1] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608."
    )
    assert m.event == "nccl_env" and m.fields["value"] == "8388608" and m.fields["rank"] == 1


# ---- pack detection, prefix, key/value tails -------------------------------------------------------------


def test_detect_pack() -> None:
    assert detect_pack([SGLANG_STARTUP[0][0], SGLANG_STARTUP[1][0]]) == "sglang"
    assert detect_pack([line for line, _ in VLLM_STARTUP[:3]]) == "vllm"
    assert detect_pack([SGLANG_DECODE[0][0]]) == "sglang"
    assert detect_pack([VLLM_LINES[3][0]]) == "vllm"
    assert detect_pack(["hello", "world"]) is None
    det = PackDetector()
    det.feed("(APIServer pid=1) INFO:     Started server process [1]")
    assert det.decided is None or det.decided == "vllm"


def test_auto_parser_settles_on_pack() -> None:
    p = LogParser("auto")
    for line, _ in VLLM_STARTUP:
        p.parse(line)
    assert p.pack_name == "vllm"
    # "Application startup complete." is vLLM's ready line
    assert p.parse(VLLM_STARTUP[-1][0]).event == "ready"
    s = LogParser("auto")
    for line, _ in SGLANG_STARTUP[:3]:
        s.parse(line)
    assert s.pack_name == "sglang"
    assert s.parse("[2026-01-15 11:59:27] INFO:     Application startup complete.").event == "startup"


def test_auto_parses_batch_lines_before_deciding() -> None:
    p = LogParser("auto")
    assert p.parse(VLLM_LINES[3][0]).metrics["mean_acceptance_length"] == 2.4
    q = LogParser("auto")
    assert q.parse(SGLANG_DECODE[2][0]).metrics["accept_len"] == 2.95


def test_split_prefix_and_keys() -> None:
    p = split_prefix("[2025-05-31 18:31:21 DP0 TP0] hello")
    assert (p.ts, p.ranks, p.start) == ("2025-05-31 18:31:21", "DP0 TP0", 30)
    v = split_prefix("(APIServer pid=1) WARNING 05-04 01:06:43 [x.py:1] hi")
    assert v.level == "WARNING" and v.ts == "05-04 01:06:43"
    assert norm_key("#running-req") == "running_req"
    assert norm_key("gen throughput (token/s)") == "gen_throughput"
    fields, units, _ = parse_kv_tail("a: 1, b: 2.5%, c: True, d: 0.1, 0.2, e: x y, ")
    assert fields == {"a": 1, "b": 2.5, "c": True, "d": [0.1, 0.2], "e": "x y"}
    assert units == {"b": "%"}


def test_profile_and_grep_patterns() -> None:
    p = LogParser(
        "sglang",
        patterns={
            "verify_ms": r"Target verify[^0-9]*(?P<value>[0-9.]+) ?ms",
            "steps": r"draft steps=(?P<value>\d+) kind=(?P<kind>\w+)",
        },
    )
    m = p.parse("[2026-01-15 12:00:05 TP0] Target verify took 3.25 ms")
    assert m.event == "verify_ms" and m.metrics == {"verify_ms": 3.25}
    assert m.line[m.spans[0][0] : m.spans[0][1]] == "3.25"
    m2 = p.parse("[2026-01-15 12:00:05 TP0] draft steps=3 kind=eagle")
    assert m2.metrics == {"steps": 3.0} and m2.fields["kind"] == "eagle"
    # a pack line that also matches a profile pattern counts for both
    both = LogParser("sglang", patterns={"al": r"accept len: (?P<value>[0-9.]+)"}).parse(SGLANG_DECODE[2][0])
    assert both.event == "decode_batch" and both.also == ["al"] and both.metrics["al"] == 2.95
    g = LogParser("sglang", grep=[r"gen throughput \(token/s\): (?P<tp>[0-9.]+)"])
    gm = g.parse(SGLANG_DECODE[2][0])
    assert gm.fields["tp"] == 310.4 and gm.event == "decode_batch"
    assert g.parse("[2026-01-15 12:00:05 TP0] unrelated") is None
    plain = LogParser("auto", grep=["hello"]).parse("say hello")
    assert plain.event == "match"


def test_bad_pattern_names_itself() -> None:
    from specdebug.core.logs.parser import PatternError

    with pytest.raises(PatternError, match="verify_ms"):
        LogParser("sglang", patterns={"verify_ms": "(unclosed"})


def test_prefilter_keeps_every_line_the_pack_reports() -> None:
    """The on-box prefilter (literals) must select a superset of what the parser reports."""
    samples = [line for line, *_ in SGLANG_DECODE + SGLANG_PREFILL + SGLANG_STARTUP + SGLANG_ERRORS]
    vsamples = [line for line, *_ in VLLM_LINES + VLLM_STARTUP + VLLM_ERRORS]
    nccl = "gpuhost:41733:41790 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1."
    for pack, lines in ((SGLANG, [*samples, nccl]), (VLLM, [*vsamples, nccl])):
        assert all(not any(c in p for c in ".^$*+?{}[]\\|()") for p in pack.prefilter)  # plain literals
        parser = LogParser(pack.name)
        for line in lines:
            if parser.parse(line) is not None:
                assert any(lit in line for lit in pack.prefilter), line
