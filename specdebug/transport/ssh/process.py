"""An exec channel as a transport Process: the asyncssh process, its session slot, and whether
the connection it ran on is still the transport's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncssh

from specdebug.transport.base import ConnectionDropped
from specdebug.transport.ssh.slots import SlotLimiter
from specdebug.transport.teardown import best_effort


class _Reader:
    """A channel stream whose asyncssh errors (the link went) read as ConnectionDropped."""

    def __init__(self, stream: asyncssh.SSHReader[bytes], name: str) -> None:
        self._stream = stream
        self._name = name

    async def read(self, n: int = -1) -> bytes:
        try:
            return await self._stream.read(n)
        except asyncssh.ConnectionLost as exc:
            raise ConnectionDropped(f"{self._name}: connection lost during stream: {exc}") from exc
        except asyncssh.Error as exc:
            raise ConnectionDropped(f"{self._name}: disconnected during stream: {exc}") from exc


class _Writer:
    def __init__(self, stream: asyncssh.SSHWriter[bytes], name: str) -> None:
        self._stream = stream
        self._name = name

    def write(self, data: bytes) -> None:
        try:
            self._stream.write(data)
        except asyncssh.Error as exc:
            raise ConnectionDropped(f"{self._name}: write failed: {exc}") from exc

    def write_eof(self) -> None:
        try:
            self._stream.write_eof()
        except asyncssh.Error as exc:
            raise ConnectionDropped(f"{self._name}: EOF failed: {exc}") from exc


class SSHProcess:
    """One exec channel; its session slot is given back once the channel is closed."""

    def __init__(
        self,
        proc: asyncssh.SSHClientProcess[bytes],
        slots: SlotLimiter,
        lost: Callable[[], bool],
        name: str,
    ) -> None:
        self.proc = proc
        self._slots = slots
        self._lost = lost
        self._name = name
        self._freed: asyncio.Task[None] | None = None
        self._stdin = _Writer(proc.stdin, name)
        self._stdout = _Reader(proc.stdout, name)
        self._stderr = _Reader(proc.stderr, name)

    @property
    def stdin(self) -> _Writer:
        return self._stdin

    @property
    def stdout(self) -> _Reader:
        return self._stdout

    @property
    def stderr(self) -> _Reader:
        return self._stderr

    def close(self) -> None:
        """EOF (a watched command ends) and close; the slot goes back when sshd closed its side
        (it frees the session only then), or after 2 s."""
        if self._freed is not None:
            return
        with best_effort("%s: EOF to a command", self._name):
            self.proc.stdin.write_eof()
        with best_effort("%s: close a command's channel", self._name):
            self.proc.close()
        self._freed = asyncio.ensure_future(self._free())

    async def _free(self) -> None:
        try:
            with best_effort("%s: wait for a channel to close", self._name):
                await asyncio.wait_for(self.proc.wait_closed(), 2.0)
        finally:
            await self._slots.release()

    async def wait_closed(self, timeout: float) -> None:
        self.close()
        assert self._freed is not None
        with best_effort("%s: wait for a channel's slot", self._name):
            await asyncio.wait_for(asyncio.shield(self._freed), timeout + 0.5)

    async def wait(self) -> int | None:
        await self.proc.wait_closed()
        return self.proc.exit_status

    async def lost(self) -> bool:
        return self.proc.exit_status is None and self._lost()
