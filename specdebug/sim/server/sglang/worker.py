"""The spawned children: one scheduler per TP rank and the detokenizer, titled like SGLang's.

Each child sets its title with setproctitle (clobbering /proc/PID/environ unless SPT_NOENV was set at
launch, exactly as on a real box), reports the env it really has to the launcher, walks through the
startup milestones printing SGLang's per-rank lines, and then idles until told to crash (warmup
fault) or until the launcher goes away (PR_SET_PDEATHSIG plus a getppid poll: no orphans).
Kept free of heavy imports: every spawn re-imports this module.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from specdebug.sim.box import gpushare
from specdebug.sim.server.common import faults
from specdebug.sim.server.common.cluster import RankInit, start_watchdog_fault
from specdebug.sim.server.common.logsink import LogSink
from specdebug.sim.server.sglang import sched_frames
from specdebug.sim.server.sglang.options import SimConfig, cluster_of
from specdebug.sim.server.sglang.shapes import Rank, Shapes, scheduler_ranks, startup_timings

# startup durations in seconds at --time-scale 1.0 (a 1T MoE on 8 GPUs: a few minutes)
DURATIONS = {
    "init": 6.0,
    "load_weights": 75.0,
    "kv_cache": 3.0,
    "cuda_graph": 30.0,
    "draft_load": 6.0,
    "draft_graph": 12.0,
    "draft_extend_graph": 6.0,
}
FAULT_AT_FRACTION = 0.4  # how far into a phase a fault or hang strikes

# reported env: what decides the cost model and the profile switch
REPORTED_PREFIXES = ("NCCL_", "EAGLE3_", "SPT_NOENV", "CUDA_")

NCCL_VERSION = "2.21.5+cuda12.4"
NCCL_QUIET_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")

MLA_BYTES_PER_TOKEN = (512 + 64) * 2 * 61  # DeepSeek-V3 style MLA cache, bf16, 61 layers
GPU_TOTAL_GB = 79.19
TARGET_ARCH = "DeepseekV3ForCausalLM"
DRAFT_ARCH = "LlamaForCausalLMEagle3"


@dataclass
class MemoryPlan:
    """Per-rank memory figures printed in the milestones (GB), derived from --mem-fraction-static."""

    total: float
    avail_start: float
    after_init: float
    weights: float
    after_weights: float
    kv: float
    after_pool: float
    graph: float
    after_graph: float
    draft_weights: float
    draft_graph: float
    final: float
    tokens: int

    @classmethod
    def for_config(cls, cfg: SimConfig) -> MemoryPlan:
        s = cfg.server
        total = GPU_TOTAL_GB
        avail_start = total - 0.76
        after_init = avail_start - (0.43 if s.tp_size > 1 else 0.0)
        weights = 62.0
        after_weights = after_init - weights
        kv = after_weights - total * (1.0 - (s.mem_fraction_static or 0.88))
        after_pool = after_weights - max(kv, 0.0)
        graph = 0.0 if s.disable_cuda_graph else 0.35 + 0.85 * (s.cuda_graph_max_bs or 160) / 160
        after_graph = after_pool - graph
        spec = cfg.spec.enabled
        draft_weights = 1.22 if spec else 0.0
        draft_graph = (0.0 if s.disable_cuda_graph else 0.49) if spec else 0.0
        final = after_graph - draft_weights - 2 * draft_graph
        tokens = max(0, int(max(kv, 0.0) * 1024**3 / MLA_BYTES_PER_TOKEN))
        if s.max_total_tokens:
            tokens = min(tokens, s.max_total_tokens)
        return cls(
            total, avail_start, after_init, weights, after_weights, kv, after_pool, graph, after_graph,
            draft_weights, draft_graph, final, tokens,
        )  # fmt: skip


def cuda_graph_batch_sizes(max_bs: int) -> list[int]:
    sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8))
    return [b for b in sizes if b <= max_bs]


def node_ranks(cfg: SimConfig) -> list[Rank]:
    """This node's schedulers: all of them on one node; node r of N holds TP ranks r*L .. r*L+L-1."""
    s = cfg.server
    legacy = Shapes(cfg.sim.server_version).era == "legacy"
    ranks = scheduler_ranks(
        s.tp_size, s.pp_size, s.dp_size, s.ep_size, dp_attention=s.enable_dp_attention, legacy=legacy
    )
    if s.nnodes <= 1:
        return ranks
    local = max(1, s.tp_size // s.nnodes)
    mine = [r for r in ranks if r.tp // local == s.node_rank]
    return [replace(r, index=i) for i, r in enumerate(mine)]


def local_gpus(cfg: SimConfig) -> int:
    """GPUs this node's server uses: --tp over the nodes."""
    return max(1, cfg.server.tp_size // max(1, cfg.server.nnodes))


def die_with_parent() -> None:
    """SIGKILL this child when the launcher dies (like SGLang's kill_itself_when_parent_died), plus a poll."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def poll() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(0)
            time.sleep(0.2)

    threading.Thread(target=poll, name="parent-watch", daemon=True).start()
    if os.getppid() != parent:
        os._exit(0)


def _reported_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(REPORTED_PREFIXES)}


def nccl_debug_on(env: dict[str, str]) -> bool:
    return env.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE")


def nccl_init_lines(env: dict[str, str], rank: int, nranks: int, pid: int, tid: int, host: str) -> list[str]:
    """What NCCL prints with NCCL_DEBUG=INFO at comm init: one `set by environment` line per var it reads."""
    head = f"{host}:{pid}:{tid} [{rank}] NCCL INFO "
    lines = [head + "Bootstrap : Using lo:127.0.0.1<0>"]
    if rank == 0:
        lines.append(head + f"NCCL version {NCCL_VERSION}")
    lines.append(head + "cudaDriverVersion 12040")
    for name in sorted(env):
        if not name.startswith("NCCL_") or name in NCCL_QUIET_VARS:
            continue
        value = env[name]
        dot = "." if value.lstrip("-").isdigit() else ""  # integer params print "%lld."
        lines.append(head + f"{name} set by environment to {value}{dot}")
    lines += [
        head + "NET/IB : No device found.",
        head + "NET/Socket : Using [0]lo:127.0.0.1<0>",
        head + "Using network Socket",
    ]
    comm = f"0x{0x55D0C8A00000 + rank * 0x1000:x}"
    bus = f"{(rank + 1) * 0x1000:x}"
    ident = f"rank {rank} nranks {nranks} cudaDev {rank} nvmlDev {rank} busId {bus} commId 0x5f3c1e2d9a7b4c01"
    lines.append(head + f"ncclCommInitRank comm {comm} {ident} - Init START")
    if nranks > 1:
        p2p_off = env.get("NCCL_P2P_DISABLE") == "1" or env.get("NCCL_P2P_LEVEL", "").upper() in ("LOC", "0")
        via = "SHM/direct/direct" if p2p_off else "P2P/direct pointer"
        peer = (rank + 1) % nranks
        lines.append(head + f"Channel 00/0 : {rank}[{rank}] -> {peer}[{peer}] via {via}")
        lines.append(head + f"Channel 01/0 : {rank}[{rank}] -> {peer}[{peer}] via {via}")
        lines.append(head + "Connected all rings")
    lines.append(head + f"ncclCommInitRank comm {comm} {ident} - Init COMPLETE")
    return lines


class SimScheduler:
    """One TP rank's startup and idle loop."""

    def __init__(self, cfg: SimConfig, rank: Rank, conn: Connection, sink: LogSink, n_ranks: int = 0):
        self.cfg = cfg
        self.index = rank.index
        self.rank = rank.tp
        self.conn = conn
        self.sink = sink
        self.mem = MemoryPlan.for_config(cfg)
        self.shapes = Shapes(cfg.sim.server_version)
        self.fail_rank = max(n_ranks, 1) - 1  # faults strike the last rank: a tool must look beyond TP0
        self.skew = 1.0 + 0.004 * rank.index
        self.env = _reported_env()
        self.cluster = cluster_of(cfg.server)
        self.rank_init: RankInit | None = None
        self.timings: dict[str, float] = {}
        self.graph_timings: dict[str, float] = {}

    # --- helpers ---------------------------------------------------------------------------------
    def _send(self, *msg: Any) -> None:
        try:
            self.conn.send(msg)
        except (OSError, EOFError):
            os._exit(0)

    def _sleep(self, key: str, fraction: float = 1.0) -> None:
        sched_frames.startup_wait(key, DURATIONS[key] * self.cfg.sim.time_scale * self.skew * fraction)

    def _phase(self, name: str, line: str) -> None:
        when = self.sink.info(line) or time.time()
        self._send("phase", name, when)

    def _checkpoint(self, phase: str) -> None:
        """Called FAULT_AT_FRACTION into each phase: hang (all ranks) or crash (the fail rank)."""
        sim = self.cfg.sim
        if sim.hang_at == phase:
            self._send("hang", phase, time.time())
            while True:
                time.sleep(3600)
        if sim.fail_at == phase and self.index == self.fail_rank:
            self._raise_fault(phase)

    def _raise_fault(self, phase: str) -> None:
        m = self.mem
        if phase == "init":
            faults.init_torch_distributed(self.rank)
        elif phase == "load_weights":
            faults.load_model(f"{self.cfg.server.model_path}/model-00037-of-00064.safetensors")
        elif phase == "kv_cache":
            faults.init_memory_pool(m.total, self.cfg.server.mem_fraction_static or 0.88)
        elif phase == "cuda_graph":
            faults.init_cuda_graphs(self.rank, m.total, 1.06, oom=False)

    def _tqdm(self, text: str) -> None:
        if self.index == 0:
            self.sink.raw(text)  # tqdm bars: stderr, TP0 only, no log prefix

    # --- startup ---------------------------------------------------------------------------------
    def startup(self) -> None:
        s, m, spec = self.cfg.server, self.mem, self.cfg.spec
        t = self.t_start = time.monotonic()
        self._phase("init", self.shapes.init_begin())
        self._sleep("init", FAULT_AT_FRACTION)
        self._checkpoint("init")
        if self.cluster is not None:  # blocks until every rank of every node joined
            self.rank_init = RankInit(
                self.cluster,
                self.cluster.global_rank(self.index),
                self.env,
                lambda line: self.sink.raw(line, stream=1),
            )
            self.rank_init.run(never_join=self.cfg.sim.never_join)
        elif nccl_debug_on(self.env):
            host, pid, tid = socket.gethostname(), os.getpid(), threading.get_native_id()
            for line in nccl_init_lines(self.env, self.rank, s.tp_size, pid, tid, host):
                self.sink.raw(line, stream=1)
        self._sleep("init", 1 - FAULT_AT_FRACTION)
        self.sink.info(self.shapes.init_end(time.monotonic() - t, m.avail_start - m.after_init))

        t = time.monotonic()
        self._phase("load_weights", f"Load weight begin. avail mem={m.after_init:.2f} GB")
        self._tqdm("Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]")
        self._sleep("load_weights", FAULT_AT_FRACTION)
        self._checkpoint("load_weights")
        self._tqdm("Loading safetensors checkpoint shards:  50% Completed | 32/64 [00:30<00:30,  1.07it/s]")
        self._sleep("load_weights", 1 - FAULT_AT_FRACTION)
        self._tqdm("Loading safetensors checkpoint shards: 100% Completed | 64/64 [01:15<00:00,  1.17it/s]")
        self.sink.info(
            self.shapes.load_weight_end(time.monotonic() - t, TARGET_ARCH, m.after_weights, m.weights)
        )
        self.timings["load_weight"] = time.monotonic() - t
        t = time.monotonic()

        kv_line = self.shapes.kv_dtype_line
        if kv_line is not None:
            self._phase("kv_cache", kv_line)
        else:  # 0.5.23 prints nothing as the pool setup starts
            self._send("phase", "kv_cache", time.time())
        self._sleep("kv_cache", FAULT_AT_FRACTION)
        self._checkpoint("kv_cache")
        if m.tokens <= 0 or gpushare.no_kv_cache_room(local_gpus(self.cfg), s.mem_fraction_static or 0.88):
            faults.init_memory_pool(m.total, s.mem_fraction_static or 0.88)
        self._sleep("kv_cache", 1 - FAULT_AT_FRACTION)
        dtype = "dtype: torch.bfloat16, " if self.shapes.era == "current" else ""
        self.sink.info(f"KV Cache is allocated. {dtype}#tokens: {m.tokens}, KV size: {m.kv:.2f} GB")
        self.sink.info(f"Memory pool end. avail mem={m.after_pool:.2f} GB")
        self.timings["kv_cache_allocation"] = time.monotonic() - t

        if not s.disable_cuda_graph:
            t = time.monotonic()
            sizes = cuda_graph_batch_sizes(s.cuda_graph_max_bs or 160)
            target = "target verify" if spec.enabled else "target decode"
            per_req = spec.num_draft_tokens if spec.enabled else 1
            self._phase("cuda_graph", self._capture_begin(target, per_req, sizes, m.after_pool))
            if self.index == 0 and self.shapes.era != "current":
                self.sink.info(f"Capture cuda graph bs {sizes}")
            self._sleep("cuda_graph", FAULT_AT_FRACTION)
            self._checkpoint("cuda_graph")
            if (self.cfg.sim.oom and self.index == self.fail_rank) or m.after_graph < 0.3:
                faults.init_cuda_graphs(self.rank, m.total, max(m.after_pool - m.graph * 0.6, 0.01), oom=True)
            self._sleep("cuda_graph", 1 - FAULT_AT_FRACTION)
            took = time.monotonic() - t
            self._tqdm(
                f"Capturing batches (bs=1 avail_mem={m.after_graph:.2f} GB): 100%|██████████| "
                f"{len(sizes)}/{len(sizes)} [00:{min(int(took), 59):02d}<00:00, {len(sizes) / max(took, 0.01):5.2f}it/s]"
            )
            self.sink.info(self._capture_end(target, took, m.graph, m.after_graph))
            self.graph_timings[target.replace(" ", "_")] = took
        if spec.enabled:
            self._draft_startup()
        if self.index == 0:
            max_running = s.max_running_requests or (48 if spec.enabled else 4096)
            self.sink.info(
                f"max_total_num_tokens={m.tokens}, chunked_prefill_size={s.chunked_prefill_size}, "
                f"max_prefill_tokens={s.max_prefill_tokens}, max_running_requests={max_running}, "
                f"context_len={s.context_length or 131072}, available_gpu_mem={m.final:.2f} GB"
            )
            if self.shapes.era == "current":
                parts = {
                    **self.timings,
                    "scheduler_e2e": time.monotonic() - self.t_start,
                    "tokenizer_e2e": 0.41,
                }
                self.sink.info(startup_timings(parts, self.graph_timings))
        self._send(
            "ready",
            {
                "status": "ready",
                "rank": self.index,
                "pid": os.getpid(),
                "env": self.env,
                "max_total_num_tokens": m.tokens,
                "max_req_input_len": (s.context_length or 131072) - 5,
                "memory": {"weight": m.weights, "kvcache": round(m.kv, 2), "graph": round(m.graph, 2)},
            },
        )
        if self.rank_init is not None and self.index == self.fail_rank:
            start_watchdog_fault(self.rank_init, self.cfg.sim.nccl_timeout_after)

    def _draft_startup(self) -> None:
        s, m = self.cfg.server, self.mem
        t = time.monotonic()
        self.sink.info(f"Load weight begin. avail mem={m.after_graph:.2f} GB")
        self._sleep("draft_load")
        self.sink.info(
            self.shapes.load_weight_end(
                time.monotonic() - t, DRAFT_ARCH, m.after_graph - m.draft_weights, m.draft_weights
            )
        )
        if s.disable_cuda_graph:
            return
        avail = m.after_graph - m.draft_weights
        sizes = cuda_graph_batch_sizes(s.cuda_graph_max_bs or 160)
        first = "draft decode" if self.shapes.era == "current" else "draft"
        for label, key in ((first, "draft_graph"), ("draft extend", "draft_extend_graph")):
            t = time.monotonic()
            self.sink.info(self._capture_begin(label, self.cfg.spec.topk, sizes, avail))
            self._sleep(key)
            avail -= m.draft_graph
            took = time.monotonic() - t
            self.sink.info(self._capture_end(label, took, m.draft_graph, avail))
            self.graph_timings[label.replace(" ", "_")] = took

    def _capture_begin(self, label: str, per_req: int, sizes: list[int], avail: float) -> str:
        """Classic `Capture cuda graph begin. ...` / current `Capture target verify CUDA graph begin. ...`."""
        if self.shapes.era == "current":
            return (
                f"Capture {label} CUDA graph begin. backend=full, num_tokens_per_req={per_req}, bs={sizes}, "
                f"avail mem={avail:.2f} GB"
            )
        what = "cuda graph" if label.startswith("target") else f"{label} cuda graph"
        return f"Capture {what} begin. This can take up to several minutes. avail mem={avail:.2f} GB"

    def _capture_end(self, label: str, took: float, usage: float, avail: float) -> str:
        if self.shapes.era == "current":
            return f"Capture {label} CUDA graph end. elapsed={took:.2f} s, mem usage={usage:.2f} GB, avail mem={avail:.2f} GB."
        if label.startswith("target"):
            return f"Capture cuda graph end. Time elapsed: {took:.2f} s. mem usage={usage:.2f} GB. avail mem={avail:.2f} GB."
        return f"Capture {label} cuda graph end. Time elapsed: {took:.2f} s. avail mem={avail:.2f} GB. mem usage={usage:.2f} GB."

    # --- serving ---------------------------------------------------------------------------------
    def serve(self) -> None:
        """Serve like a scheduler whose batches the launcher's engine models (frames: sim.server.sglang.sched_frames);
        crash on request."""
        sched_frames.event_loop_normal(self.conn, self.index, faults.event_loop_normal)


def run_scheduler_process(cfg_dict: dict[str, Any], index: int, conn: Connection) -> None:
    """Entry point of a spawned scheduler (mirrors sglang's run_scheduler_process)."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C goes to the launcher, which ends us
    cfg = SimConfig.from_dict(cfg_dict)
    s = cfg.server
    ranks = node_ranks(cfg)
    rank = ranks[index]
    import setproctitle

    setproctitle.setproctitle(rank.title)
    sink = LogSink(cfg.sim.log_file, level=s.log_level, prefix=rank.prefix)
    scheduler = SimScheduler(cfg, rank, conn, sink, len(ranks))
    try:
        scheduler.startup()
        scheduler.serve()
    except Exception:
        sink.error(f"Scheduler hit an exception: {traceback.format_exc().rstrip()}")
        try:
            os.kill(os.getppid(), signal.SIGQUIT)
        except OSError:
            pass
        sys.exit(1)


def run_detokenizer_process(
    cfg_dict: dict[str, Any], conn: Connection | None, title: str = "sglang::detokenizer"
) -> None:
    """Entry point of the spawned detokenizer (or DP controller): titled, idle, gone with the launcher."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import setproctitle

    setproctitle.setproctitle(title)
    if conn is None:
        while True:
            time.sleep(3600)
    idle_until_exit(conn)


def idle_until_exit(conn: Connection) -> None:
    """A process with nothing to do (detokenizer, a vLLM worker): until "exit" or the pipe closes."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg == "exit":
            return
