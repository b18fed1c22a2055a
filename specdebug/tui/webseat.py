"""A read-only browser seat: the TUI through textual-serve, on 127.0.0.1 only, behind a random token.

textual-serve has no authentication: anyone who reaches its port gets an app.  So the port is
bound to loopback only, and every path lives under `/<token>/` (the token is 32 random bytes,
printed once); a request without it gets 403 before textual-serve sees it, the websocket
included.  The app it serves is the pairing session's own screen, mirrored (specdebug/tui/mirror.py):
no input reaches the session and no path is read, so a browser sees what the seats see and can
open nothing on the box.  At most MAX_BROWSERS browsers at a time (503 beyond).
"""

from __future__ import annotations

import asyncio
import hmac
import os
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

HOST = "127.0.0.1"
MAX_BROWSERS = int(os.environ.get("SPECDEBUG_WEB_SEATS_MAX") or 4)  # browsers served at once


class _SeatServer(Server):
    """textual-serve's server with our websocket handler (counts sessions, lets tests tap output)."""

    def __init__(
        self,
        command: str,
        *,
        on_output: Callable[[bytes], None] | None = None,
        max_browsers: int = MAX_BROWSERS,
    ) -> None:
        super().__init__(command, host=HOST, port=0, title="specdebug (read-only seat)")
        self.on_output = on_output
        self.sessions = 0
        self.active = 0  # browsers connected now
        self.max_browsers = max_browsers

    async def make_app(self) -> web.Application:
        """textual-serve's app (routes, static files, our websocket), to mount behind the token."""
        return await self._make_app()

    async def on_startup(self, app: web.Application) -> None:  # no banner with an untokened URL
        return None

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if (
            self.active >= self.max_browsers
        ):  # each tab is a process: a URL passed around must not fork without end
            raise web.HTTPServiceUnavailable(
                text=f"specdebug web seat: at most {self.max_browsers} browsers at a time; close one\n"
            )
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        self.sessions += 1
        self.active += 1
        number, sent = self.sessions, 0
        print(f"specdebug: web seat: browser {number} connected", file=sys.stderr, flush=True)

        async def write_bytes(data: bytes) -> None:
            nonlocal sent
            sent += len(data)
            if self.on_output is not None:
                self.on_output(data)
            if not websocket.closed:
                await websocket.send_bytes(data)

        async def close() -> None:
            await websocket.close()

        service = AppService(
            self.command,
            write_bytes=write_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=self.download_manager,
        )
        try:
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except (asyncio.CancelledError, ConnectionError):
            pass
        finally:
            self.active -= 1
            await service.stop()
            await websocket.close()
            print(
                f"specdebug: web seat: browser {number} left ({sent} bytes sent)", file=sys.stderr, flush=True
            )
        return websocket


def token_gate(token: str) -> Middleware:
    """Middleware: the first path segment must be the token (compared in constant time)."""

    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        first = request.path.split("/")[1] if request.path.startswith("/") else ""
        if not hmac.compare_digest(first.encode(), token.encode()):
            raise web.HTTPForbidden(
                text="specdebug web seat: a token is required (use the URL printed at start)\n"
            )
        return await handler(request)

    return gate


async def build(
    command: str, token: str, *, on_output: Callable[[bytes], None] | None = None
) -> tuple[web.Application, _SeatServer]:
    server = _SeatServer(command, on_output=on_output)
    inner = await server.make_app()
    root = web.Application(middlewares=[token_gate(token)])
    root.add_subapp(f"/{token}/", inner)
    return root, server


def bind_loopback(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    return sock


async def start_web_seat(
    app_argv: list[str],
    *,
    port: int = 0,
    token: str | None = None,
    on_output: Callable[[bytes], None] | None = None,
) -> tuple[web.AppRunner, str, _SeatServer]:
    """Listen on 127.0.0.1:port (0: a free one); returns the runner, the URL (with its token), the server."""
    token = token or secrets.token_urlsafe(32)
    sock = bind_loopback(port)
    root, server = await build(shlex.join(app_argv), token, on_output=on_output)
    port = sock.getsockname()[1]
    server.public_url = f"http://{HOST}:{port}"  # links in the page; url_for adds /<token>/
    runner = web.AppRunner(root, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner, f"http://{HOST}:{port}/{token}/", server


async def run_web_seat(app_argv: list[str], *, port: int = 0) -> int:
    try:
        runner, url, _server = await start_web_seat(app_argv, port=port)
    except OSError as exc:
        print(f"specdebug: web seat: cannot listen on {HOST}:{port}: {exc}", file=sys.stderr)
        return 2
    print(f"read-only browser seat (this machine only): {url}", flush=True)
    print("anyone with this URL can watch; Ctrl+C ends the seat", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


def serve_web_seat(app_argv: list[str], *, port: int = 0) -> int:
    return asyncio.run(run_web_seat(app_argv, port=port))
