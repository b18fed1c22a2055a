"""The sim's main process: what `python -m sglang.launch_server` does, minus the GPU.

Order of events (as in SGLang's engine.py / http_server.py): log server_args, set SGLang's own env
overrides, spawn schedulers + detokenizer, wait for every rank's "ready" over its pipe, start uvicorn
in this process, warm up with a real GET /get_model_info + POST /generate to itself, then print
"The server is fired up and ready to roll!" and turn /health to 200.  A child that dies (or sends
SIGQUIT after a traceback) takes everything down with SGLang's sigquit line.  The launcher never
calls setproctitle, so its title stays its command line.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, cast

from specdebug.sim.box import nvidia_smi
from specdebug.sim.server.common import costmodel
from specdebug.sim.server.common.logsink import LogSink, Sidecar, set_launcher_sink, uvicorn_log_config
from specdebug.sim.server.common.simonly import engine_scales, model_record
from specdebug.sim.server.sglang import sched_frames, worker_node
from specdebug.sim.server.sglang.options import SimConfig, parse_args
from specdebug.sim.server.sglang.shapes import Shapes, set_envs_and_config
from specdebug.sim.server.sglang.worker import (
    local_gpus,
    node_ranks,
    run_detokenizer_process,
    run_scheduler_process,
)

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
READY_LINE = "The server is fired up and ready to roll!"
WARMUP_PROMPT = "The capital city of France is"
SIDECAR_SUFFIX = ".sim.json"
STOP_GRACE_S = 0.2  # after a child exits, wait this long for a SIGTERM/SIGINT of our own before failing


def sidecar_path(log_file: str | None) -> str | None:
    return f"{log_file}{SIDECAR_SUFFIX}" if log_file else None


class Launcher:
    def __init__(self, cfg: SimConfig):
        self.cfg = cfg
        s = cfg.server
        self.shapes = Shapes(cfg.sim.server_version)
        self.ranks = node_ranks(cfg)
        self.gpus = local_gpus(cfg)
        self.sink = LogSink(cfg.sim.log_file, level=s.log_level)
        self.sink.on_line = self._on_line
        set_launcher_sink(self.sink)
        self.sidecar = Sidecar(
            sidecar_path(cfg.sim.log_file),
            {
                "pid": os.getpid(),
                "argv": list(sys.argv),
                "host": s.host,
                "port": s.port,
                "log_file": cfg.sim.log_file,
                "started_at": time.time(),
                "tp_size": s.tp_size,
                **({"nnodes": s.nnodes, "node_rank": s.node_rank} if s.nnodes > 1 else {}),
                "engine": "sglang",
                "server_version": cfg.sim.server_version,
                "speculative_algorithm": s.speculative_algorithm,
                "workers": {},
                "detokenizer_pid": None,
            },
        )
        self.procs: list[BaseProcess] = []
        self.sched_procs: list[BaseProcess] = []
        self.conns: list[Connection] = []
        self.ready: dict[int, dict[str, Any]] = {}
        self._failing = False
        self._stopping = False
        self._seen_warmup_poll = False
        self.engine: Any = None
        self.throttle = costmodel.Throttle(  # the cost model slows with it, not only nvidia-smi
            cfg.sim.throttle_gpu,
            time.time() + max(0.0, cfg.sim.throttle_after),
            tuple(nvidia_smi.visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), self.gpus)),
        )
        self.gpu_load = nvidia_smi.LoadWriter.from_env(
            self.gpus,
            self._gpu_sample,
            mem_fraction=cfg.server.mem_fraction_static or 0.88,
            throttle_gpu=cfg.sim.throttle_gpu,
            throttle_after_s=cfg.sim.throttle_after,
        )

    def _gpu_sample(self) -> tuple[str | None, bool]:
        """(latest phase, serving requests now) for the simulated nvidia-smi."""
        phases = dict(self.sidecar.data.get("phases", {}))
        phase = max(phases, key=lambda name: phases[name]) if phases else None
        engine = self.engine
        return phase, bool(engine is not None and (engine.running or engine.waiting))

    # --- log hooks -------------------------------------------------------------------------------
    def _on_line(self, text: str, when: float) -> None:
        if "Started server process [" in text:
            self.sidecar.phase("http", when)
        elif not self._seen_warmup_poll and f'"GET {self.shapes.warmup_path} ' in text:
            self._seen_warmup_poll = True
            self.sidecar.phase("warmup", when)

    # --- signals ---------------------------------------------------------------------------------
    def _on_sigquit(self, signum: int | None, frame: object) -> None:
        """SGLang's sigquit handler: a child failed -> kill the whole tree, this process included."""
        if self._failing or self._stopping:
            return
        self._failing = True
        self.sink.error(SIGQUIT_LINE)
        self.sidecar.update(state="failed", failed_at=time.time())
        self._kill_children(signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    def _on_term(self, signum: int, frame: object) -> None:
        if self._failing:
            return
        self._stopping = True
        self.sidecar.update(state="stopped", stopped_at=time.time(), stop_signal=signal.Signals(signum).name)
        self._kill_children(signal.SIGTERM)
        if self.gpu_load is not None:
            self.gpu_load.stop()
        os._exit(130 if signum == signal.SIGINT else 0)

    def _kill_children(self, sig: int) -> None:
        for p in self.procs:
            if p.pid is not None and p.exitcode is None:
                try:
                    os.kill(p.pid, sig)
                except OSError:
                    pass
        if sig != signal.SIGKILL:
            deadline = time.monotonic() + 1.0
            for p in self.procs:
                p.join(max(0.0, deadline - time.monotonic()))
            self._kill_children(signal.SIGKILL)

    # --- startup ---------------------------------------------------------------------------------
    def _set_envs_and_config(self) -> None:
        """SGLang's own env handling in the launcher, as the --server-version does it (sglang_shapes)."""
        s = self.cfg.server
        set_envs_and_config(
            os.environ, self.shapes, enable_symm_mem=s.enable_symm_mem, enable_nccl_nvls=s.enable_nccl_nvls
        )
        for prefix in self.cfg.sim.drop_env:
            for name in [k for k in os.environ if k.startswith(prefix)]:
                del os.environ[name]  # spawn children get the parent's os.environ as it is now

    def _spawn(self) -> None:
        ctx = mp.get_context("spawn")
        data = self.cfg.to_dict()
        s = self.cfg.server
        for rank in self.ranks:
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=run_scheduler_process, args=(data, rank.index, child_end), daemon=True)
            proc.start()
            child_end.close()
            self.procs.append(proc)
            self.sched_procs.append(proc)
            self.conns.append(parent_end)
        if s.node_rank >= 1:  # nodes >= 1 run schedulers only: no tokenizer, no detokenizer
            self.sidecar.update(
                workers={str(r.tp): p.pid for r, p in zip(self.ranks, self.sched_procs, strict=True)}
            )
            return
        parent_end, child_end = ctx.Pipe(duplex=True)
        detok = ctx.Process(target=run_detokenizer_process, args=(data, child_end), daemon=True)
        if s.dp_size > 1 and not s.enable_dp_attention:  # DP groups get a controller process
            ctl = ctx.Process(
                target=run_detokenizer_process,
                args=(data, None, "sglang::data_parallel_controller"),
                daemon=True,
            )
            ctl.start()
            self.procs.append(ctl)
        detok.start()
        child_end.close()
        self.procs.append(detok)
        self.detok_conn = parent_end
        self.sidecar.update(
            workers={str(r): p.pid for r, p in enumerate(self.sched_procs)}, detokenizer_pid=detok.pid
        )

    def _wait_ready(self) -> None:
        """Read every scheduler's pipe until all ranks are ready; a dead child fails the launch."""
        pending = {conn: rank for rank, conn in enumerate(self.conns)}
        sentinels = {p.sentinel: p for p in self.procs}
        while len(self.ready) < len(self.conns):
            for obj in wait([*pending, *sentinels], timeout=1.0):
                if obj in sentinels:
                    self._child_died()
                    return
                conn = cast(Connection, obj)  # not a sentinel: a pipe
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    pending.pop(conn, None)
                    continue
                kind = msg[0]
                if kind == "phase":
                    self.sidecar.phase(msg[1], msg[2])
                elif kind == "hang":
                    self.sidecar.update(state="hung", hung_at={"phase": msg[1], "t": msg[2]})
                elif kind == "ready":
                    info = msg[1]
                    self.ready[info["rank"]] = info
                    pending.pop(conn, None)

    def _child_died(self) -> None:
        """A child exited: a failure, unless we are being stopped (a group SIGTERM reaches us too)."""
        time.sleep(STOP_GRACE_S)
        if not self._stopping and not self._failing:
            os.kill(os.getpid(), signal.SIGQUIT)

    def _watch_children(self) -> None:
        """While serving: any child exit is a failure (SIGQUIT to ourselves runs the handler)."""
        wait([p.sentinel for p in self.procs])
        self._child_died()

    # --- serving ---------------------------------------------------------------------------------
    def _model_facts(self) -> tuple[int, bool]:
        envs = [info["env"] for info in self.ready.values()]
        missing = costmodel.missing_nccl_vars(envs) if self.cfg.spec.enabled else 0
        tp0_env = self.ready.get(0, {}).get("env", {})
        profile = self.cfg.sim.profile_verify or tp0_env.get("EAGLE3_PROFILE", "") not in ("", "0")
        return missing, profile

    async def _serve(self) -> None:
        import uvicorn

        from specdebug.sim.server.common.engine import Engine
        from specdebug.sim.server.sglang.http import ServerState, build_app

        s, spec = self.cfg.server, self.cfg.spec
        tp0 = self.ready.get(0, {})
        missing, profile = self._model_facts()
        max_running = s.max_running_requests or (48 if spec.enabled else 4096)
        prefix = self.ranks[0].prefix
        engine = Engine(
            spec,
            log=lambda msg: self.sink.log(msg, prefix=prefix),
            seed=self.cfg.sim.seed,
            max_total_tokens=tp0.get("max_total_num_tokens", 100000),
            max_running=max_running,
            decode_log_interval=s.decode_log_interval,
            cuda_graph=not s.disable_cuda_graph,
            cuda_graph_max_bs=s.cuda_graph_max_bs or 160,
            nccl_missing=missing,
            profile=profile,
            shapes=self.shapes,
            **engine_scales(self.cfg.sim),
        )
        engine.slowdown = lambda: self.throttle.slowdown(time.time())
        self.engine = engine
        self.sidecar.update(
            worker_env={str(r): info["env"] for r, info in sorted(self.ready.items())},
            nccl_tuning_missing=missing,
            profile_verify=profile,
            model=model_record(engine, spec, missing=missing, cuda_graph=not s.disable_cuda_graph),
        )
        if self.cfg.sim.fail_at == "warmup":
            engine.before_first_forward = lambda: self._crash_scheduler(engine)
        elif self.cfg.sim.hang_at == "warmup":
            engine.before_first_forward = lambda: self._hang_engine(engine)
        state = ServerState(
            self.cfg,
            engine,
            max_total_num_tokens=tp0.get("max_total_num_tokens", 0),
            max_req_input_len=tp0.get("max_req_input_len", 0),
            memory=tp0.get("memory", {}),
        )
        config = uvicorn.Config(
            build_app(state),
            host=s.host,
            port=s.port,
            log_config=uvicorn_log_config(s.log_level_http or s.log_level),
            timeout_graceful_shutdown=1,
            timeout_keep_alive=5,
        )
        server = uvicorn.Server(config)
        engine.start()
        warmup = asyncio.get_running_loop().create_task(self._warmup(state, server))
        frames = asyncio.get_running_loop().create_task(sched_frames.feed(self.conns, engine))
        try:
            await server.serve()
        finally:
            warmup.cancel()
            frames.cancel()
            await engine.stop()

    def start_die_timer(self) -> None:
        """--die-after-ready S: the node's whole server goes at once (SIGKILL), as when the node is lost."""
        after = self.cfg.sim.die_after_ready
        if after is None:
            return

        def die() -> None:
            time.sleep(after)
            self._failing = True
            self._kill_children(signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=die, name="die-after-ready", daemon=True).start()

    def _crash_scheduler(self, engine: Any) -> None:
        """--fail-at warmup: the fail rank's scheduler crashes in its first forward; nothing completes."""
        engine.hung = True
        try:
            self.conns[-1].send("fail_forward")
        except OSError:
            pass

    def _hang_engine(self, engine: Any) -> None:
        engine.hung = True
        self.sidecar.update(state="hung", hung_at={"phase": "warmup", "t": time.time()})

    async def _warmup(self, state: Any, server: Any) -> None:
        from specdebug.sim.server.common.localhttp import status_of  # here: only a launcher warms up

        while not server.started:
            await asyncio.sleep(0.01)
        s = self.cfg.server
        if s.skip_server_warmup:
            state.ready = True
            now = time.time()
            self.sidecar.phase("ready", now)
            self.sidecar.update(state="ready", ready_at=now, ready_line=False)
            self.start_die_timer()
            return
        address = s.address()
        try:
            for _ in range(120):
                await asyncio.sleep(1.0 * self.cfg.sim.time_scale)
                try:
                    if await status_of(address, "GET", self.shapes.warmup_path, timeout=5) == 200:
                        break
                except (OSError, TimeoutError, ValueError):
                    continue
            body = {"text": WARMUP_PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            status = await status_of(address, "POST", "/generate", body)
            if status >= 400:
                raise RuntimeError(f"the warmup request POST /generate answered HTTP {status}")
        except asyncio.CancelledError:
            raise
        except Exception:
            self.sink.error(f"Initialization failed. warmup error: {traceback.format_exc().rstrip()}")
            self.sidecar.update(state="failed", failed_at=time.time())
            self._failing = True
            self._kill_children(signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
            return
        when = self.sink.info(READY_LINE) or time.time()
        state.ready = True
        self.sidecar.phase("ready", when)
        self.sidecar.update(state="ready", ready_at=when, ready_line=True)
        self.start_die_timer()

    # --- main ------------------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGQUIT, self._on_sigquit)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        self.sink.info(self.shapes.args_line(self.cfg.server))
        if self.gpu_load is not None:
            self.gpu_load.start()
        for line in self.cfg.warnings:
            self.sink.warning(line)
        self._set_envs_and_config()
        try:
            self._spawn()
            self._wait_ready()
            if self.cfg.server.node_rank >= 1:  # SGLang's node >= 1: a dummy /health, nothing watches
                asyncio.run(worker_node.serve_dummy_health(self))
            else:
                threading.Thread(target=self._watch_children, name="child-watch", daemon=True).start()
                asyncio.run(self._serve())
        except SystemExit as exc:  # uvicorn exits 1 when it cannot bind
            self._stopping = True
            self._kill_children(signal.SIGTERM)
            self.sidecar.update(state="exited", exit_code=exc.code)
            return int(exc.code or 0)
        finally:
            if not self._failing:
                self._stopping = True
                self._kill_children(signal.SIGTERM)
            if self.gpu_load is not None:
                self.gpu_load.stop()
        self.sidecar.update(state="stopped", stopped_at=time.time())
        return 0


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """`--engine vllm` runs the vLLM imitation (sim.server.vllm.server); otherwise SGLang's launch_server."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if engine_of(argv) == "vllm":
        from specdebug.sim.server.vllm.server import main as vllm_main

        return vllm_main(argv)
    try:
        cfg = parse_args(argv, prog)
    except (AssertionError, ValueError):  # ServerArgs.__post_init__ failures: a traceback and exit 1
        traceback.print_exc()
        return 1
    return Launcher(cfg).run()


def engine_of(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg == "--engine" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--engine="):
            return arg.split("=", 1)[1]
    return "sglang"
