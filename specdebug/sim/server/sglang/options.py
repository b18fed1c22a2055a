"""Command-line flags of the sim: SGLang's names (parsed into a ServerArgs look-alike) plus sim-only ones.

Unknown flags are rejected the way SGLang's argparse does, so a typo in a profile fails like on a
real box.  ServerArgs' dataclass repr is what the `server_args=ServerArgs(...)` log line prints (its
dict from 0.5.23: `server_args={...}`).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from typing import Any

from specdebug.sim import FAULT_PHASES, HANG_PHASES
from specdebug.sim.server.common.cluster import DEFAULT_TIMEOUT_S, ClusterArgs, bind_address
from specdebug.sim.server.common.costmodel import SPEC_ALGORITHMS, SpecConfig
from specdebug.sim.server.common.simonly import CommonSimOptions, add_common_flags, pop_common
from specdebug.sim.server.sglang import flag_help
from specdebug.sim.server.sglang.args import TOPK1_ADJUST_WARNING, resolve_spec
from specdebug.sim.server.sglang.shapes import DEFAULT_VERSION as SGLANG_DEFAULT_VERSION
from specdebug.sim.server.sglang.shapes import Shapes

__all__ = ["TOPK1_ADJUST_WARNING", "ServerArgs", "SimConfig", "SimOptions", "build_parser", "parse_args"]


@dataclass
class ServerArgs:
    """The subset of SGLang's ServerArgs the sim understands, in SGLang's field order."""

    model_path: str = "specdebug-sim/SimMoE-1T-Instruct"
    tokenizer_path: str | None = None
    tokenizer_mode: str = "auto"
    skip_tokenizer_init: bool = False
    load_format: str = "auto"
    trust_remote_code: bool = False
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    context_length: int | None = None
    device: str = "cuda"
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = 16384
    schedule_policy: str = "fcfs"
    cuda_graph_max_bs: int | None = None
    tp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    pp_size: int = 1
    dist_init_addr: str | None = None
    nnodes: int = 1
    node_rank: int = 0
    nccl_port: int | None = None
    dist_timeout: int | None = None
    stream_interval: int = 1
    random_seed: int | None = None
    watchdog_timeout: float = 300
    log_level: str = "info"
    log_level_http: str | None = None
    log_requests: bool = False
    api_key: str | None = None
    enable_metrics: bool = False
    decode_log_interval: int = 40
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_accept_threshold_single: float = 1.0
    speculative_accept_threshold_acc: float = 1.0
    attention_backend: str | None = None
    disable_cuda_graph: bool = False
    enable_torch_compile: bool = False
    enable_dp_attention: bool = False
    disable_overlap_schedule: bool = False
    disable_custom_all_reduce: bool = False
    enable_nccl_nvls: bool = False
    enable_symm_mem: bool = False
    skip_server_warmup: bool = False

    def address(self) -> tuple[str, int]:
        """(host, port) a client on this machine connects to (a wildcard bind is reached on loopback)."""
        return ("127.0.0.1" if self.host in ("0.0.0.0", "") else self.host), self.port


@dataclass
class SimOptions(CommonSimOptions):
    """Sim-only switches (not part of ServerArgs, never printed in the server_args line): the ones
    both engines share (simonly.CommonSimOptions) plus SGLang's own."""

    server_version: str = SGLANG_DEFAULT_VERSION  # which SGLang's line shapes and env handling
    seed: int = 0
    fail_at: str | None = None
    hang_at: str | None = None
    oom: bool = False
    profile_verify: bool = False
    throttle_gpu: int | None = None
    throttle_after: float = 0.0


