"""What a server's stream may claim: bounded lines, tokens up to what was asked, plausible usage.

The benchmark measures a server it does not trust to behave: a stream that never ends, a line of
hundreds of megabytes, or usage figures that cannot be true (10^15 tokens, a negative count, 10^6
tokens for 32 asked) must end that request with the reason, never hang the run, exhaust memory or
become a figure.  A request may return a few tokens more than asked (`token_slack`, said in the
result's config) before it is stopped and counted as failed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from specdebug.errors import SpecdebugError

MAX_LINE_BYTES = 1 << 20  # one SSE line (one chunk of a completion) is a few hundred bytes
MAX_PROMPT_TOKENS = 10**8  # beyond any context window: a prompt_tokens above this is no count


class StreamRefused(SpecdebugError):
    """The stream broke a bound: the request ends with this reason (a failed request)."""


def token_slack(max_tokens: int) -> int:
    """Tokens a request may return beyond `max_tokens` before it is stopped (servers that count a
    final special token, or finish a speculative step, go slightly over)."""
    return max(8, max_tokens // 10)


async def bounded_lines(chunks: AsyncIterator[bytes], limit: int = MAX_LINE_BYTES) -> AsyncIterator[str]:
    """Lines of a byte stream (``\\n``, ``\\r\\n`` or ``\\r`` ends one, as SSE says), refusing any
    longer than `limit` bytes before it is held whole."""
    buf = b""
    async for chunk in chunks:
        buf += chunk
        while True:
            cut = _line_end(buf)
            if cut is None:
                break
            end, nxt = cut
            if end > limit:
                raise StreamRefused(f"a stream line of more than {limit} bytes (refused)")
            yield buf[:end].decode("utf-8", "replace")
            buf = buf[nxt:]
        if len(buf) > limit:
            raise StreamRefused(f"a stream line of more than {limit} bytes (refused)")
    if buf:
        yield buf.decode("utf-8", "replace")


def _line_end(buf: bytes) -> tuple[int, int] | None:
    """(end of the first line, start of the next), or None when no line is complete yet."""
    n, r = buf.find(b"\n"), buf.find(b"\r")
    if n < 0 and r < 0:
        return None
    if r < 0 or (0 <= n < r):
        return n, n + 1
    if r + 1 == len(buf):
        return None  # a lone \r at the end: it may be the first half of \r\n
    return r, r + (2 if buf[r + 1 : r + 2] == b"\n" else 1)


def _count(value: Any, name: str, upper: int, upper_why: str) -> int | None:
    """A usage figure as a count, None when absent; StreamRefused when it cannot be one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise StreamRefused(f"the server reported usage.{name} = {str(value)[:40]!r}, not a whole number")
    if value < 0:
        raise StreamRefused(f"the server reported usage.{name} = {value}, a negative count")
    if value > upper:
        shown = str(value) if len(str(value)) <= 24 else f"a {len(str(value))}-digit number"
        raise StreamRefused(f"the server reported usage.{name} = {shown}, {upper_why}")
    return value


def check_usage(usage: Any, max_tokens: int, previous: int | None) -> tuple[int | None, int | None]:
    """(completion_tokens, prompt_tokens) of a chunk's usage, each None when not given.

    Impossible figures raise StreamRefused: not whole numbers, negative, more completion tokens
    than asked plus the slack, a completion count going down, a prompt beyond any context."""
    if not isinstance(usage, dict):
        return None, None
    limit = max_tokens + token_slack(max_tokens)
    completion = _count(
        usage.get("completion_tokens"),
        "completion_tokens",
        limit,
        f"more than the {max_tokens} asked (+{token_slack(max_tokens)} slack)",
    )
    prompt = _count(usage.get("prompt_tokens"), "prompt_tokens", MAX_PROMPT_TOKENS, "beyond any context")
    if completion is not None and previous is not None and completion < previous:
        raise StreamRefused(
            f"the server reported usage.completion_tokens going down ({previous} then {completion})"
        )
    return completion, prompt


def check_counted(counted: int, max_tokens: int) -> None:
    """Tokens counted from the stream so far: past what was asked plus the slack, stop reading."""
    slack = token_slack(max_tokens)
    if counted > max_tokens + slack:
        raise StreamRefused(
            f"the server kept streaming past max_tokens {max_tokens}: stopped reading at "
            f"{counted} tokens (slack {slack})"
        )
