"""vLLM as an Engine: its pack, phases, ready line, worker titles, env rules, /metrics, bench client.

Sources: shared/formats/serving-formats.md (log lines), current-sources.md (/metrics names), and for
the multi-node flags shared/notes/multinode.md section 1.6 (multiprocessing, no Ray).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from specdebug.engines.base import BenchDialect, EngineName, PromNames, SpecShape, check_node
from specdebug.engines.envrules import EnvRule, parse_version
from specdebug.engines.pack import Pack
from specdebug.engines.vllm_pack import READY_LINE, VLLM

# vLLM: PR #19105 (June 2025, ~0.9.1) respects an explicit NCCL_CUMEM_ENABLE in env_override.py;
# PR #24141 (~0.11.0) removed the override; before, worker_base.py forced 0 inside each worker.
VLLM_CUMEM_RESPECTED_SINCE = (0, 9, 1)  # approximate (release of PR #19105)
VLLM_CUMEM_DROPPED_SINCE = (0, 11, 0)  # approximate (release of PR #24141)

# what vLLM's printed `Draft acceptance rate` means (every version seen)
ACCEPT_RATE_MEANINGS = {
    "draft_acceptance_rate": "vLLM: accepted / drafted tokens, in percent (bonus token left out)"
}


# Where a py-spy stack of a vLLM process is, from its function names (py-spy names a frame by its
# qualname, `WorkerProc.worker_busy_loop`; a name with a dot matches the qualname's tail, one without
# the last part).  First match wins, so a rule sits above the rules its frames nest in: a collective
# inside a forward, the drafter inside sample_tokens, startup RPCs inside the engine core's wait for
# its workers.  Read from vLLM 0.32.0 and 0.34.0: distributed/parallel_state.py (GroupCoordinator),
# v1/worker/gpu_model_runner.py (0.32) and v1/worker/gpu/model_runner.py (0.34, the V2 runner:
# `self.model(...)` in execute_model, `sample`, `speculator.propose`), v1/worker/gpu_worker.py,
# v1/sample/sampler.py, v1/spec_decode/*_proposer.py, v1/executor/multiproc_executor.py (WorkerProc,
# FutureWrapper, collective_rpc's get_response), v1/engine/core.py (EngineCore, EngineCoreProc).
# Idle: the engine core in `EngineCoreProc._process_input_queue` (`queue.get`), a worker in
# `MessageQueue.dequeue` (shm_broadcast.py) straight under `WorkerProc.worker_busy_loop`.
# an API server that kept its command line (not retitled): `python -m vllm.entrypoints...` or `vllm serve`
API_SERVER_CMDLINE = re.compile(r"vllm\.entrypoints\.|(?:^|[\s/])vllm serve\b")
VLLM_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gatherv",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatterv",
    "GroupCoordinator.gather",
    "GroupCoordinator.broadcast",
    "broadcast_object",
    "broadcast_object_list",
    "broadcast_tensor_dict",
    "send_tensor_dict",
    "recv_tensor_dict",
    "send_object",
    "recv_object",
    "GroupCoordinator.send",
    "GroupCoordinator.recv",
    "GroupCoordinator.barrier",
    "GroupCoordinator.dispatch",
    "GroupCoordinator.combine",
)
STACK_PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("in a collective: {name}", VLLM_COLLECTIVES),
    ("startup: loading weights", ("load_model", "load_weights", "reload_weights")),
    ("startup: memory profiling", ("determine_available_memory", "profile_run")),
    ("startup: KV cache", ("_initialize_kv_caches", "initialize_from_config", "initialize_kv_cache")),
    ("startup: warm-up / graph capture", ("compile_or_warm_up_model", "capture_model")),
    (
        "waiting for the workers' output",
        ("get_response", "FutureWrapper.result", "FutureWrapper._wait_for_response"),
    ),
    ("in the drafter: {name}", ("propose", "propose_draft_token_ids", "prepare_propose")),
    (
        "in sampling: {name}",
        ("Sampler.forward", "RejectionSampler.forward", "GPUModelRunner.sample", "_sample", "sample_tokens"),
    ),
    ("in the forward pass: {name}", ("_model_forward", "execute_model", "execute_dummy_batch")),
    ("scheduling", ("Scheduler.schedule",)),
    ("processing outputs", ("update_from_output",)),
    ("handling a request", ("_handle_client_request",)),
    ("in an engine step", ("_process_engine_step", "step_with_batch_queue", "EngineCore.step")),
    ("in an RPC from the engine core", ("_execute_worker_rpc",)),
    ("idle (waiting for work)", ("_process_input_queue", "worker_busy_loop")),
)


def vllm_rules(version: str | None, argv: Sequence[str] = ()) -> dict[str, EnvRule]:
    """vLLM's NCCL_CUMEM_ENABLE handling (set inside each process, so /proc/PID/environ never shows it)."""
    v = parse_version(version)
    name = "NCCL_CUMEM_ENABLE"
    if v is not None and v >= VLLM_CUMEM_DROPPED_SINCE:
        return {}
    if v is not None and v >= VLLM_CUMEM_RESPECTED_SINCE:
        note = f"vLLM {version} sets {name}=0 only when it is not exported (env_override.py, PR #19105)"
        return {name: EnvRule(name, "default", "0", note)}
    if v is not None:
        note = f"vLLM {version} forces {name}=0 inside each worker (worker_base.py; invisible in environ)"
        return {name: EnvRule(name, "overwrites", "0", note)}
    note = (
        f"older vLLM (before ~0.9.1) forced {name}=0 inside each worker (invisible in environ); 0.9.1-0.10 "
        "keep an exported value (PR #19105); 0.11+ leave it alone (PR #24141); server version unknown"
    )
    return {name: EnvRule(name, "maybe", "0", note)}