@dataclass
class SimConfig:
    server: ServerArgs
    sim: SimOptions
    spec: SpecConfig
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Picklable form handed to the spawned children."""
        return {"server": asdict(self.server), "sim": asdict(self.sim), "spec": asdict(self.spec)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimConfig:
        return cls(ServerArgs(**data["server"]), SimOptions(**data["sim"]), SpecConfig(**data["spec"]))


def _bool_flag(parser: argparse.ArgumentParser, *names: str) -> None:
    parser.add_argument(*names, action="store_true")


def build_parser(prog: str = "python -m specdebug.sim") -> argparse.ArgumentParser:
    p = flag_help.HelpfulParser(
        prog=prog,
        description="A simulated SGLang speculative-decoding server (no GPU): SGLang's flags, logs, "
        "processes and endpoints, plus sim-only fault switches.",
    )
    d = ServerArgs()
    p.add_argument("--model-path", "--model", default=d.model_path)
    p.add_argument("--tokenizer-path")
    p.add_argument("--tokenizer-mode", default="auto")
    p.add_argument("--load-format", default="auto")
    _bool_flag(p, "--trust-remote-code")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--quantization")
    p.add_argument("--context-length", type=int)
    p.add_argument("--device", default="cuda")
    p.add_argument("--served-model-name")
    p.add_argument("--host", default=d.host)
    p.add_argument("--port", type=int, default=d.port)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--max-total-tokens", type=int)
    p.add_argument("--chunked-prefill-size", type=int)
    p.add_argument("--max-prefill-tokens", type=int, default=d.max_prefill_tokens)
    p.add_argument("--schedule-policy", default="fcfs")
    p.add_argument("--cuda-graph-max-bs", type=int)
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
    p.add_argument("--ep-size", "--ep", dest="ep_size", type=int, default=1)
    p.add_argument("--pp-size", type=int, default=1)
    p.add_argument("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--nccl-port", type=int)
    p.add_argument("--dist-timeout", type=int)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--random-seed", type=int)
    p.add_argument("--watchdog-timeout", type=float, default=300)
    p.add_argument(
        "--log-level", default="info", choices=sorted(["debug", "info", "warning", "error", "critical"])
    )
    p.add_argument("--log-level-http")
    _bool_flag(p, "--log-requests")
    p.add_argument("--api-key")
    _bool_flag(p, "--enable-metrics")
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument(
        "--speculative-algorithm",
        type=str.upper,
        choices=[*SPEC_ALGORITHMS, "NONE"],
        help="EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM or NONE",
    )
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model")
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--speculative-accept-threshold-single", type=float, default=1.0)
    p.add_argument("--speculative-accept-threshold-acc", type=float, default=1.0)
    p.add_argument("--attention-backend")
    for name in (
        "--disable-cuda-graph",
        "--enable-torch-compile",
        "--enable-dp-attention",
        "--disable-overlap-schedule",
        "--disable-custom-all-reduce",
        "--enable-nccl-nvls",
        "--enable-symm-mem",
        "--skip-server-warmup",
    ):
        _bool_flag(p, name)

    sim = p.add_argument_group("sim-only")
    add_common_flags(sim)
    sim.add_argument("--engine", choices=["sglang", "vllm"], default="sglang", help="which server to imitate")
    sim.add_argument(
        "--server-version",
        default=SGLANG_DEFAULT_VERSION,
        help="SGLang version whose line shapes and env handling to imitate (default: the newest read, "
        f"{SGLANG_DEFAULT_VERSION}; see sim.server.sglang.shapes)",
    )
    sim.add_argument("--seed", type=int, default=0, help="seeds acceptance lengths and generated text")
    sim.add_argument(
        "--fail-at", choices=FAULT_PHASES, help="crash a scheduler with a traceback in this phase"
    )
    sim.add_argument("--hang-at", choices=HANG_PHASES, help="stop making progress in this phase, stay alive")
    sim.add_argument("--oom", action="store_true", help="CUDA out of memory while capturing cuda graphs")
    sim.add_argument(
        "--profile-verify", action="store_true", help="print [EAGLE3 profile] Target verify lines"
    )
    sim.add_argument(
        "--throttle-gpu",
        type=int,
        metavar="N",
        help="the simulated nvidia-smi shows GPU N thermal-throttling (with --throttle-after)",
    )
    sim.add_argument(
        "--throttle-after",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds after the start when --throttle-gpu begins (real time)",
    )
    p.fill_help()
    return p


def parse_args(argv: list[str], prog: str | None = None) -> SimConfig:
    """Parse argv; exits 2 with argparse's message on bad flags, like SGLang."""
    ns = vars((build_parser(prog) if prog else build_parser()).parse_args(argv))
    sim = SimOptions(
        **pop_common(ns),
        server_version=ns.pop("server_version"),
        seed=ns.pop("seed"),
        fail_at=ns.pop("fail_at"),
        hang_at=ns.pop("hang_at"),
        oom=ns.pop("oom"),
        profile_verify=ns.pop("profile_verify"),
        throttle_gpu=ns.pop("throttle_gpu"),
        throttle_after=ns.pop("throttle_after"),
    )
    ns.pop("engine")
    server = ServerArgs(**ns)
    if server.tokenizer_path is None:
        server.tokenizer_path = server.model_path
    if server.mem_fraction_static is None:
        server.mem_fraction_static = 0.88
    if server.chunked_prefill_size is None:
        server.chunked_prefill_size = 8192
    check_nodes(server)
    warnings: list[str] = []
    spec = resolve_spec(server, warnings, spec_v2=Shapes(sim.server_version).newest)
    if server.cuda_graph_max_bs is None:
        server.cuda_graph_max_bs = 48 if spec.enabled else 160
    if server.random_seed is None:
        server.random_seed = sim.seed
    return SimConfig(server=server, sim=sim, spec=spec, warnings=warnings)


def check_nodes(server: ServerArgs) -> None:
    """The multi-node flags must describe one node of a TP group split evenly (a ValueError, exit 1)."""
    if server.nnodes < 1 or not 0 <= server.node_rank < server.nnodes:
        raise ValueError(f"node_rank={server.node_rank} must be in [0, nnodes={server.nnodes})")
    if server.tp_size % server.nnodes:
        raise ValueError(f"tp_size={server.tp_size} must be divisible by nnodes={server.nnodes}")
    if server.dist_init_addr is not None:
        _, _, port = server.dist_init_addr.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"dist_init_addr={server.dist_init_addr!r} must be HOST:PORT")


def cluster_of(server: ServerArgs) -> ClusterArgs | None:
    """SGLang's rendezvous: `tcp://{dist_init_addr}`, else `tcp://127.0.0.1:{nccl_port}` (None: one node)."""
    if server.nnodes <= 1:
        return None
    if server.dist_init_addr:
        host, _, port = server.dist_init_addr.rpartition(":")
        host, port_n = host.strip("[]") or "127.0.0.1", int(port)
    else:
        host, port_n = "127.0.0.1", server.nccl_port or server.port + 233
    return ClusterArgs(
        nnodes=server.nnodes,
        node_rank=server.node_rank,
        world=server.tp_size,
        host=host,
        port=port_n,
        timeout_s=float(server.dist_timeout or DEFAULT_TIMEOUT_S),
        bind=bind_address(server.host),
    )
