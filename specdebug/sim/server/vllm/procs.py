"""The sim's vLLM processes: EngineCore (spawned by the API server) and its workers (one per TP rank).

As in vLLM V1 (vllm/v1/engine/core.py, vllm/v1/executor/multiproc_executor.py, vllm/utils
set_process_title): EngineCore calls setproctitle("VLLM::EngineCore") and logs with the
`(EngineCore_DP0 pid=N) ` prefix (`(EngineCore pid=N) ` from 0.33: sim.server.vllm.shapes); with TP > 1 it spawns workers titled `VLLM::Worker_TP{r}` (`_EP{e}`
with expert parallelism) that log as `(Worker_TP{r} pid=N) `; with TP 1 the model runs inside
EngineCore.  Log lines use vLLM's format `INFO MM-DD HH:MM:SS [file.py:line] msg`.  setproctitle
clobbers /proc/PID/environ unless SPT_NOENV was set at launch, as on a real box.  Each process walks
through the startup milestones, reports the env it really has, and idles until its parent goes.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import socket
import threading
import time
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from specdebug.sim.server.common import faults
from specdebug.sim.server.common.cluster import RankInit, start_watchdog_fault
from specdebug.sim.server.common.logsink import LogSink
from specdebug.sim.server.sglang.shapes import version_tuple
from specdebug.sim.server.sglang.worker import (
    REPORTED_PREFIXES,
    die_with_parent,
    nccl_debug_on,
    nccl_init_lines,
)
from specdebug.sim.server.vllm import shapes as vllm_shapes
from specdebug.sim.server.vllm.args import VllmConfig, cluster_of, local_ranks
from specdebug.sim.server.vllm.frames.core import EngineCoreProc
from specdebug.sim.server.vllm.frames.multiproc_executor import MultiprocExecutor, WorkerProc
from specdebug.sim.server.vllm.frames.shm_broadcast import MessageQueue
from specdebug.sim.server.vllm.frames.uniproc_executor import UniProcExecutor

DURATIONS = {"init": 4.0, "load_weights": 60.0, "kv_cache": 3.0, "cuda_graph": 20.0}
FAULT_AT_FRACTION = 0.4
NCCL_VERSION = "2.21.5"  # as the NCCL INFO lines say (worker.nccl_init_lines)
GPU_TOTAL_GIB = 79.19
KV_BYTES_PER_TOKEN = 80 * 8 * 128 * 2 * 2  # Llama-70B-like GQA cache, bf16, all ranks together
WORKER_FAILED = "WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause."


def vllm_line(proc: str, level: str, fileinfo: str, msg: str) -> str:
    """`(proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] msg`, the prefix repeated on every line
    of a multi-line message (vLLM's NewLineFormatter)."""
    head = f"({proc} pid={os.getpid()}) " if proc else ""  # "": a process vLLM does not decorate
    head += f"{level} {time.strftime('%m-%d %H:%M:%S')} [{fileinfo}] "
    return "\n".join(head + part for part in msg.split("\n"))


class VllmLog:
    """One process's logger: vLLM's format through the shared LogSink (one write per message)."""

    def __init__(self, sink: LogSink, proc: str) -> None:
        self.sink, self.proc = sink, proc

    def info(self, fileinfo: str, msg: str) -> float:
        return self.sink.raw(vllm_line(self.proc, "INFO", fileinfo, msg))

    def warning(self, fileinfo: str, msg: str) -> float:
        return self.sink.raw(vllm_line(self.proc, "WARNING", fileinfo, msg))

    def error(self, fileinfo: str, msg: str) -> float:
        return self.sink.raw(vllm_line(self.proc, "ERROR", fileinfo, msg))


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(REPORTED_PREFIXES)}


def model_size_b(model: str) -> float:
    """Billions of parameters from the model's name ("Llama-3.1-70B-Instruct" -> 70); 8 when unnamed."""
    m = re.search(r"(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", model)
    return float(m.group(1)) if m else 8.0


