"""The launcher's own HTTP requests to its server (the warmup), on asyncio streams.

Why not httpx: a launch made one warmup GET and POST, and importing httpx and building its client
(an SSL context with the CA bundle) cost about twice a sim's whole Python start, paid at every launch.
The server sees what SGLang's warmup sends: an HTTP/1.1 request from 127.0.0.1, in its access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

MAX_HEAD = 64 * 1024  # a status line longer than this is not an HTTP server's


async def status_of(
    address: tuple[str, int], method: str, path: str, body: Any = None, timeout: float | None = None
) -> int:
    """The status code of one request (the body, JSON when given, is read and dropped).

    OSError, TimeoutError or ValueError (an answer that is not HTTP) when there is none."""

    async def ask() -> int:
        host, port = address
        reader, writer = await asyncio.open_connection(host, port, limit=MAX_HEAD)
        try:
            data = b"" if body is None else json.dumps(body).encode()
            # RFC 7230: a v6 host goes in brackets
            authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            head = f"{method} {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: */*\r\nConnection: close\r\n"
            if body is not None:
                head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            writer.write(head.encode("ascii") + b"\r\n" + data)
            await writer.drain()
            parts = (await reader.readline()).split()
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
                raise ValueError(f"not an HTTP answer: {b' '.join(parts)[:80]!r}")
            while await reader.read(65536):  # the rest, to the close the request asked for
                pass
            return int(parts[1])
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await asyncio.wait_for(ask(), timeout)
