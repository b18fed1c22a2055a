"""Long-running commands and port forwards on an SSH connection.

A stream holds one exec channel (and one session slot) for its lifetime; a forward is re-bound on
the same local port after a reconnect.  Split from the supervisor, which only owns the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import asyncssh

from specdebug.remote.api import ConnectionDropped
from specdebug.remote.lines import BoundedLines
from specdebug.remote.shell import sh_join, watchdog_command
from specdebug.remote.teardown import best_effort

if TYPE_CHECKING:
    from specdebug.remote.ssh_ops import SSHRemoteAPI


STREAM_LINE_MAX = 1 << 20  # a line of a line-mode stream is cut here (the rest up to its newline dropped)


class SSHStream:
    """A long-running remote command on its own channel (see api.Stream)."""

    def __init__(
        self,
        remote: SSHRemoteAPI,
        argv: Sequence[str],
        *,
        binary: bool,
        merge_stderr: bool,
        with_input: bool = False,
    ) -> None:
        self._remote = remote
        # with_input: the command reads the channel's stdin itself (`send`) and must end at its EOF;
        # no watchdog then (it would read stdin): the follow agent's acknowledged flow control
        self._command = sh_join(argv) if with_input else watchdog_command(argv, merge_stderr=merge_stderr)
        self._binary = binary
        self._proc: asyncssh.SSHClientProcess[bytes] | None = None
        self._holding_slot = False
        self._closed = False
        self.exit_status: int | None = None

    async def _open(self) -> None:
        self._proc = await self._remote.open_exec(self._command)
        self._holding_slot = True

    def send(self, data: bytes) -> None:
        """Write to the command's stdin (a stream opened with_input); a closed channel drops it
        (the read side then ends with the reason)."""
        if self._proc is not None and not self._closed:
            with best_effort("%s: write to a stream's stdin", self._remote.name):
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
                except asyncssh.ConnectionLost as exc:
                    raise ConnectionDropped(
                        f"{self._remote.name}: connection lost during stream: {exc}"
                    ) from exc
                except asyncssh.DisconnectError as exc:
                    raise ConnectionDropped(
                        f"{self._remote.name}: disconnected during stream: {exc}"
                    ) from exc
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
        with best_effort("%s: wait for the stream's channel to close", self._remote.name):
            await asyncio.wait_for(self._proc.wait_closed(), 5.0)
        self.exit_status = self._proc.exit_status
        if self.exit_status is None and self._remote.conn_lost_since(self._proc):
            raise ConnectionDropped(f"{self._remote.name}: connection lost during stream")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._proc is not None:
            with best_effort("%s: EOF to the stream's watchdog", self._remote.name):
                self._proc.stdin.write_eof()  # watchdog sees EOF and ends the remote group
            with best_effort("%s: close the stream's channel", self._remote.name):
                self._proc.close()
            # the server frees the session slot only once the channel is closed on its side
            with best_effort("%s: wait for the stream's channel to close", self._remote.name):
                await asyncio.wait_for(self._proc.wait_closed(), 2.0)
        if self._holding_slot:
            self._holding_slot = False
            await self._remote.release_slot()

    async def __aenter__(self) -> SSHStream:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class SSHForward:
    """A local forward that the remote re-creates on the same local port after a reconnect."""

    def __init__(self, remote: SSHRemoteAPI, remote_host: str, remote_port: int) -> None:
        self._remote = remote
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.local_port = 0
        self._listener: asyncssh.SSHListener | None = None

    async def bind(self, conn: asyncssh.SSHClientConnection) -> None:
        self._listener = await conn.forward_local_port(
            "127.0.0.1", self.local_port, self.remote_host, self.remote_port
        )
        self.local_port = self._listener.get_port()

    def unbind(self) -> None:
        """The connection went: its listener is closed (a listener of a dead connection would keep
        the local port, accepting and dropping every client) and bound again on the next connect."""
        if self._listener is not None:
            with best_effort("%s: close a forward's listener", self._remote.name):
                self._listener.close()
        self._listener = None

    async def close(self) -> None:
        self._remote.forget_forward(self)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
