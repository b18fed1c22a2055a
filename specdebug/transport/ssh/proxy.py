"""ssh config's ProxyCommand, run by us so its failure is seen at once and in its own words.

asyncssh runs a ProxyCommand itself with its stderr left on ours and its exit unheeded: a command
that exited at once ("proxy: no route", status 1) read as "Connection lost", was retried for the
whole connect timeout, and its message and status were never shown (issue 40).  Here the command
runs on one end of a socket pair that asyncssh then uses as its socket (`sock=`), its stderr is
drained into a bounded tail, and a command that ends before the SSH handshake is done fails the
connect with its status and that tail (ProxyFailed).

The command line is split as asyncssh splits it (shlex, no shell), so a host name expanded into
`%h` never reaches a shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

from asyncssh.misc import split_args

from specdebug.transport.base import ProxyFailed

T = TypeVar("T")

STDERR_TAIL_BYTES = 2048  # what a failure message quotes of the command's stderr (its last bytes)
EXIT_GRACE_S = 1.0  # after a failed handshake, how long the command's exit is awaited to name it
STOP_GRACE_S = 2.0  # a command still running at close: TERM, then KILL after this


class ProxyLink:
    """One running ProxyCommand and our end of its socket pair."""

    def __init__(self, name: str, command: str, proc: asyncio.subprocess.Process, sock: socket.socket):
        self.name = name
        self.command = command
        self.proc = proc
        self.sock = sock
        self._tail = bytearray()
        self._drain = asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        """Read the command's stderr for its whole life (a full pipe would stall it), keeping the last
        STDERR_TAIL_BYTES only."""
        stream = self.proc.stderr
        if stream is None:
            return
        while chunk := await stream.read(4096):
            self._tail += chunk
            del self._tail[:-STDERR_TAIL_BYTES]

    def stderr_text(self) -> str:
        """The stderr tail as one line: printable characters only, lines joined with ' | '."""
        text = bytes(self._tail).decode("utf-8", "replace")
        lines = ["".join(c if c.isprintable() else "?" for c in ln).strip() for ln in text.splitlines()]
        return " | ".join(ln for ln in lines if ln)

    async def exit_status(self, wait_s: float) -> int | None:
        """The command's exit status once it has ended (within `wait_s`), else None."""
        try:
            rc = await asyncio.wait_for(self.proc.wait(), wait_s)
        except TimeoutError:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._drain), 0.5)  # its last words
        return rc

    def failure(self, rc: int) -> ProxyFailed:
        said = self.stderr_text()
        how = f"exited with status {rc}" if rc >= 0 else f"was killed by signal {-rc}"
        return ProxyFailed(
            f"{self.name}: ProxyCommand {how} before the SSH handshake"
            + (f": {said}" if said else " (it printed nothing on stderr)"),
            f"the ProxyCommand of your ssh config ran as: {self.command}; "
            "`ssh -v HOST true` runs the same command",
        )

    async def close(self) -> None:
        """The command stopped (TERM, then KILL) and reaped.  Our end of the pair is not closed
        here: asyncssh's transport owns it once handed over and closes it when the command's end
        goes (closed under a live transport, its descriptor could be reused while still watched)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            if await self.exit_status(STOP_GRACE_S) is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        self._drain.cancel()

    def kill(self) -> None:
        """At once, for an abort: the command killed (the loop's child watcher reaps it)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


async def start_proxy(name: str, command: str) -> ProxyLink:
    """The ProxyCommand running, its stdin and stdout one end of a socket pair; ProxyFailed when it
    cannot start at all."""
    argv = list(split_args(command))
    if not argv:
        raise ProxyFailed(f"{name}: the ProxyCommand of the ssh config is empty")
    ours, theirs = socket.socketpair()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=theirs.fileno(),
            stdout=theirs.fileno(),
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # a Ctrl+C at the terminal is ours to handle, not the proxy's
        )
    except OSError as exc:
        ours.close()
        raise ProxyFailed(f"{name}: ProxyCommand could not start: {exc}", f"it ran as: {command}") from exc
    finally:
        theirs.close()
    return ProxyLink(name, command, proc, ours)


async def through_proxy(
    name: str, command: str, open_link: Callable[[socket.socket], Awaitable[T]]
) -> tuple[T, ProxyLink]:
    """`open_link(sock)` over a fresh ProxyCommand; a command that ends before it succeeds fails it
    with its status and stderr (ProxyFailed) instead of the handshake's own error."""
    link = await start_proxy(name, command)
    try:
        result = await open_link(link.sock)
    except BaseException as exc:
        rc = None if isinstance(exc, asyncio.CancelledError) else await link.exit_status(EXIT_GRACE_S)
        await link.close()
        if rc is not None:
            raise link.failure(rc) from exc
        raise
    return result, link
