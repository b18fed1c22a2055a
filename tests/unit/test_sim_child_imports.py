"""A simulated server's spawned processes (schedulers, detokenizer, vLLM workers) import only what
they use: every sim launch starts tp + 1 of them, so each module they import is paid hundreds of
times a suite run (asyncio with ssl was about 30 ms of a scheduler's ~145 ms start)."""

from __future__ import annotations

import subprocess
import sys

# what the spawned processes run: the main module multiprocessing re-imports, then their targets
CHILD = (
    "import sys, multiprocessing.spawn, multiprocessing.connection\n"
    "import specdebug.sim.__main__\n"
    "import specdebug.sim.server.sglang.worker, specdebug.sim.server.vllm.procs\n"
    "print(' '.join(sorted(m for m in ('asyncio', 'starlette', 'uvicorn', 'httpx') if m in sys.modules)))\n"
)


def test_a_spawned_sim_process_does_not_import_the_launchers_event_loop_or_http_stack() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "", f"a spawned sim process imports {out.stdout.strip()}"
