"""The sim's vLLM API server: what `vllm serve MODEL ...` does, minus the GPU.

Order (vllm/entrypoints/openai/api_server.py, v1/engine/core_client.py): log the version and the
non-default args, apply vLLM's env override, spawn EngineCore (which spawns the TP workers), wait for
it, then start uvicorn in this process.  There is no ready line and no warmup request: the server is
ready at uvicorn's "Application startup complete." and /health answers 200 from then on (before that
the port does not answer).  Every line this process writes carries `(APIServer pid=N) `.  The stats
logger prints the `Engine 000:` and `SpecDecoding metrics:` lines every VLLM_LOG_STATS_INTERVAL
seconds (env, default 10) unless --disable-log-stats, and only when the engine is not idle.
A dead EngineCore takes the server down (exit 1).

Sidecar `<log-file>.sim.json` as the SGLang side's, with "engine": "vllm", "engine_core_pid" and the
phases init, load_weights, kv_cache, cuda_graph, http, ready.
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
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from specdebug.sim.server.common import costmodel, faults
from specdebug.sim.server.common.logsink import LogSink, Sidecar, set_launcher_sink, uvicorn_log_config
from specdebug.sim.server.common.openai_api import Vocab, openai_response
from specdebug.sim.server.common.simonly import engine_scales, model_record
from specdebug.sim.server.sglang import sched_frames
from specdebug.sim.server.sglang.shapes import version_tuple
from specdebug.sim.server.vllm import headless
from specdebug.sim.server.vllm import shapes as vllm_shapes
from specdebug.sim.server.vllm.args import DEFAULT_VERSION, VllmConfig, non_default_args, parse_vllm_args
from specdebug.sim.server.vllm.engine import VllmEngine, render_vllm_metrics
from specdebug.sim.server.vllm.procs import VllmLog, run_engine_core

READY_LINE = "Application startup complete."
ROUTES = (
    "/health",
    "/ping",
    "/version",
    "/load",
    "/metrics",
    "/v1/models",
    "/v1/completions",
    "/v1/chat/completions",
)
CORE_DIED = "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."
CORE_FAILED = "Engine core initialization failed. See root cause above. Failed core proc(s): {}"


def uvicorn_vllm_config(level: str, pid: int) -> dict[str, Any]:
    """uvicorn's formats behind vLLM's decorate_logs prefix `(APIServer pid=N) `."""
    cfg = uvicorn_log_config(level)
    cfg["formatters"]["default"]["fmt"] = f"(APIServer pid={pid}) %(levelprefix)s %(message)s"
    cfg["formatters"]["access"]["fmt"] = (
        f'(APIServer pid={pid}) %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
    )
    return cfg


class VllmServer:
    def __init__(self, cfg: VllmConfig) -> None:
        self.cfg = cfg
        a = cfg.args
        self.sink = LogSink(cfg.sim.log_file)
        self.sink.on_line = self._on_line
        set_launcher_sink(self.sink)
        self.log = VllmLog(self.sink, "APIServer")
        self.sidecar = Sidecar(
            f"{cfg.sim.log_file}.sim.json" if cfg.sim.log_file else None,
            {"pid": os.getpid(), "argv": list(sys.argv), "host": a.host, "port": a.port, "log_file": cfg.sim.log_file,
             "started_at": time.time(), "tp_size": a.tensor_parallel_size, "engine": "vllm",
             "server_version": cfg.sim.server_version, "speculative_method": cfg.method, "workers": {},
             "engine_core_pid": None,
             **({"nnodes": a.nnodes, "node_rank": a.node_rank} if a.nnodes > 1 else {})},
        )  # fmt: skip
        self.core: Any = None
        self.conn: Any = None
        self.info: dict[str, Any] = {}
        self.state_ready = False
        self._stopping = False
        self._failing = False

    def _on_line(self, text: str, when: float) -> None:
        if "Started server process [" in text:
            self.sidecar.phase("http", when)
        elif READY_LINE in text and not self.state_ready:
            self.state_ready = True
            self.sidecar.phase("ready", when)
            self.sidecar.update(state="ready", ready_at=when, ready_line=True)
            headless.die_later(self.cfg, self.kill_all)

    # --- startup ---------------------------------------------------------------------------------
    def _env_override(self) -> None:
        """vllm/env_override.py at import (0.9.1 <= version < 0.11): keep an exported NCCL_CUMEM_ENABLE."""
        v = version_tuple(self.cfg.sim.server_version)
        if (0, 9, 1) <= v < (0, 11):
            if "NCCL_CUMEM_ENABLE" in os.environ:
                self.log.warning(
                    "env_override.py:17",
                    f"NCCL_CUMEM_ENABLE is set to {os.environ['NCCL_CUMEM_ENABLE']}, skipping override. This may "
                    "increase memory overhead with cudagraph+allreduce: https://github.com/NVIDIA/nccl/issues/1234",
                )
            else:
                os.environ["NCCL_CUMEM_ENABLE"] = "0"
        for prefix in self.cfg.sim.drop_env:
            for name in [k for k in os.environ if k.startswith(prefix)]:
                del os.environ[name]

    def _start_core(self) -> bool:
        ctx = mp.get_context("spawn")
        parent_end, child_end = ctx.Pipe(duplex=True)
        self.core = ctx.Process(target=run_engine_core, args=(self.cfg.to_dict(), child_end), daemon=False)
        self.core.start()
        child_end.close()
        self.conn = parent_end
        self.sidecar.update(engine_core_pid=self.core.pid)
        if self.cfg.args.tensor_parallel_size <= 1:
            self.sidecar.update(workers={"0": self.core.pid})
        while True:
            ready = wait([self.conn, self.core.sentinel], timeout=1.0)
            if self.core.sentinel in ready and self.conn not in ready:
                return False
            if self.conn not in ready:
                continue
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return False
            if msg[0] == "phase":
                self.sidecar.phase(msg[1], msg[2])
            elif msg[0] == "workers":
                self.sidecar.update(workers={str(r): pid for r, pid in msg[1].items()})
            elif msg[0] == "hang":
                self.sidecar.update(state="hung", hung_at={"phase": msg[1], "t": msg[2]})
            elif msg[0] == "failed":
                return False
            elif msg[0] == "ready":
                self.info = msg[1]
                return True

    def _fail_start(self) -> int:
        self._failing = True
        try:
            raise RuntimeError(CORE_FAILED)
        except RuntimeError:
            self.log.error(
                "api_server.py:2000", f"Engine core failed to start.\n{traceback.format_exc().rstrip()}"
            )
        self.sidecar.update(state="failed", failed_at=time.time())
        self._kill_core()
        return 1

    def _kill_core(self) -> None:
        """SIGTERM (EngineCore reaps its workers), then SIGKILL if it lingers."""
        if self.core is None or self.core.exitcode is not None:
            return
        for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 1.0)):
            try:
                os.kill(self.core.pid, sig)
            except OSError:
                return
            self.core.join(grace)
            if self.core.exitcode is not None:
                return

    def _watch_core(self) -> None:
        wait([self.core.sentinel])
        time.sleep(0.2)
        if self._stopping or self._failing:
            return
        self._failing = True
        core = vllm_shapes.engine_core_name(self.cfg.sim.server_version)
        self.log.error("core_client.py:564", CORE_DIED.replace("EngineCore_DP0", core))
        self.sidecar.update(state="failed", failed_at=time.time())
        os.kill(os.getpid(), signal.SIGKILL)

    def kill_all(self) -> None:
        """--die-after-ready: the whole node's server at once (SIGKILL), as when the node is lost."""
        self._failing = True
        if self.core is not None and self.core.pid is not None:
            try:
                os.kill(self.core.pid, signal.SIGKILL)  # its workers die with it (PR_SET_PDEATHSIG)
            except OSError:
                pass
        os.kill(os.getpid(), signal.SIGKILL)

    def _on_term(self, signum: int, frame: object) -> None:
        self._stopping = True
        self.sidecar.update(state="stopped", stopped_at=time.time(), stop_signal=signal.Signals(signum).name)
        self._kill_core()
        os._exit(0)

    # --- serving ---------------------------------------------------------------------------------
    def _engine(self) -> VllmEngine:
        a, spec = self.cfg.args, self.cfg.spec
        envs = [w["env"] for w in self.info.get("workers", [])]
        missing = costmodel.missing_nccl_vars(envs) if spec.enabled else 0
        engine = VllmEngine(
            spec,
            log=lambda msg: self.log.info("loggers.py:207", msg),
            seed=a.seed,
            max_total_tokens=self.info.get("kv_tokens", 100000),
            max_running=a.max_num_seqs or 256,
            cuda_graph=not a.enforce_eager,
            cuda_graph_max_bs=512,
            nccl_missing=missing,
            server_version=self.cfg.sim.server_version,
            **engine_scales(self.cfg.sim),
        )
        self.sidecar.update(
            worker_env={str(w["rank"]): w["env"] for w in self.info.get("workers", [])},
            nccl_tuning_missing=missing,
            model=model_record(engine, spec, missing=missing, cuda_graph=not a.enforce_eager),
        )
        return engine

    async def _stats_loop(self, engine: VllmEngine) -> None:
        default = 10.0 if version_tuple(self.cfg.sim.server_version) >= (0, 11) else 5.0
        try:
            interval = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", default))
        except ValueError:
            interval = default
        while True:
            await asyncio.sleep(max(interval, 0.05))
            for line in engine.stats_lines():
                self.log.info("loggers.py:207" if line.startswith("Engine") else "metrics.py:96", line)

    async def _serve(self) -> None:
        import uvicorn

        a = self.cfg.args
        engine = self._engine()
        tokens = self.info.get("kv_tokens", 0)
        v = version_tuple(self.cfg.sim.server_version)
        if v < (0, 11):
            self.log.info(
                "loggers.py:147",
                f"Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {tokens // 16}",
            )
        self.log.info(*vllm_shapes.tasks_line(self.cfg.sim.server_version))
        where = "vLLM server" if v >= (0, 13) else "vLLM API server 0"
        self.log.info("api_server.py:1912", f"Starting {where} on {a.url()}")
        self.log.info("launcher.py:34", "Available routes are:")
        for route in ROUTES:
            method = "POST" if route.startswith("/v1/c") else "GET"
            self.log.info("launcher.py:42", f"Route: {route}, Methods: {method}")
        config = uvicorn.Config(
            build_vllm_app(self.cfg, engine),
            host=a.host or "0.0.0.0",
            port=a.port,
            log_config=uvicorn_vllm_config("info", os.getpid()),
            timeout_graceful_shutdown=1,
            timeout_keep_alive=5,
        )
        engine.start()
        loop = asyncio.get_running_loop()
        # the engine core's (and its workers') frames follow what the engine models: sched_frames.feed
        tasks = [loop.create_task(sched_frames.feed([self.conn], engine))]
        if not a.disable_log_stats:
            tasks.append(loop.create_task(self._stats_loop(engine)))
        try:
            await uvicorn.Server(config).serve()
        finally:
            for t in tasks:
                t.cancel()
            await engine.stop()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        if self.cfg.args.headless:  # serve.py run_headless: no API server, so no version / args lines
            self._env_override()
            return headless.run_headless(self)
        version, model = self.cfg.sim.server_version, self.cfg.args.model
        if version_tuple(version) >= (0, 13):
            self.log.info("utils.py:233", f"vLLM server version {version}, serving model {model}")
        else:
            self.log.info("api_server.py:1880", f"vLLM API server version {version}")
        self.log.info("utils.py:253", f"non-default args: {non_default_args(self.cfg.args)}")
        try:
            check_model_config(self.cfg)
        except (ValidationError, ValueError):  # create_engine_config: uncaught, the process ends
            print_uncaught(self.sink.raw, version)
            self.sidecar.update(state="failed", failed_at=time.time())
            return 1
        self._env_override()
        if not self._start_core():
            return self._fail_start()
        threading.Thread(target=self._watch_core, name="core-watch", daemon=True).start()
        try:
            asyncio.run(self._serve())
        except SystemExit as exc:  # uvicorn exits 1 when it cannot bind
            self._stopping = True
            self._kill_core()
            self.sidecar.update(state="exited", exit_code=exc.code)
            return int(exc.code or 0)
        self._stopping = True
        self._kill_core()
        self.sidecar.update(state="stopped", stopped_at=time.time())
        return 0


