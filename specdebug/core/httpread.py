"""One HTTP answer from a server, read with a whole-request deadline and a byte cap.

Why: httpx's `timeout` is per read, so a server that keeps sending (a /version that streams, a
/health that never ends its body) holds a plain `client.get` forever and grows its memory with
every chunk.  Every read of a server's answer outside the benchmark's own streams goes through
here (the benchmark's streams have their own guard, core.bench.stream_guard).  The body is read raw
with `Accept-Encoding: identity`: a compressed answer cannot grow past the cap when decoded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from specdebug.errors import SpecdebugError

SMALL_BODY = 64 << 10  # a health or version answer: a few bytes; more is cut


class HttpDeadline(httpx.TimeoutException, SpecdebugError):
    """No whole answer within the deadline (every read may have succeeded).  An httpx timeout first (what
    its callers already catch), under the error root too (one renderer per front end)."""

    HINT = "the server answered too slowly or without end: is it overloaded, or not the server the profile names?"

    def __init__(self, message: str, *, request: httpx.Request | None = None) -> None:
        super().__init__(message, request=request)
        self.hint = self.HINT  # SpecdebugError's __init__ (reached through httpx's) set None


@dataclass(frozen=True)
class Bounded:
    status: int
    body: bytes  # at most max_bytes
    cut: bool  # the server sent more than max_bytes (the rest was not read)


async def get_bounded(
    client: httpx.AsyncClient,
    url: str,
    *,
    deadline_s: float,
    max_bytes: int = SMALL_BODY,
    read_body: bool = True,
) -> Bounded:
    """GET `url`: its status and at most `max_bytes` of its body, all within `deadline_s`
    (HttpDeadline past it; httpx.HTTPError as httpx raises it).  read_body=False: the status only,
    the body is left unread and the connection dropped."""
    request = client.build_request("GET", url, headers={"Accept-Encoding": "identity"})
    try:
        async with asyncio.timeout(deadline_s):
            resp = await client.send(request, stream=True)
            try:
                body = bytearray()
                cut = False
                if read_body:
                    async for chunk in resp.aiter_raw():
                        body += chunk
                        if len(body) > max_bytes:
                            cut = True
                            break
                return Bounded(resp.status_code, bytes(body[:max_bytes]), cut)
            finally:
                await resp.aclose()
    except TimeoutError:
        raise HttpDeadline(f"GET {url}: no whole answer within {deadline_s:g} s", request=request) from None