def worker_name(rank: int, tp: int, ep: bool) -> str:
    """multiproc_executor's `Worker` + `_TP{t}` (tp > 1) + `_EP{e}` (expert parallel)."""
    name = "Worker"
    if tp > 1:
        name += f"_TP{rank}"
    if ep:
        name += f"_EP{rank}"
    return name


class ModelRunner:
    """The milestones one model-running process prints (a Worker, or EngineCore itself at TP 1)."""

    def __init__(self, cfg: VllmConfig, rank: int, log: VllmLog, send) -> None:
        self.cfg, self.rank, self.log, self.send = cfg, rank, log, send
        a = cfg.args
        self.tp = max(a.tensor_parallel_size, 1)
        self.last_local = rank == local_ranks(cfg)[-1]  # faults strike this node's last rank
        self.fail = cfg.sim.fail_at is not None and self.last_local
        self.cluster = cluster_of(cfg)
        self.rank_init: RankInit | None = None
        # FP8 weights: ~1 GiB per billion parameters, split over the TP ranks (a draft model adds 1.6)
        self.weights_gib = 0.98 * model_size_b(a.model) / self.tp + (1.6 if cfg.spec.enabled else 0.0)
        self.kv_gib = GPU_TOTAL_GIB * a.gpu_memory_utilization - self.weights_gib - 2.4
        self.graph_gib = 0.0 if a.enforce_eager else 0.55

    def _sleep(self, phase: str, fraction: float) -> None:
        time.sleep(DURATIONS[phase] * self.cfg.sim.time_scale * fraction * (1 + 0.004 * self.rank))

    def _checkpoint(self, phase: str) -> None:
        self._sleep(phase, FAULT_AT_FRACTION)
        if self.cfg.sim.hang_at == phase:
            self.send(("hang", phase, time.time()))
            while True:
                time.sleep(3600)
        if self.cfg.sim.fail_at == phase and self.fail:
            if phase == "init":
                faults.init_torch_distributed(self.rank)
            elif phase == "load_weights":
                faults.load_model(f"{self.cfg.args.model}/model-00011-of-00030.safetensors")
            elif phase == "kv_cache":
                raise ValueError(
                    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                    "when initializing the engine."
                )
            else:
                faults.init_cuda_graphs(self.rank, GPU_TOTAL_GIB, 0.2, oom=True)
        self._sleep(phase, 1 - FAULT_AT_FRACTION)

    def _phase(self, name: str, fileinfo: str, msg: str) -> None:
        self.send(("phase", name, self.log.info(fileinfo, msg)))

    def run(self) -> dict[str, Any]:
        a, spec = self.cfg.args, self.cfg.spec
        env = _env()
        if version_tuple(self.cfg.sim.server_version) < (0, 9, 1):
            os.environ["NCCL_CUMEM_ENABLE"] = "0"  # worker_base.py: inside the worker, invisible in environ
        if self.cluster is not None:  # blocks in init_process_group until every rank of every node joined
            nccl_env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "GLOO_"))}
            self.rank_init = RankInit(
                self.cluster, self.rank, nccl_env, lambda line: self.log.sink.raw(line, stream=1)
            )
            self.rank_init.join(never_join=self.cfg.sim.never_join)
        if self.tp > 1:
            self.log.info(
                *vllm_shapes.rank_line(
                    self.cfg.sim.server_version,
                    self.rank,
                    self.tp,
                    self.rank if a.enable_expert_parallel else 0,
                )
            )
            self._phase("init", "pynccl.py:103", f"vLLM is using nccl=={NCCL_VERSION}")
            if self.rank_init is not None:
                self.rank_init.init_nccl()
            elif nccl_debug_on(dict(os.environ)):
                host, pid, tid = socket.gethostname(), os.getpid(), threading.get_native_id()
                nccl_env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
                for line in nccl_init_lines(nccl_env, self.rank, self.tp, pid, tid, host):
                    self.log.sink.raw(line, stream=1)
        self._checkpoint("init")
        t = time.monotonic()
        self._phase("load_weights", *vllm_shapes.load_start(self.cfg.sim.server_version, a.model))
        self._checkpoint("load_weights")
        self.log.info("default_loader.py:267", f"Loading weights took {time.monotonic() - t:.2f} seconds")
        drafter = vllm_shapes.drafter_line(self.cfg.sim.server_version)
        if drafter and spec.enabled and self.cfg.method in ("eagle", "eagle3", "mtp", "deepseek_mtp"):
            self.log.info(*drafter)
        self.log.info(
            *vllm_shapes.model_loading(self.cfg.sim.server_version, self.weights_gib, time.monotonic() - t)
        )
        self._phase("kv_cache", "gpu_worker.py:298", f"Available KV cache memory: {self.kv_gib:.2f} GiB")
        self._checkpoint("kv_cache")
        if self.kv_gib <= 0:
            raise ValueError(
                "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine."
            )
        if not a.enforce_eager:
            t = time.monotonic()
            self.send(("phase", "cuda_graph", time.time()))
            self._checkpoint("cuda_graph")
            self.log.info(
                "gpu_model_runner.py:3480",
                f"Graph capturing finished in {max(1, round(time.monotonic() - t))} secs, took {self.graph_gib:.2f} GiB",
            )
        tokens = int(self.kv_gib * (1 << 30) / (KV_BYTES_PER_TOKEN / self.tp))
        return {"rank": self.rank, "pid": os.getpid(), "env": env, "kv_tokens": tokens}