def build_vllm_app(cfg: VllmConfig, engine: VllmEngine) -> Starlette:
    """vLLM's endpoints: /health (200 empty), /ping, /version, /load, /metrics (always), /v1/models
    (owned_by "vllm"), OpenAI completions and chat completions with streaming and usage, /tokenize and /detokenize."""
    created = time.time()
    name = cfg.served_name
    request_faults = faults.RequestFaults(cfg.sim.fail_requests)  # --fail-requests, as on the SGLang side

    async def health(request: HttpRequest) -> Response:
        return Response(status_code=200)

    async def version(request: HttpRequest) -> Response:
        return JSONResponse({"version": cfg.sim.server_version})

    async def load(request: HttpRequest) -> Response:
        return JSONResponse({"server_load": len(engine.running) + len(engine.waiting)})

    async def metrics(request: HttpRequest) -> Response:
        return PlainTextResponse(
            render_vllm_metrics(engine, name, created), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    async def models(request: HttpRequest) -> Response:
        card = {"id": name, "object": "model", "created": int(created), "owned_by": "vllm", "root": cfg.args.model,
                "parent": None, "max_model_len": cfg.args.max_model_len or 131072}  # fmt: skip
        return JSONResponse({"object": "list", "data": [card]})

    async def completions(request: HttpRequest) -> Response:
        return await openai_response(
            engine, name, request, chat=False, flavor="vllm", request_faults=request_faults
        )

    async def chat(request: HttpRequest) -> Response:
        return await openai_response(
            engine, name, request, chat=True, flavor="vllm", request_faults=request_faults
        )

    vocab = Vocab()  # /tokenize and /detokenize (vllm bench serve asks for them)

    async def tokenize(request: HttpRequest) -> Response:
        return await vocab.tokenize(request, cfg.args.max_model_len or 131072)

    async def detokenize(request: HttpRequest) -> Response:
        return await vocab.detokenize(request)

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/ping", health, methods=["GET", "POST"]),
            Route("/version", version, methods=["GET"]),
            Route("/load", load, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/detokenize", detokenize, methods=["POST"]),
        ]
    )


