"""The narrow pipe to one machine: what every transport (SSH, Slurm steps, this machine) offers.

A Transport connects and closes, runs an argv as a process with pipes (`exec`), and forwards a
port where it can (`forward` answers None where it cannot: a capability, not an error).  Nothing
else: the helper channel, the one-shot fallback, streams, reconnects and status live once, in the
box client above it (specdebug.remote.client), whatever the transport.

The errors and connection states here are the ones the box client raises and shows; they sit at
the bottom so a transport can raise them without knowing the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from specdebug.errors import SpecdebugError


class HostSpecError(ValueError, SpecdebugError):
    """A host address or ssh config problem the user must fix (exit code 2)."""

    exit_code = 2


class RemoteError(SpecdebugError):
    """Base class of every error the remote layer raises towards core code."""


class NotConnected(RemoteError):
    """The host is not connected right now (connecting, reconnecting or failed)."""


class ConnectionDropped(RemoteError):
    """The connection went away while a request or stream was in flight.

    Streams raise this so the caller can resume (e.g. from a byte offset) once the
    connection is back: `await remote.wait_connected()`.
    """


class TransportFailed(RemoteError):
    """A connect that retrying cannot fix (a refused host key, failed authentication, an ended
    allocation): the host is FAILED until the user restarts it."""


class AuthFailed(NotConnected, TransportFailed):
    """The box refused our credentials."""


class HostKeyRefused(TransportFailed):
    """The host key was unknown and not accepted, or it changed (never accepted)."""

    def __init__(self, message: str, *, host: str, key_type: str, fingerprint: str, changed: bool):
        super().__init__(message)
        self.host = host
        self.key_type = key_type
        self.fingerprint = fingerprint
        self.changed = changed


class ProxyFailed(RemoteError):
    """The local command that carries the link (ssh config's ProxyCommand) ended before the SSH
    handshake, or could not start; the message quotes its status and stderr.  A first connect
    fails at once on it (the same command would only fail again); a reconnect retries it."""


class RequestTimeout(RemoteError):
    """A probe request took longer than its timeout; the channel stays usable."""


class ConnState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True)
class ConnStatus:
    """What the UI shows about a host's connection."""

    state: ConnState
    rtt_ms: float | None = None
    attempt: int = 0
    last_error: str | None = None


class Reader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    def write_eof(self) -> None: ...


class Process(Protocol):
    """One argv running on the box with its three pipes.

    `close()` ends our side (EOF, channel closed): a command under the box client's stdin-EOF
    watchdog then ends too.  `wait()` gives the exit status once it ended (None: it ended without
    one, killed or cut off); `lost()` tells a process the transport lost (the link went, the
    scheduler's step failed) from one that ended by itself."""

    @property
    def stdin(self) -> Writer: ...

    @property
    def stdout(self) -> Reader: ...

    @property
    def stderr(self) -> Reader: ...

    def close(self) -> None: ...

    async def wait(self) -> int | None: ...

    async def wait_closed(self, timeout: float) -> None:
        """Wait up to `timeout` for the process and its resources (a session slot) to be gone."""
        ...

    async def lost(self) -> bool: ...


class Forward(Protocol):
    """A local TCP port forwarded to host:port on the box; survives reconnects."""

    local_port: int
    local_host: str  # where this machine reaches it (a tunnel's 127.0.0.1, or the box's own loopback address)

    async def close(self) -> None: ...


class Transport(Protocol):
    """One machine.  `connect()` makes one attempt (the box client retries with backoff);
    `wait_lost()` returns once that link is gone; `close()` ends it (connect may follow again)."""

    name: str
    warnings: list[str]  # problems with the host's configuration worth showing once

    async def connect(self) -> None:
        """One attempt: TransportFailed when retrying cannot help, RemoteError/OSError otherwise."""
        ...

    async def wait_lost(self) -> None:
        """Return when the current link is gone (a transport without a lasting link never returns)."""
        ...

    async def close(self) -> None: ...

    def abort(self) -> None:
        """Drop the link as a network fault would (tests and the demo)."""
        ...

    async def exec(self, argv: Sequence[str], stdin: bytes | None = None) -> Process:
        """Start argv on the box.  With `stdin` bytes, they are written and stdin is closed;
        without, stdin stays open for the caller (EOF ends a watched command)."""
        ...

    async def forward(self, port: int, host: str = "127.0.0.1") -> Forward | None:
        """A local port reaching host:port on the box, or None where this transport has none."""
        ...

    def no_forward_reason(self, host: str) -> str:
        """Why `forward` answers None for host (shown to the user)."""
        ...

    async def ping(self) -> float | None:
        """One round trip in ms without the helper (None where the transport cannot tell)."""
        ...

    def sessions_full(self) -> bool:
        """Whether an `exec` waits now for a free session (SSH's MaxSessions reached); False where
        the transport has no such limit."""
        ...


@runtime_checkable
class StepTransport(Transport, Protocol):
    """A transport whose long-lived processes must each be a scheduler's job step (Slurm): a
    process started through a short request would die with that request's step."""

    async def launch_step(
        self, argv: Sequence[str], *, name: str, timeout: float = 30.0
    ) -> tuple[int, bytes, str]:
        """Run a launch command as a step that lasts while the server it starts lives: its exit
        status, its output and the step id."""
        ...

    async def cancel_step(self, step: str) -> None:
        """End the step (scancel) and wait until the scheduler no longer lists it."""
        ...