def _pipe_send(conn: Connection):
    def send(msg: Any) -> None:
        try:
            conn.send(msg)
        except (OSError, EOFError):
            os._exit(0)

    return send


def run_worker(cfg_dict: dict[str, Any], rank: int, conn: Connection) -> None:
    """A TP worker process (multiproc_executor WorkerProc)."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cfg = VllmConfig.from_dict(cfg_dict)
    import setproctitle

    name = worker_name(rank, cfg.args.tensor_parallel_size, cfg.args.enable_expert_parallel)
    setproctitle.setproctitle(f"VLLM::{name}")
    log = VllmLog(LogSink(cfg.sim.log_file), name)
    send = _pipe_send(conn)
    runner = ModelRunner(cfg, rank, log, send)
    try:
        info = runner.run()
    except Exception:
        log.error(
            "multiproc_executor.py:596", f"WorkerProc failed to start.\n{traceback.format_exc().rstrip()}"
        )
        send(("failed", rank))
        os._exit(1)
    send(("ready", info))
    if runner.rank_init is not None and runner.last_local:
        start_watchdog_fault(runner.rank_init, cfg.sim.nccl_timeout_after)
    # serving: RPCs from the engine core, in vLLM's frames (sim.server.vllm.frames)
    WorkerProc.worker_main(rank, drafter_method(cfg), MessageQueue([conn]))


def drafter_method(cfg: VllmConfig) -> str | None:
    """The proposer a worker runs after sampling (None without speculation)."""
    return (cfg.method or "ngram") if cfg.spec.enabled else None


def serve_engine_core(conn: Connection, keep: list[Any], method: str | None) -> None:
    """The busy loop over the workers' pipes (TP > 1) or the model in this process (TP 1), in
    vLLM's frames (sim.server.vllm.frames), until the API server goes."""
    worker_conns = [k for k in keep if isinstance(k, Connection)]
    executor: Any = UniProcExecutor(method)
    if worker_conns:
        executor = MultiprocExecutor(MessageQueue(worker_conns), MessageQueue(worker_conns[:1]))
    try:
        EngineCoreProc(conn, executor).run_busy_loop()
    except (SystemExit, EOFError, OSError):
        return


def engine_core_name(cfg: VllmConfig) -> str:
    return vllm_shapes.engine_core_name(cfg.sim.server_version)


