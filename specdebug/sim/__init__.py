"""A simulated SGLang (or vLLM) speculative-decoding server: a GPU box specdebug can debug without a GPU.

Two engines, one cost model: `--engine sglang` (default; this docstring) imitates
`python -m sglang.launch_server`; `--engine vllm` imitates `vllm serve MODEL ...` (sim.server.vllm.server:
vLLM's flags and --speculative-config JSON, `(APIServer pid=N) INFO MM-DD ...` lines, VLLM::EngineCore
and VLLM::Worker_TP<r> processes, the stats and `SpecDecoding metrics:` lines, /health, /v1/models,
/metrics with vLLM's names).  `--server-version` picks the line shapes (and env handling) of an older
or newer release (sim.server.sglang.shapes, sim.server.vllm.engine).  The `[EAGLE3 profile] ... Target verify` line
(--profile-verify) is not something SGLang prints: it stands for a user's own instrumentation.

Run it as `python -m specdebug.sim [flags]` or `specdebug sim [flags]`.  It takes SGLang's flag
names (--model-path, --tp, --port, --speculative-algorithm, --speculative-num-steps, ...) plus
sim-only ones (--log-file, --time-scale, --seed, --fail-at, --hang-at, --oom, --drop-env,
--decode-scale, --fail-requests, --profile-verify, --noise; those of sim.server.common.simonly mean the same with
--engine vllm), and behaves like `python -m sglang.launch_server` wherever specdebug looks:

Processes
    The launcher (title = its command line) spawns, with multiprocessing "spawn", one scheduler per
    TP rank titled `sglang::scheduler_TP<r>` (plain `sglang::scheduler` when tp=1) and a
    `sglang::detokenizer`, via setproctitle.  setproctitle clobbers /proc/PID/environ of those
    children unless SPT_NOENV is set at launch, as on a real box.  --drop-env PREFIX removes vars
    from the launcher's os.environ right before spawning, so workers lack them while the launcher's
    own (exec-time) /proc environ still shows them.  The launcher also applies SGLang's overrides
    (NCCL_CUMEM_ENABLE, NCCL_NVLS_ENABLE, CUDA_DEVICE_MAX_CONNECTIONS, CUDA_MODULE_LOADING).  Children
    die with the launcher (PR_SET_PDEATHSIG + getppid poll); a dead child takes the server down.

Log (stderr, uvicorn access lines on stdout, and appended to --log-file, one write per line)
    SGLang's formats: `[YYYY-mm-dd HH:MM:SS TP<r>] msg` for scheduler lines (no rank when tp=1,
    like newer SGLang), `[YYYY-mm-dd HH:MM:SS] msg` for the main process, uvicorn lines as SGLang's
    set_uvicorn_logging_configs() formats them, NCCL INFO lines (`HOST:PID:TID [RANK] NCCL INFO
    NAME set by environment to VALUE`) from each worker for the NCCL_* vars it really has when its
    env has NCCL_DEBUG=INFO.

Phases (`PHASES`) and the log line that starts each (as --server-version 0.5.4 prints it; 0.5.23, the
default, prints `Init parallel begin.`, no KV-dtype line, `Capture target verify CUDA graph begin. ...`
and `server_args={...}`: `phase_lines(version)`, sim.server.sglang.shapes):
    init          `Init torch distributed begin.`                    (each rank)
    load_weights  `Load weight begin. avail mem=... GB`              (each rank; target model)
    kv_cache      `Using KV cache dtype: torch.bfloat16`             (each rank)
    cuda_graph    `Capture cuda graph begin. This can take up to several minutes. ...` (each rank;
                  absent with --disable-cuda-graph; the draft model's load and graph captures
                  follow inside this phase when speculative)
    http          `INFO:     Started server process [PID]`           (uvicorn, main process)
    warmup        the access line of the warmup's `GET /get_model_info` (`/model_info` from 0.5.6)
    ready         `The server is fired up and ready to roll!`        (never with --skip-server-warmup)
    Startup durations at --time-scale 1.0 total about 2.5 minutes; tests use 0.01-0.05.

Sidecar `<log-file>.sim.json` (only with --log-file; rewritten atomically at each change)
    {"pid", "argv", "host", "port", "log_file", "started_at", "tp_size", "speculative_algorithm",
     "workers": {"0": pid, ...}, "detokenizer_pid",
     "phases": {phase: unix time the phase's first line was written (earliest rank)},
     "ready_at": unix time right after the ready line was written (null until then),
     "ready_line": true (false when --skip-server-warmup made it ready without the line),
     "state": "starting" | "hung" | "ready" | "failed" | "stopped" | "exited",
     "hung_at": {"phase", "t"}, "failed_at", "stopped_at", "stop_signal",
     "worker_env": {rank: NCCL_*/EAGLE3_*/CUDA_* vars the worker reported},
     "nccl_tuning_missing": 0..3, "profile_verify": bool,
     "model": {"step_ms", "draft_ms", "verify_ms", "expected_accept_length",
               "expected_single_stream_tok_s"}}

Faults
    --fail-at init|load_weights|kv_cache|cuda_graph|warmup: the last TP rank raises a real
    exception part-way into the phase, logs `Scheduler hit an exception: Traceback ...`, SIGQUITs the
    launcher, which logs `Received sigquit from a child process. It usually means the child
    failed.` and kills the tree, itself included (exit by SIGKILL, as SGLang's kill_process_tree).
    --oom: `torch.OutOfMemoryError: CUDA out of memory. ...` while capturing cuda graphs, re-raised
    as `Exception: Capture cuda graph failed: ...` with SGLang's "Possible solutions" block.
    --hang-at PHASE: every rank (or, for warmup, the engine) stops making progress; all stay alive.
    Too small --mem-fraction-static gives SGLang's "Not enough memory" error; too large an OOM.

Multi-node (`--nnodes N --node-rank R --dist-init-addr HOST:PORT`, `--tp` = all nodes' GPUs)
    Each node is its own `python -m specdebug.sim` (own host address, e.g. 127.0.0.2 / 127.0.0.3) with
    the schedulers of its TP ranks (node R: R*L .. R*L+L-1).  Every rank blocks after `Init ... begin.`
    in a real TCP rendezvous at the dist-init address (rank 0 hosts the store) until all ranks of all
    nodes joined, or fails after --dist-timeout (default 600 s) as torch does (sim.server.common.
    rendezvous).  Node 0 serves the API and prints the ready line; nodes >= 1 start no detokenizer and
    serve SGLang's dummy health server (200 on /health, /health_generate, /ping; no ready line).  With
    NCCL_DEBUG=INFO each rank prints NCCL's bootstrap / `Using network IB|Socket` / Channel / `Init
    COMPLETE` lines as its env decides (sim.server.common.nccl_net).  Switches for the node they are
    given to: --never-join, --die-after-ready S, --nccl-timeout-after S (sim.server.common.simonly).
    vLLM's form: `serve M -tp N --nnodes 2 --node-rank R --master-addr A --master-port P`, `--headless`
    on ranks >= 1 (workers only: no EngineCore, no API; sim.server.vllm.headless); --dist-timeout is
    sim-only there (vLLM has no such flag).

Cost model (real time, not scaled by --time-scale; constants in `costmodel`)
    One decode iteration for a batch of bs running requests takes
        no speculation:  T_decode * (1 + 0.03 (bs-1)),  T_decode = 1000/89 ms = 11.24 ms
        speculative:     num_steps * 2.0 ms * (1 + 0.02 (bs-1))                          (draft)
                       + [13.0 ms * (1 + 0.03 (bs-1)) + 1.0 ms * num_draft_tokens * (1 + 0.5 (bs-1))]
                         * (1 + (30/19 - 1) * missing/3)                                  (target verify)
    where `missing` = how many of NCCL_PROTO, NCCL_ALGO, NCCL_P2P_LEVEL are absent from at least one
    worker's real environment (each scheduler reports its env to the launcher at startup).  With
    --disable-cuda-graph, or a batch larger than --cuda-graph-max-bs, every step is 1.35x slower
    (and the decode line says `cuda graph: False`).  Each iteration yields, per request, an
    acceptance length A in 1..num_steps+1 (counting the bonus token; 1 without speculation): depth i
    is accepted given depth i-1 with probability q_i = 1 - (1 - a_i)^(b^0.1768), a = (0.56, 0.571,
    0.55, 0.53, ...), b = min(topk, (num_draft_tokens-1)/num_steps) >= 1.  A is drawn per step from
    that distribution by smooth weighted round-robin with seeded random start credits (deterministic
    under --seed, low-discrepancy so even 40 steps realise the mean within ~3%).  Prefill: 20 ms + 0.05 ms/token (+2 ms draft
    extend), which also yields the first token.  Forward end times are deadlines on the monotonic
    clock, so the client-measured decode rate (tokens after the first / time) equals E[A] / step.
    Calibration, single stream (topk 1 forces num_draft_tokens = num_steps + 1, as in SGLang):
        NONE                                      89.0 tok/s
        EAGLE3 2 steps / topk 1 / 3 draft, NCCL   step 4 + 16 ms, E[A] 1.88  -> 94.0 tok/s
        EAGLE3 3 steps / topk>=2 / 6 draft, none  step 6 + 30 ms, E[A] 2.16  -> 60.0 tok/s
        same with the NCCL vars                   step 6 + 19 ms             -> 86.4 tok/s
    --noise F scales the step cost of a whole launch by a factor drawn from N(1, F) (clipped to
    [0.5, 1.5]), like a real box across restarts; drawn fresh at every launch unless --noise-seed.
    --draft-step-ms, --verify-base-ms, --verify-per-token-ms and --accept Q1,Q2,... (conditional
    acceptance per depth, the last repeating) give the model another box's shape (costmodel.Costs;
    the speculation advisor's benchmark runs a cheap drafter, an expensive verify, fast-dropping
    acceptance with them).
    Flags the model does not name above (scheduling, logging, memory within limits...) cost nothing.
    Concurrent requests share iterations (continuous batching), so per-stream rate falls as the
    batch grows while total throughput rises.  --profile-verify (or EAGLE3_PROFILE=1 in the workers'
    env) prints every 10 decode steps `[EAGLE3 profile] step=N draft: x ms, Target verify: y ms,
    accept: k` with TP0's prefix.
"""

from __future__ import annotations

PHASES: list[str] = ["init", "load_weights", "kv_cache", "cuda_graph", "http", "warmup", "ready"]
FAULT_PHASES: list[str] = ["init", "load_weights", "kv_cache", "cuda_graph", "warmup"]
HANG_PHASES: list[str] = ["init", "load_weights", "kv_cache", "cuda_graph", "warmup"]


def phase_lines(version: str | None = None) -> dict[str, str]:
    """The line (substring match) that starts each phase in `version` (default: the sim's default)."""
    from specdebug.sim.server.sglang.shapes import DEFAULT_VERSION, Shapes

    return Shapes(version or DEFAULT_VERSION).phase_lines()


PHASE_LINES: dict[str, str] = phase_lines()

__all__ = ["FAULT_PHASES", "HANG_PHASES", "PHASES", "PHASE_LINES", "phase_lines"]
