"""LocalTransport: this machine as the box (subprocesses, argv only, never a shell of ours).

What the demo and the tests use where the box itself is what they test, not the SSH link: the box
helper, the one-shot fallback and streams run here exactly as they would on a box.  Every process
gets its own session (the stdin-EOF watchdog's `kill 0` then ends its group, never ours).  A port
on the box is a port here: a forward is the port itself.  `abort()` drops the link as a network
fault would: every running process is killed, and the box client reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
from collections.abc import Mapping, Sequence

from specdebug.transport.base import NotConnected, RemoteError
from specdebug.transport.teardown import best_effort

STDERR_KEPT = 1 << 20  # stderr nobody reads is drained (a full pipe would stall the process); this much kept


class TailReader:
    """A pipe read as it comes into a bounded buffer: `read(n)` for a consumer, `tail` for an
    error message; with no consumer, the oldest bytes past the bound are dropped."""

    def __init__(self, reader: asyncio.StreamReader | None, keep: int = STDERR_KEPT) -> None:
        self._buf = bytearray()
        self._keep = keep
        self.tail = b""
        self._more = asyncio.Event()
        self._eof = reader is None
        self.task = asyncio.ensure_future(self._run(reader)) if reader is not None else None

    async def _run(self, reader: asyncio.StreamReader) -> None:
        try:
            with contextlib.suppress(OSError, ValueError):
                while chunk := await reader.read(1 << 16):
                    self._buf += chunk
                    if len(self._buf) > self._keep:
                        del self._buf[: len(self._buf) - self._keep]
                    self.tail = (self.tail + chunk)[-4096:]
                    self._more.set()
        finally:
            self._eof = True
            self._more.set()

    async def read(self, n: int = -1) -> bytes:
        while not self._buf and not self._eof:
            self._more.clear()
            await self._more.wait()
        size = len(self._buf) if n < 0 else min(n, len(self._buf))
        data = bytes(self._buf[:size])
        del self._buf[:size]
        return data

    async def text(self, wait_s: float = 1.0) -> str:
        """The last bytes, after waiting up to `wait_s` for the pipe to end."""
        if self.task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.task), wait_s)
        return self.tail.decode("utf-8", "replace")

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()


async def end_process(proc: asyncio.subprocess.Process, grace_s: float, *, group: bool) -> None:
    """EOF first (a watched command ends its group), then TERM, then KILL, `grace_s` apart.

    group: signal the process's whole group (it leads its own session), not only it.

    Once it has ended, its pipes are closed here: output a reader left unread (reading paused at
    the buffer's limit) never reaches EOF, and asyncio keeps such a process's transport open until
    the garbage collector closes it, after its loop is gone ("Event loop is closed").

    Cancelled within its graces (the loop shutting down while a closed command still ends: the
    app leaving), it kills at once and closes the pipes: left alone, the process outlived its
    loop, and its transport said "Event loop is closed" when collected."""
    if proc.stdin is not None:
        with best_effort("EOF to a local process"):
            proc.stdin.close()
    try:
        for step in ("wait", "terminate", "kill"):
            if proc.returncode is not None:
                break
            if step != "wait":
                _signal(proc, signal.SIGTERM if step == "terminate" else signal.SIGKILL, group=group)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), grace_s)
    except asyncio.CancelledError:
        abandon(proc, group=group)
        raise
    if proc.returncode is not None:
        close_pipes(proc)


def abandon(proc: asyncio.subprocess.Process, *, group: bool) -> None:
    """End it now, no grace: KILL (its group, where it leads one), its pipes closed while the loop
    still runs (what a close given up before its loop closes owes)."""
    _signal(proc, signal.SIGKILL, group=group)
    close_pipes(proc)


def _signal(proc: asyncio.subprocess.Process, sig: signal.Signals, *, group: bool) -> None:
    """sig to the process (its whole group, where it leads one); one already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Close the process's transport (its pipes; a process still running is killed by it)."""
    transport = getattr(proc, "_transport", None)  # asyncio's Process has no public close
    if transport is not None:
        transport.close()


class LocalProcess:
    """A subprocess here as a transport Process (stderr drained into a TailReader)."""

    def __init__(self, proc: asyncio.subprocess.Process, *, grace_s: float = 1.0, group: bool = True) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._stderr = TailReader(proc.stderr)
        self._grace_s = grace_s
        self._group = group
        self._ending: asyncio.Task[None] | None = None
        self.dropped = False  # killed because the transport dropped its link (not by the box)

    @property
    def stdin(self) -> asyncio.StreamWriter:
        return self._stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        return self._stdout

    @property
    def stderr(self) -> TailReader:
        return self._stderr

    def close(self) -> None:
        if self._ending is None:
            self._ending = asyncio.ensure_future(end_process(self.proc, self._grace_s, group=self._group))

    async def wait_closed(self, timeout: float) -> None:
        """The process is ended (EOF, TERM, KILL: each step's grace is its own bound).

        A caller that gives up waiting (a follower cancelled as the app leaves) ends it at once:
        left to its grace, it would outlive a loop about to close, and its transport with it."""
        self.close()
        assert self._ending is not None
        try:
            await asyncio.shield(self._ending)
        except asyncio.CancelledError:
            abandon(self.proc, group=self._group)
            raise
        finally:
            self._stderr.cancel()

    async def wait(self) -> int | None:
        rc = await self.proc.wait()
        return rc if rc >= 0 else None  # killed by a signal: no exit status, as over SSH

    async def lost(self) -> bool:
        return self.dropped

    def kill(self) -> None:
        """SIGKILL to the process (its group, where it leads one), as the box would."""
        _signal(self.proc, signal.SIGKILL, group=self._group)


async def spawn(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> asyncio.subprocess.Process:
    """argv here with three pipes, in a session of its own (FileNotFoundError when it is not here)."""
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        # our own session: a Ctrl-C at the terminal never reaches it, and the watchdog's `kill 0`
        # ends its group, not ours
        start_new_session=True,
    )


class DirectForward:
    """The box's port is this machine's loopback port: no tunnel, the same number and address."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.local_port = port
        self.local_host = "127.0.0.1" if host == "localhost" else host

    async def close(self) -> None:
        return None


def is_loopback(address: str | None) -> bool:
    """True when the address is this machine's loopback (its ports are ours to reach)."""
    if not address:
        return False
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class LocalTransport:
    """This machine.  `env` (default: ours) and `cwd` are those of every process it starts."""

    def __init__(
        self, name: str = "local", *, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> None:
        self.name = name
        self.warnings: list[str] = []
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._up = False
        self._lost = asyncio.Event()
        self._procs: set[LocalProcess] = set()
        self._watchers: set[asyncio.Task[None]] = set()
        self._held = False

    async def connect(self) -> None:
        if self._held:
            raise RemoteError(f"{self.name}: the link is held down")
        self._lost = asyncio.Event()
        self._up = True

    async def wait_lost(self) -> None:
        await self._lost.wait()

    async def close(self) -> None:
        """End every process started here (as a closed connection ends its channels), and wait."""
        self._up = False
        procs = list(self._procs)
        if procs:
            await asyncio.gather(*(p.wait_closed(1.0) for p in procs), return_exceptions=True)

    def abort(self) -> None:
        """A lost link: every process of ours dies at once, as the channels of a dropped connection."""
        self._up = False
        for p in list(self._procs):
            p.dropped = True
            p.kill()
        self._lost.set()

    def hold(self) -> None:
        """Drop the link and refuse to connect again until `release()` (a host that is down)."""
        self._held = True
        self.abort()

    def release(self) -> None:
        self._held = False

    def running(self) -> list[LocalProcess]:
        """The processes started here that still run."""
        return [p for p in self._procs if p.proc.returncode is None]

    async def exec(self, argv: Sequence[str], stdin: bytes | None = None) -> LocalProcess:
        if not self._up:
            raise NotConnected(f"{self.name}: not connected")
        words = [str(a) for a in argv]
        try:
            proc = LocalProcess(await spawn(words, env=self.env, cwd=self.cwd))
        except OSError as exc:
            raise RemoteError(f"{self.name}: cannot run {words[0]}: {exc}") from exc
        self._procs.add(proc)
        watcher = asyncio.ensure_future(self._forget_when_done(proc))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        if stdin is not None:
            with best_effort("%s: write a command's input", self.name):
                proc.stdin.write(stdin)
                proc.stdin.write_eof()
        return proc

    async def _forget_when_done(self, proc: LocalProcess) -> None:
        with contextlib.suppress(Exception):
            await proc.proc.wait()
        self._procs.discard(proc)

    async def forward(self, port: int, host: str = "127.0.0.1") -> DirectForward | None:
        return DirectForward(port, host) if is_loopback(host) else None

    def no_forward_reason(self, host: str) -> str:
        return f"{host} is not this machine's loopback"

    async def ping(self) -> float | None:
        return None

    def sessions_full(self) -> bool:
        return False  # no session limit: every exec starts at once
