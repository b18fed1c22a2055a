"""Long-running commands on the box: one transport process per stream, line by line or in blocks.

A stream holds its process (and, over SSH, one session slot) for its lifetime, under the stdin-EOF
watchdog so closing it ends the remote command even where signals are ignored.  Transport-neutral:
a dropped link reads as ConnectionDropped, whatever the transport.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from specdebug.remote.lines import BoundedLines
from specdebug.remote.shell import watchdog_argv
from specdebug.transport.base import ConnectionDropped, Process, Transport
from specdebug.transport.teardown import best_effort

STREAM_LINE_MAX = 1 << 20  # a line of a line-mode stream is cut here (the rest up to its newline dropped)


class BoxStream:
    """A long-running remote command on its own process (see api.Stream)."""

    def __init__(
        self,
        transport: Transport,
        ready: Callable[[float | None], Awaitable[object]],
        argv: Sequence[str],
        *,
        binary: bool,
        merge_stderr: bool,
        with_input: bool = False,
    ) -> None:
        self._transport = transport
        self._ready = ready
        self._name = transport.name
        # with_input: the command reads its stdin itself (`send`) and must end at its EOF; no
        # watchdog then (it would read stdin): the follow agent's acknowledged flow control
        # (under sh all the same, so a missing program is exit status 127 on every transport, as
        # the follower's no-python3 fallback expects)
        self._argv = (
            ["sh", "-c", 'exec "$@"', "sh", *argv]
            if with_input
            else watchdog_argv(argv, merge_stderr=merge_stderr)
        )
        self._binary = binary
        self._proc: Process | None = None
        self._closed = False
        self.exit_status: int | None = None

    async def _open(self) -> None:
        await self._ready(None)
        self._proc = await self._transport.exec(self._argv)

    def send(self, data: bytes) -> None:
        """Write to the command's stdin (a stream opened with_input); a closed process drops it
        (the read side then ends with the reason)."""
        if self._proc is not None and not self._closed:
            with best_effort("%s: write to a stream's stdin", self._name):
                self._proc.stdin.write(data)

    def __aiter__(self) -> AsyncIterator[str | bytes]:
        return self._iterate()

    def chunks(self, size: int = 1 << 16) -> AsyncIterator[bytes]:
        """Raw bytes in blocks of up to `size` as they arrive: for readers that split records
        themselves (one await per block instead of one per line)."""
        return self._iterate(size)

    async def _iterate(self, chunk: int = 0) -> AsyncIterator[Any]:
        if self._proc is None:
            await self._open()
        assert self._proc is not None
        lines = BoundedLines(self._proc.stdout, STREAM_LINE_MAX)  # a longer line is cut there
        try:
            while True:
                try:
                    if chunk:
                        line = await self._proc.stdout.read(chunk)
                    else:
                        line = await lines.readline()
                except (OSError, ValueError) as exc:
                    raise ConnectionDropped(f"{self._name}: stream broke: {exc}") from exc
                if not line:
                    break
                if self._binary or chunk:
                    yield line
                else:
                    yield line.decode("utf-8", "replace").rstrip("\r\n")
            await self._finish()
        finally:
            await self.aclose()

    async def _finish(self) -> None:
        assert self._proc is not None
        with best_effort("%s: wait for the stream's end", self._name):
            self.exit_status = await asyncio.wait_for(self._proc.wait(), 5.0)
        if self.exit_status != 0 and await self._proc.lost():
            raise ConnectionDropped(f"{self._name}: connection lost during stream")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._proc is not None:
            self._proc.close()  # EOF: the watchdog ends the remote group
            # over SSH the server frees the session slot only once the channel is closed on its side
            await self._proc.wait_closed(2.0)

    async def __aenter__(self) -> BoxStream:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
