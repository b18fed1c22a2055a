"""A hostile OpenAI-completions server on 127.0.0.1 for the benchmark bounds tests.

Run as `python -m tests.security.hostile_http MODE PORT` (its own process: the CLI tests reach it
through the sshd forward) or start `serve(mode)` in a test's loop.  Modes:
  endless      tokens forever, one per chunk, no usage (nothing stops at max_tokens)
  keepalive    SSE comments forever: every read succeeds, no token ever comes
  huge_line    one `data:` line that never ends (hundreds of MB)
  usage_huge   completion_tokens 10**15         usage_negative   completion_tokens -5
  usage_over   completion_tokens 10**6 whatever was asked
  version_endless   every version path (/get_server_info, /server_info, /version) streams forever
  health_endless    the health path's body never ends
Every mode answers GET /health with a short 200 (but health_endless) and GET /v1/models with a list.
"""

from __future__ import annotations

import asyncio
import json
import sys

MODELS = b'{"object":"list","data":[{"id":"hostile"}]}'


def _chunk(text: str, usage: dict | None = None) -> bytes:
    body: dict = {"choices": [{"index": 0, "text": text}]}
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


async def _stream(mode: str, writer: asyncio.StreamWriter) -> None:
    if mode == "endless":
        while True:
            writer.write(_chunk(" tok"))
            await writer.drain()
            await asyncio.sleep(0)
    if mode == "keepalive":
        while True:
            writer.write(b": ping\n\n")
            await writer.drain()
            await asyncio.sleep(0.05)
    if mode == "huge_line":
        writer.write(b'data: {"choices":[{"text":"')
        block = b"x" * (1 << 20)
        for _ in range(300):
            writer.write(block)
            await writer.drain()
        return
    figure = {"usage_huge": 10**15, "usage_negative": -5, "usage_over": 10**6}.get(mode, 4)  # else: fine
    for i in range(1, 4):
        writer.write(_chunk(" tok", {"prompt_tokens": 8, "completion_tokens": i}))
    writer.write(_chunk("", {"prompt_tokens": 8, "completion_tokens": figure}))
    writer.write(b"data: [DONE]\n\n")
    await writer.drain()


async def _handle(mode: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if length:
            await reader.readexactly(length)
        if head.startswith(b"GET /v1/models"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            writer.write(f"Content-Length: {len(MODELS)}\r\nConnection: close\r\n\r\n".encode() + MODELS)
        elif head.startswith((b"GET /health", b"GET /get_server_info", b"GET /server_info", b"GET /version")):
            endless = mode == ("health_endless" if head.startswith(b"GET /health") else "version_endless")
            if not endless:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            else:
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                )
                writer.write(b'{"version": "')
                while True:  # every read gets bytes: only a whole-request deadline ends it
                    writer.write(b"9" * 4096)
                    await writer.drain()
                    await asyncio.sleep(0.01)
        elif head.startswith(b"GET "):
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            await _stream(mode, writer)
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve(mode: str, port: int = 0) -> asyncio.Server:
    return await asyncio.start_server(lambda r, w: _handle(mode, r, w), "127.0.0.1", port)


async def _main(mode: str, port: int) -> None:
    server = await serve(mode, port)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0))