PROM = PromNames(
    prefix="vllm:",
    spec_from="counters",
    accept_rate_is_own="= accept rate (vLLM counts accepted / drafted tokens, bonus left out)",
    off_hint="metrics off: vLLM always serves /metrics; check the port or a proxy in front of the server",
    gauges=(
        ("running", ("vllm:num_requests_running",)),
        ("queued", ("vllm:num_requests_waiting",)),
        ("kv_usage", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),  # older: gpu_
    ),
    generation_tokens="vllm:generation_tokens",
    drafts="vllm:spec_decode_num_drafts",
    draft_tokens="vllm:spec_decode_num_draft_tokens",
    accepted_tokens="vllm:spec_decode_num_accepted_tokens",
    accepted_per_pos="vllm:spec_decode_num_accepted_tokens_per_pos",
    dp_label="engine",  # v1/metrics/loggers.py: labelnames ["model_name", "engine"], one engine per DP rank
)

BENCH = BenchDialect(
    tool="vllm bench serve",
    block_keys=(
        "failed requests",
        "maximum request concurrency",
        "request rate configured (rps)",
        "request goodput (req/s)",
    ),
    latency_word="e2el",
    order=1,
    saved_flag="--save-result",
    writes_spec_decode=True,
    # v1/metrics/loggers.py LoggingStatLogger: "Avg generation throughput" and the SpecDecoding line are
    # means over the interval since the previous line (envs.py VLLM_LOG_STATS_INTERVAL, default 10.0)
    log_interval="vLLM's stats interval (VLLM_LOG_STATS_INTERVAL, 10 s by default)",
)

