"""SGLang as an Engine: its pack, phases, ready line, worker titles, env rules, /metrics, bench client.

Sources: shared/formats/serving-formats.md (log lines), current-sources.md (0.5.23 names), and for
the multi-node flags shared/notes/multinode.md section 1.1.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from specdebug.engines.base import (
    NO_SPEC,
    BenchDialect,
    EngineName,
    PromNames,
    SpecShape,
    check_node,
    int_flag,
)
from specdebug.engines.envrules import EnvRule, has_flag, parse_version
from specdebug.engines.pack import Pack
from specdebug.engines.sglang_pack import READY_LINE, SGLANG

# SGLang engine.py `_set_envs_and_config`: the `"NAME" not in os.environ` guard (current copies, index
# ids 51822085073 / 193236366) vs unconditional assignment (older copies, ids 38009857313 / 196295075).
SGLANG_ENV_GUARD_SINCE = (0, 5, 3)  # approximate
SGLANG_GUARD_SRC = "SGLang engine.py _set_envs_and_config (current: `not in os.environ` guard)"
SGLANG_OLD_SRC = "SGLang engine.py _set_envs_and_config (older versions: unconditional)"

# what SGLang's printed `accept rate:` means, per version (metrics_reporter.py:968-985 in 0.5.23)
WITH_BONUS = "with_bonus"
WITHOUT_BONUS = "without_bonus"
ACCEPT_RATE_MEANINGS = {
    WITH_BONUS: "SGLang < 0.5.23: accepted tokens incl. the bonus / (forwards x draft tokens) = accept length / draft tokens",
    WITHOUT_BONUS: "SGLang >= 0.5.23: accepted drafts / (forwards x (draft tokens - 1)), bonus token left out",
}


def sglang_rules(version: str | None, argv: Sequence[str] = ()) -> dict[str, EnvRule]:
    """SGLang's launcher env handling (engine.py `_set_envs_and_config`), for this version and argv."""
    v = parse_version(version)
    symm = has_flag(argv, "--enable-symm-mem")
    nvls = has_flag(argv, "--enable-nccl-nvls") or symm
    rules = {
        "CUDA_DEVICE_MAX_CONNECTIONS": EnvRule(
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "overwrites",
            "8" if v is None or v >= SGLANG_ENV_GUARD_SINCE else "4",
            "SGLang sets CUDA_DEVICE_MAX_CONNECTIONS itself before spawning workers "
            "(8 in current engine.py, 4 in older versions)",
        ),
        "CUDA_MODULE_LOADING": EnvRule(
            "CUDA_MODULE_LOADING",
            "overwrites",
            "AUTO",
            "SGLang sets CUDA_MODULE_LOADING=AUTO before spawning workers (engine.py, every version)",
        ),
    }
    for name, forced, flag in (
        ("NCCL_CUMEM_ENABLE", symm, "--enable-symm-mem"),
        ("NCCL_NVLS_ENABLE", nvls, "--enable-nccl-nvls/--enable-symm-mem"),
    ):
        if forced:
            rules[name] = EnvRule(
                name, "overwrites", "1", f"SGLang sets {name}=1 for {flag} ({SGLANG_GUARD_SRC})"
            )
        elif v is not None and v < SGLANG_ENV_GUARD_SINCE:
            rules[name] = EnvRule(
                name,
                "overwrites",
                "0",
                f"SGLang {version} sets {name}=0 before spawning workers ({SGLANG_OLD_SRC})",
            )
        elif v is not None:
            rules[name] = EnvRule(
                name,
                "default",
                "0",
                f"SGLang {version} sets {name}=0 only when it is not exported ({SGLANG_GUARD_SRC})",
            )
        else:
            rules[name] = EnvRule(
                name,
                "maybe",
                "0",
                f"current SGLang keeps an exported {name} and sets 0 only when it is unset; older SGLang "
                f"(before ~{'.'.join(map(str, SGLANG_ENV_GUARD_SINCE))}) overwrote it with 0; server version unknown",
            )
    return rules


PROM = PromNames(
    prefix="sglang:",
    spec_from="gauges",
    enable_flag="--enable-metrics",
    off_hint="metrics off: add --enable-metrics to the server's argv (SGLang exports /metrics only with it)",
    gauges=(
        ("accept_length", ("sglang:spec_accept_length",)),
        ("accept_rate", ("sglang:spec_accept_rate",)),
        ("running", ("sglang:num_running_reqs",)),
        ("queued", ("sglang:num_queue_reqs",)),
        ("kv_usage", ("sglang:token_usage",)),
        ("num_steps", ("sglang:spec_num_steps",)),
        ("num_draft_tokens", ("sglang:spec_num_draft_tokens",)),
    ),
    accept_length="sglang:spec_accept_length",
    accept_rate="sglang:spec_accept_rate",
    num_draft_tokens="sglang:spec_num_draft_tokens",
    verify_calls="sglang:spec_verify_calls",
    generation_tokens="sglang:generation_tokens",
    gen_throughput="sglang:gen_throughput",
    # settings every DP rank reports alike (SGLang 0.5.23): the same number, not a sum
    mean_names=frozenset({"sglang:spec_num_steps", "sglang:spec_num_draft_tokens"}),
    own_rate_source="(sglang:spec_accept_length - 1) / (sglang:spec_num_draft_tokens - 1)",
    dp_label="dp_rank",  # srt/observability/metrics_collector.py: only when the scheduler has a DP rank
    settings=(
        ("num_steps", "speculative steps", "--speculative-num-steps"),
        ("num_draft_tokens", "draft tokens", "--speculative-num-draft-tokens"),
    ),
)

