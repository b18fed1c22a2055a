"""A local port forward on an SSH connection, bound again on the same local port after a reconnect."""

from __future__ import annotations

import logging
from collections.abc import Callable

import asyncssh

from specdebug.transport.teardown import best_effort

# asyncio's line for each write into a socket whose peer already left (after the fifth).  A client
# that closes a forwarded connection while the server still streams (the benchmark's token guard
# cutting an endless answer) has asyncssh's forwarder hand it every chunk already in flight before
# asyncio delivers connection_lost: ~270 identical lines on stderr, about nothing to act on (the
# connection is closed and the forwarder closes its channel on connection_lost).
SEND_AFTER_CLOSE = "socket.send() raised exception."


class _DropSendAfterClose(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != SEND_AFTER_CLOSE


_SEND_FILTER = _DropSendAfterClose()


def quiet_send_after_close() -> None:
    """Drop exactly that line from asyncio's logger (idempotent: a filter object is added once)."""
    logging.getLogger("asyncio").addFilter(_SEND_FILTER)


class SSHForward:
    """A local forward that the transport re-creates on the same local port after a reconnect."""

    def __init__(
        self, name: str, remote_host: str, remote_port: int, forget: Callable[[SSHForward], None]
    ) -> None:
        self._name = name
        self._forget = forget
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.local_port = 0
        self.local_host = "127.0.0.1"  # the listener below
        self._listener: asyncssh.SSHListener | None = None

    async def bind(self, conn: asyncssh.SSHClientConnection) -> None:
        quiet_send_after_close()
        self._listener = await conn.forward_local_port(
            "127.0.0.1", self.local_port, self.remote_host, self.remote_port
        )
        self.local_port = self._listener.get_port()

    def unbind(self) -> None:
        """The connection went: its listener is closed (a listener of a dead connection would keep
        the local port, accepting and dropping every client) and bound again on the next connect."""
        if self._listener is not None:
            with best_effort("%s: close a forward's listener", self._name):
                self._listener.close()
        self._listener = None

    async def close(self) -> None:
        """Closed by its owner: not bound again on reconnect."""
        self._forget(self)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