# evidence a log line gives (summed by engines.detect); weight 3: lines only vLLM prints
DETECT = (
    (
        3,
        re.compile(
            r"SpecDecoding metrics|Speculative metrics|Avg prompt throughput|vLLM (?:API )?server version"
        ),
    ),
    (2, re.compile(r"\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorker\w*) (?:rank=\d+ )?pid=\d+\)|VLLM::")),
    (1, re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d |vLLM|vllm")),
)


class Vllm:
    """The vLLM engine (every attribute documented on `engines.base.Engine`)."""

    name: EngineName = "vllm"
    title: str = "vLLM"
    package: str = "vllm"
    pack: Pack = VLLM
    phases: tuple[str, ...] = (
        "launch",
        "args",
        "engine_init",
        "load_weights",
        "kv_cache",
        "http_server",
        "ready",
    )
    ready_line: str = READY_LINE
    worker_titles: tuple[str, ...] = (
        "VLLM::",
        "VllmWorker",
    )  # VLLM::Worker_TP0, VLLM::EngineCore; older VllmWorker
    worker_match: str = "VLLM::(Worker|EngineCore)"
    env_prefixes: tuple[str, ...] = ("VLLM_",)
    default_port: int = 8000
    version_paths: tuple[str, ...] = ("/version",)
    prom: PromNames = PROM
    bench: BenchDialect = BENCH
    detect: tuple[tuple[int, re.Pattern[str]], ...] = DETECT
    accept_rate_meanings: Mapping[str, str] = ACCEPT_RATE_MEANINGS
    spec_switch: str = "--speculative-config"
    stack_phases: tuple[tuple[str, tuple[str, ...]], ...] = STACK_PHASES

    def env_rules(self, version: str | None, argv: Sequence[str] = ()) -> dict[str, EnvRule]:
        return vllm_rules(version, argv)

    def spec_shape(self, flags: Mapping[str, list[str]]) -> SpecShape | None:
        """--speculative-config's num_speculative_tokens + 1 (the drafts plus the target's own token)."""
        conf = flags.get(self.spec_switch) or flags.get("--speculative_config")
        if not conf:
            return None
        try:
            data = json.loads(conf[0])
        except ValueError:
            return True, None, None, "--speculative-config (not JSON)"
        n = data.get("num_speculative_tokens") if isinstance(data, dict) else None
        if isinstance(n, int) and n > 0:
            return True, n + 1, None, "--speculative-config num_speculative_tokens + 1"
        return True, None, None, "--speculative-config (no num_speculative_tokens)"

    def _spec_config(self, flags: Mapping[str, list[str]]) -> tuple[str, dict[str, Any]]:
        name = self.spec_switch if flags.get(self.spec_switch) else "--speculative_config"
        try:
            data = json.loads((flags.get(name) or ["{}"])[0])
        except ValueError:
            data = {}
        return name, data if isinstance(data, dict) else {}

    def spec_method(self, flags: Mapping[str, list[str]]) -> str:
        """--speculative-config's method and draft model."""
        data = self._spec_config(flags)[1]
        return f"{self.name} {data.get('method', '?')} {data.get('model', '')}".strip()

    def spec_depth_flags(self, flags: Mapping[str, list[str]], depth: int) -> list[tuple[str, list[str]]]:
        """--speculative-config with num_speculative_tokens = depth, its other keys kept."""
        name, data = self._spec_config(flags)
        return [(name, [json.dumps({**data, "num_speculative_tokens": depth})])]

    def claims_saved(self, obj: Mapping[str, Any]) -> bool:
        """`--save-result` JSON: a `failed` count and no `backend` key (vllm/benchmarks/serve.py)."""
        return "failed" in obj and "backend" not in obj

    def node_args(self, nnodes: int, rank: int, leader_addr: str, port: int) -> list[str]:
        """Multiprocessing multi-node (no Ray): `--nnodes N --node-rank i --master-addr LEADER` on every
        node, plus `--headless` (no API server) on ranks >= 1 (shared/notes/multinode.md 1.6, from
        vLLM's docs/serving/parallelism_scaling.md and the LWS guide).  `--master-port PORT` is
        ParallelConfig's master_port flag; the notes name only the address, so its spelling rests on
        vLLM's arg parser, not on a source we read.  One node: nothing to add."""
        check_node(nnodes, rank, leader_addr, port)
        if nnodes == 1:
            return []
        args = ["--nnodes", str(nnodes), "--node-rank", str(rank), "--master-addr", leader_addr]
        args += ["--master-port", str(port)]
        return args + (["--headless"] if rank >= 1 else [])


ENGINE = Vllm()