BENCH = BenchDialect(
    tool="sglang.bench_serving",
    block_keys=(
        "backend",
        "max reqeuest concurrency",
        "max request concurrency",
        "concurrency",
        "accept length",
    ),
    latency_word="e2e latency",
    order=2,
    saved_flag="--output-file",  # its keys are the commoner ones: asked after vLLM's
    # the scheduler's decode log line: tokens and acceptance since its previous decode line
    log_interval="SGLang's decode-log interval (--decode-log-interval decode batches, 40 by default)",
)

# evidence a log line gives (summed by engines.detect); weight 3: lines only SGLang prints
DETECT = (
    (
        3,
        re.compile(
            r"(?:Decode|Prefill) batch[ .,\[(]|server_args=(?:ServerArgs\(|\{)|fired up and ready to roll"
        ),
    ),
    (2, re.compile(r"sglang::|sglang\.srt|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)+\] ")),
    (1, re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] |sglang")),
)


# the scheduler's function names on the main thread, per phase (first match wins; the sim copies them)
STACK_PHASES = (
    ("verify (target forward, extend mode)", ("verify",)),
    ("draft", ("draft", "draft_forward")),
    ("decode (CUDA graph replay)", ("replay",)),
    ("decode", ("forward_decode",)),
    ("prefill (extend)", ("forward_extend",)),
    ("startup: init", ("init_torch_distributed", "init_distributed_environment")),
    ("startup: load_weights", ("load_model", "load_weights")),
    ("startup: kv_cache", ("init_memory_pool",)),
    ("startup: cuda_graph", ("capture", "init_cuda_graphs")),
    ("idle (waiting for requests)", ("recv_requests", "event_loop_normal", "event_loop_overlap")),
)


class SGLang:
    """The SGLang engine (every attribute documented on `engines.base.Engine`)."""

    name: EngineName = "sglang"
    title: str = "SGLang"
    package: str = "sglang"
    pack: Pack = SGLANG
    phases: tuple[str, ...] = (
        "launch",
        "args",
        "load_weights",
        "kv_cache",
        "cuda_graph",
        "http_server",
        "warmup",
        "ready",
    )
    ready_line: str = READY_LINE
    worker_titles: tuple[str, ...] = (
        "sglang::",
    )  # sglang::scheduler_TP0, sglang::detokenizer (setproctitle)
    worker_match: str = "sglang::scheduler"
    env_prefixes: tuple[str, ...] = ("SGLANG_",)
    default_port: int = 30000
    version_paths: tuple[str, ...] = ("/get_server_info", "/server_info")  # older, newer
    prom: PromNames = PROM
    bench: BenchDialect = BENCH
    detect: tuple[tuple[int, re.Pattern[str]], ...] = DETECT
    accept_rate_meanings: Mapping[str, str] = ACCEPT_RATE_MEANINGS
    spec_switch: str = "--speculative-algorithm"
    stack_phases: tuple[tuple[str, tuple[str, ...]], ...] = STACK_PHASES

    def env_rules(self, version: str | None, argv: Sequence[str] = ()) -> dict[str, EnvRule]:
        return sglang_rules(version, argv)

    def spec_shape(self, flags: Mapping[str, list[str]]) -> SpecShape | None:
        """--speculative-num-draft-tokens, else num-steps + 1 (SGLang's own default at topk 1)."""
        algo = flags.get(self.spec_switch)
        if not algo:
            return None
        if algo[0].lower() in NO_SPEC:
            return False, 1, None, f"{self.spec_switch} {algo[0]}"
        topk = int_flag(flags.get("--speculative-eagle-topk"))
        tokens = int_flag(flags.get("--speculative-num-draft-tokens"))
        if tokens is not None:
            return True, tokens, topk, "--speculative-num-draft-tokens"
        steps = int_flag(flags.get("--speculative-num-steps"))
        if steps is not None and (topk or 1) == 1:
            return True, steps + 1, topk, "--speculative-num-steps + 1 (topk 1)"
        return True, None, topk, "argv does not give the draft tokens"

    def spec_method(self, flags: Mapping[str, list[str]]) -> str:
        """--speculative-algorithm and the draft model."""
        algo = (flags.get(self.spec_switch) or ["?"])[0].upper()
        draft = flags.get("--speculative-draft-model-path") or flags.get("--speculative-draft-model") or [""]
        return f"{self.name} {algo} {draft[0]}".strip()

    def spec_depth_flags(self, flags: Mapping[str, list[str]], depth: int) -> list[tuple[str, list[str]]]:
        """--speculative-num-steps k and, at topk 1, --speculative-num-draft-tokens k + 1 (SGLang's own
        rule: a chain verifies the steps plus the target's token)."""
        return [
            ("--speculative-num-steps", [str(depth)]),
            ("--speculative-num-draft-tokens", [str(depth + 1)]),
        ]

    def claims_saved(self, obj: Mapping[str, Any]) -> bool:
        """`--output-file` JSON: anything vLLM's `--save-result` shape does not claim."""
        return not ("failed" in obj and "backend" not in obj)

    def node_args(self, nnodes: int, rank: int, leader_addr: str, port: int) -> list[str]:
        """`--nnodes N --node-rank i --dist-init-addr LEADER:PORT` on every node, the same address on
        all of them (shared/notes/multinode.md 1.1: the 405B example `--tp 16 --dist-init-addr
        172.16.4.52:20000 --nnodes 2 --node-rank 0|1`).  One node: nothing to add.  An IPv6 leader is
        written in brackets so the port stays apart."""
        check_node(nnodes, rank, leader_addr, port)
        if nnodes == 1:
            return []
        host = f"[{leader_addr}]" if ":" in leader_addr else leader_addr
        return ["--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-init-addr", f"{host}:{port}"]


ENGINE = SGLang()
