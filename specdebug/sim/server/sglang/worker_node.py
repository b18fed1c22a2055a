"""What SGLang's nodes >= 1 serve once their schedulers are ready: the dummy health server, no model.

As `launch_dummy_health_check_server` in sglang/srt/utils (engine.py `_launch_subprocesses`, node_rank
>= 1): no tokenizer or detokenizer, no ready line; `Starting dummy health check server at HOST:PORT`,
then uvicorn at log level warning (so no uvicorn lines) answering 200 on /health, /health_generate
and /ping whatever the schedulers do.  A worker node's /health says only that its own schedulers
finished init, never that the group is alive.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def build_dummy_health_app() -> Starlette:
    async def ok(request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(
        routes=[Route(path, ok, methods=["GET"]) for path in ("/health", "/health_generate", "/ping")]
    )


async def serve_dummy_health(launcher: Any) -> None:
    """Run the dummy server in the launcher's process until it is stopped."""
    import uvicorn

    s = launcher.cfg.server
    launcher.sink.info(f"Starting dummy health check server at {s.host}:{s.port}")
    config = uvicorn.Config(
        build_dummy_health_app(),
        host=s.host,
        port=s.port,
        timeout_keep_alive=5,
        log_config=None,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    up = asyncio.get_running_loop().create_task(_mark_up(launcher, server))
    try:
        await server.serve()
    finally:
        up.cancel()


async def _mark_up(launcher: Any, server: Any) -> None:
    while not server.started:
        await asyncio.sleep(0.01)
    launcher.sidecar.update(state="ready", ready_at=time.time(), ready_line=False, dummy_health=True)
    launcher.start_die_timer()