def run_engine_core(cfg_dict: dict[str, Any], conn: Connection) -> None:
    """EngineCore: init line, workers (TP > 1) or the model itself, KV cache size, ready."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cfg = VllmConfig.from_dict(cfg_dict)
    import setproctitle

    setproctitle.setproctitle("VLLM::EngineCore")
    log = VllmLog(LogSink(cfg.sim.log_file), engine_core_name(cfg))
    send = _pipe_send(conn)
    a, spec = cfg.args, cfg.spec
    t0 = time.monotonic()
    spec_text = "None"
    if spec.enabled:
        spec_text = (
            f"SpeculativeConfig(method='{cfg.method}', model='{(a.speculative_config or {}).get('model') or a.model}', "
            f"num_spec_tokens={spec.num_steps})"
        )
    send(("phase", "init", log.info(
        "core.py:93",
        f"Initializing a V1 LLM engine (v{cfg.sim.server_version}) with config: model='{a.model}', "
        f"speculative_config={spec_text}, tokenizer='{a.model}', dtype=torch.bfloat16, "
        f"max_seq_len={a.max_model_len or 131072}, tensor_parallel_size={a.tensor_parallel_size}, "
        f"enforce_eager={a.enforce_eager}, seed={a.seed}, served_model_name={cfg.served_name}",
    )))  # fmt: skip
    tp = max(a.tensor_parallel_size, 1)
    try:
        keep: list[Any] = []  # the workers' pipes: closing them would end the workers
        signal.signal(signal.SIGTERM, lambda *_: _stop_workers(keep))
        if tp == 1:
            infos = [ModelRunner(cfg, 0, log, send).run()]
        else:
            infos = run_workers(cfg, send, keep)
        tokens = min(i["kv_tokens"] for i in infos)
        for where, line in vllm_shapes.kv_lines(cfg.sim.server_version, tokens, a.max_model_len or 131072):
            log.info(where, line)
        log.info(*vllm_shapes.init_engine_line(cfg.sim.server_version, time.monotonic() - t0))
    except Exception:
        log.error("core.py:708", f"EngineCore failed to start.\n{traceback.format_exc().rstrip()}")
        send(("failed", "core"))
        os._exit(1)
    send(("ready", {"workers": infos, "kv_tokens": tokens, "pid": os.getpid()}))
    serve_engine_core(conn, keep, drafter_method(cfg))


def _stop_workers(keep: list[Any]) -> None:
    """SIGTERM from the API server: end and reap the workers, then exit."""
    procs = [p for p in keep if hasattr(p, "join")]
    for proc in procs:
        if proc.pid is not None and proc.exitcode is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except OSError:
                pass
    for proc in procs:
        proc.join(2.0)
    os._exit(0)


def run_workers(cfg: VllmConfig, send, keep: list[Any]) -> list[dict[str, Any]]:
    """Spawn one worker per TP rank and relay their phases; a failed worker fails the engine."""
    ctx = mp.get_context("spawn")
    data = cfg.to_dict()
    conns: dict[Connection, int] = {}
    procs = []
    for rank in local_ranks(cfg):
        parent_end, child_end = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=run_worker, args=(data, rank, child_end), daemon=True)
        proc.start()
        child_end.close()
        conns[parent_end] = rank
        procs.append(proc)
    keep += [*conns, *procs]
    send(("workers", {rank: p.pid for rank, p in zip(local_ranks(cfg), procs, strict=True)}))
    ready: dict[int, dict[str, Any]] = {}
    pending = dict(conns)
    while len(ready) < len(conns):
        for ready_obj in wait(list(pending), timeout=1.0):
            conn = cast(Connection, ready_obj)  # only pipes are waited on
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                raise Exception(WORKER_FAILED) from None
            if msg[0] == "ready":
                ready[msg[1]["rank"]] = msg[1]
                pending.pop(conn, None)
            elif msg[0] == "failed":
                raise Exception(WORKER_FAILED)
            else:
                send(msg)  # phase / hang: relayed to the API server
    return [ready[r] for r in sorted(ready)]
