"""A vLLM node started with `--headless` (multi-node mp mode, node rank >= 1): workers only.

As vllm/entrypoints/cli/serve.py `run_headless` with `node_rank_within_dp > 0`: it logs `Launching vLLM
(vX) headless multiproc executor, with head node address ADDR:PORT for torch.distributed process
group.`, starts a MultiprocExecutor with this node's TP workers (`VLLM::Worker_TP{r}`, global ranks)
and monitors them inline: no EngineCore, no API server, no HTTP port; its own lines carry no
`(APIServer pid=N)` prefix and it logs neither the version nor the non-default args (those are
run_server's / setup_server's).  A worker that dies makes it
log `Worker proc VllmWorker-{r} died unexpectedly, shutting down executor.` and exit.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

from specdebug.sim.server.vllm.args import VllmConfig
from specdebug.sim.server.vllm.procs import VllmLog, run_workers


def run_headless(server: Any) -> int:
    """The headless node's life in the `vllm serve --headless` process (server: the VllmServer)."""
    cfg, sidecar = server.cfg, server.sidecar
    log = VllmLog(server.sink, "")  # run_headless never calls decorate_logs: no `(APIServer pid=N)`
    a = cfg.args
    when = log.info(
        "serve.py:216",
        f"Launching vLLM (v{cfg.sim.server_version}) headless multiproc executor, with head node address "
        f"{a.master_addr}:{a.master_port} for torch.distributed process group.",
    )
    sidecar.update(headless=True)
    sidecar.phase("init", when)
    keep: list[Any] = []

    def relay(msg: Any) -> None:
        if msg[0] == "phase":
            sidecar.phase(msg[1], msg[2])
        elif msg[0] == "workers":
            sidecar.update(workers={str(r): pid for r, pid in msg[1].items()})
        elif msg[0] == "hang":
            sidecar.update(state="hung", hung_at={"phase": msg[1], "t": msg[2]})

    try:
        infos = run_workers(cfg, relay, keep)
    except Exception:
        log.error(
            "multiproc_executor.py:120", f"Executor failed to start.\n{traceback.format_exc().rstrip()}"
        )
        sidecar.update(state="failed", failed_at=time.time())
        _kill(keep)
        return 1
    sidecar.update(
        state="ready",
        ready_at=time.time(),
        ready_line=False,
        worker_env={str(i["rank"]): i["env"] for i in infos},
    )
    die_later(cfg, lambda: _kill(keep, then_self=True))
    procs = {
        p.sentinel: (rank, p) for rank, p in zip(sorted(i["rank"] for i in infos), _procs(keep), strict=True)
    }
    gone = wait(list(procs))
    rank, _ = procs[gone[0]]
    log.error(
        "multiproc_executor.py:572",
        f"Worker proc VllmWorker-{rank} died unexpectedly, shutting down executor.",
    )
    sidecar.update(state="failed", failed_at=time.time())
    _kill(keep)
    return 1


def _procs(keep: list[Any]) -> list[Any]:
    return [p for p in keep if hasattr(p, "join")]


def _kill(keep: list[Any], then_self: bool = False) -> None:
    for proc in _procs(keep):
        if proc.pid is not None and proc.exitcode is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except OSError:
                pass
    if then_self:
        os.kill(os.getpid(), signal.SIGKILL)


def die_later(cfg: VllmConfig, kill: Callable[[], object]) -> None:
    """--die-after-ready S: call `kill` (the whole node's server, SIGKILL) S seconds after ready."""
    after = cfg.sim.die_after_ready
    if after is None:
        return

    def die() -> None:
        time.sleep(after)
        kill()

    threading.Thread(target=die, name="die-after-ready", daemon=True).start()