def check_model_config(cfg: VllmConfig) -> None:
    """vLLM's ModelConfig validation (--max-model-len against the model's limit; pydantic)."""
    from specdebug.sim.server.vllm.specconfig import ModelConfig

    ModelConfig(model=cfg.args.model, max_model_len=cfg.args.max_model_len)


def print_uncaught(write: Callable[[str], object], version: str) -> None:
    """The exception being handled as the interpreter prints an uncaught one: to stderr, behind
    decorate_logs' `(APIServer pid=N) ` only where that wrapped stderr (before 0.32; shapes)."""
    head = f"(APIServer pid={os.getpid()}) " if vllm_shapes.traceback_prefixed(version) else ""
    for line in traceback.format_exc().rstrip().split("\n"):
        write(head + line)


def _version_in(argv: list[str]) -> str:
    """--server-version from argv (the parse that would give it failed)."""
    for i, arg in enumerate(argv):
        if arg == "--server-version" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--server-version="):
            return arg.split("=", 1)[1]
    return DEFAULT_VERSION


def main(argv: list[str]) -> int:
    """Parse like `vllm serve` (argparse errors exit 2; a bad --speculative-config is a traceback, exit 1).
    A failed start ends --exit-delay seconds after its traceback (a real one tears down its interpreter)."""
    try:
        cfg = parse_vllm_args(argv)
    except (ValidationError, ValueError):
        print_uncaught(lambda line: print(line, file=sys.stderr), _version_in(argv))
        return 1
    code = VllmServer(cfg).run()
    if code and cfg.sim.exit_delay > 0:
        sys.stderr.flush()
        time.sleep(cfg.sim.exit_delay)
    return code
