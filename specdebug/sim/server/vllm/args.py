"""`vllm serve MODEL ...` flags for the sim's vLLM engine (`python -m specdebug.sim --engine vllm ...`).

vLLM's names (-tp/--tensor-parallel-size, --port 8000, --speculative-config JSON, ...) and its way of
failing: --speculative-config goes through vLLM's `parse_type(json.loads)`, so bad JSON is an argparse
error (`Value {...} cannot be converted to <function loads ...>.`, exit 2); unknown keys are rejected
by a pydantic dataclass like vLLM's SpeculativeConfig (a ValidationError traceback, exit 1); a bad
method is a ValueError.  The sim-only flags both engines share (--log-file, --time-scale, --drop-env,
--fail-requests, --noise, --noise-seed, --decode-scale) come from sim.server.common.simonly, as on the SGLang side.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import Any

from specdebug.sim.server.common.cluster import DEFAULT_TIMEOUT_S, ClusterArgs, bind_address
from specdebug.sim.server.common.costmodel import SpecConfig
from specdebug.sim.server.common.simonly import CommonSimOptions, add_common_flags, pop_common

DEFAULT_VERSION = "0.34.0"  # the newest release read (2026-12); sim.server.vllm.shapes
SPEC_METHODS = ("ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "deepseek_mtp", "mtp")
# the methods the sim models (the others are accepted names without a model here)
SIM_METHODS = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "EAGLE",
    "deepseek_mtp": "EAGLE",
    "ngram": "NGRAM",
}
VLLM_FAULT_PHASES = ("init", "load_weights", "kv_cache", "cuda_graph")


@dataclass
class VllmArgs:
    """What the sim uses of `vllm serve` (non-default ones are logged like vLLM's `non-default args`)."""

    model: str = "specdebug-sim/SimLlama-70B-Instruct"
    host: str | None = None
    port: int = 8000
    served_model_name: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29501
    headless: bool = False
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    trust_remote_code: bool = False
    enforce_eager: bool = False
    disable_log_stats: bool = False
    enable_log_requests: bool = False
    seed: int = 0
    api_key: str | None = None
    speculative_config: dict[str, Any] | None = None

    def url(self) -> str:
        host = self.host if self.host not in (None, "", "0.0.0.0") else "127.0.0.1"
        return f"http://{host}:{self.port}"


@dataclass
class VllmSimOptions(CommonSimOptions):
    """The shared sim-only switches (simonly.CommonSimOptions) plus vLLM's own fault phases."""

    fail_at: str | None = None
    hang_at: str | None = None
    server_version: str = DEFAULT_VERSION
    dist_timeout: float | None = None  # the rendezvous timeout (vLLM has no flag: torch's default)
    exit_delay: float = 0.0  # after a failed start: seconds the main process takes to exit (real: ~2 s)


@dataclass
class VllmConfig:
    args: VllmArgs
    sim: VllmSimOptions
    spec: SpecConfig
    method: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "args": asdict(self.args),
            "sim": asdict(self.sim),
            "spec": asdict(self.spec),
            "method": self.method,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VllmConfig:
        return cls(
            VllmArgs(**data["args"]),
            VllmSimOptions(**data["sim"]),
            SpecConfig(**data["spec"]),
            data["method"],
        )

    @property
    def served_name(self) -> str:
        return self.args.served_model_name or self.args.model


def _parse_type(return_type):
    """vLLM's arg_utils.parse_type: a ValueError becomes argparse's "cannot be converted" error."""

    def _parse(val: str):
        try:
            return return_type(val)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"Value {val} cannot be converted to {return_type}.") from e

    return _parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vllm serve",
        description="The sim's vLLM engine: `vllm serve` flag names, logs, processes and endpoints (no GPU).",
    )
    p.add_argument(
        "model_tag", nargs="?", metavar="MODEL", help="the model (or --model); `serve MODEL` works too"
    )
    p.add_argument("--model")
    p.add_argument("--host")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name")
    p.add_argument("-tp", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("-pp", "--pipeline-parallel-size", type=int, default=1)
    p.add_argument("-dp", "--data-parallel-size", type=int, default=1)
    p.add_argument("--enable-expert-parallel", "-ep", action="store_true")
    p.add_argument("--nnodes", "-n", type=int, default=1)
    p.add_argument("--node-rank", "-r", type=int, default=0)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29501)
    p.add_argument("--headless", action="store_true")
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--dtype", default="auto")
    for name in ("--trust-remote-code", "--enforce-eager", "--disable-log-stats", "--enable-log-requests"):
        p.add_argument(name, action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--api-key")
    p.add_argument("--speculative-config", type=_parse_type(json.loads))
    sim = p.add_argument_group("sim-only")
    sim.add_argument(
        "--engine", choices=["vllm"], default="vllm", help="this engine (--engine sglang: SGLang)"
    )
    add_common_flags(sim)
    sim.add_argument("--fail-at", choices=VLLM_FAULT_PHASES, help="EngineCore fails to start in this phase")
    sim.add_argument("--hang-at", choices=VLLM_FAULT_PHASES, help="stop making progress in this phase")
    sim.add_argument(
        "--dist-timeout",
        type=float,
        metavar="S",
        help="multi-node: seconds the rendezvous waits for every rank (vLLM has no such flag; torch's 600)",
    )
    sim.add_argument(
        "--exit-delay",
        type=float,
        default=0.0,
        metavar="S",
        help="after a failed start, the main process exits S s after its traceback (real vLLM 0.32 on a "
        "CPU: 2.2 s of interpreter teardown, idle)",
    )
    sim.add_argument(
        "--server-version",
        default=DEFAULT_VERSION,
        help=f"vLLM version whose line shapes to print (default: the newest read, {DEFAULT_VERSION}; sim.server.vllm.shapes)",
    )
    return p


def spec_config(raw: dict[str, Any] | None) -> tuple[SpecConfig, str | None]:
    """Validate --speculative-config like vLLM (ValidationError/ValueError propagate) and map it onto
    the shared cost model: K speculative tokens = K draft steps, a chain (topk 1, K+1 verified)."""
    if raw is None:
        return SpecConfig(), None
    if not isinstance(raw, dict):
        raise ValueError(f"--speculative-config must be a JSON object, got {type(raw).__name__}")
    from specdebug.sim.server.vllm.specconfig import SpeculativeConfig  # pydantic: here, not in workers

    cfg = SpeculativeConfig(**raw)
    k = int(cfg.num_speculative_tokens or 0)
    algo = SIM_METHODS.get(cfg.method or "", "EAGLE")
    return SpecConfig(algorithm=algo, num_steps=k, topk=1, num_draft_tokens=k + 1), cfg.method


def parse_vllm_args(argv: list[str]) -> VllmConfig:
    """argparse errors exit 2; speculative-config validation errors raise (the caller prints them)."""
    argv = strip_engine(argv)
    if argv[:1] == ["serve"]:
        argv = argv[1:]
    ns = vars(build_parser().parse_args(argv))
    sim = VllmSimOptions(
        **pop_common(ns),
        fail_at=ns.pop("fail_at"),
        hang_at=ns.pop("hang_at"),
        server_version=ns.pop("server_version"),
        dist_timeout=ns.pop("dist_timeout"),
        exit_delay=ns.pop("exit_delay"),
    )
    ns.pop("engine")
    tag = ns.pop("model_tag")
    model = ns.pop("model") or tag or VllmArgs.model
    args = VllmArgs(model=model, **ns)
    check_nodes(args)
    spec, method = spec_config(args.speculative_config)
    return VllmConfig(args, sim, spec, method)


def strip_engine(argv: list[str]) -> list[str]:
    """Drop the sim's `--engine vllm` (it picks this module; `vllm serve` has no such flag)."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--engine" and i + 1 < len(argv):
            skip = True
            continue
        if arg.startswith("--engine="):
            continue
        out.append(arg)
    return out


def non_default_args(args: VllmArgs, model_tag: bool = True) -> dict[str, Any]:
    """What vLLM logs as `non-default args: {...}` (api_key redacted)."""
    default = asdict(VllmArgs())
    out: dict[str, Any] = {"model_tag": args.model} if model_tag else {}
    for k, v in asdict(args).items():
        if v != default.get(k):
            out[k] = "***" if k == "api_key" else v
    return out


def check_nodes(args: VllmArgs) -> None:
    """One node of a TP group split evenly; nodes >= 1 run headless (vLLM's multi-node mp mode)."""
    if args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        raise ValueError(f"node_rank={args.node_rank} must be in [0, nnodes={args.nnodes})")
    if args.tensor_parallel_size % args.nnodes:
        raise ValueError(
            f"tensor_parallel_size={args.tensor_parallel_size} must be divisible by nnodes={args.nnodes}"
        )
    if args.node_rank >= 1 and not args.headless:
        raise ValueError(
            "the sim runs nodes with --node-rank >= 1 only with --headless (workers only, as vLLM's docs say)"
        )


def cluster_of(cfg: VllmConfig) -> ClusterArgs | None:
    """vLLM's torch.distributed group: `tcp://{master_addr}:{master_port}` (None: one node)."""
    a = cfg.args
    if a.nnodes <= 1:
        return None
    return ClusterArgs(
        nnodes=a.nnodes,
        node_rank=a.node_rank,
        world=a.tensor_parallel_size,
        host=a.master_addr,
        port=a.master_port,
        timeout_s=cfg.sim.dist_timeout or DEFAULT_TIMEOUT_S,
        bind=bind_address(a.host),
    )


def local_ranks(cfg: VllmConfig) -> list[int]:
    """The global TP ranks whose workers run on this node."""
    a = cfg.args
    local = max(1, a.tensor_parallel_size // max(1, a.nnodes))
    return list(range(a.node_rank * local, a.node_rank * local + local))
