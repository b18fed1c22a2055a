"""The remote API: the only way core code touches a box.

Core services receive a `Remote` and never see asyncssh, channels or shell syntax.  One
implementation exists: `BoxClient` (specdebug.remote.client) over a Transport (specdebug.transport:
SSH, a Slurm node, this machine).  Commands are argv lists; where a transport needs shell text it
quotes in one place (specdebug.transport.ssh.quote), so user text is never pasted into shell syntax.
The errors and connection states are the transport layer's (specdebug.transport.base), named here
so services import them from the one API they use.

`Remote` is what services use (commands, files, streams, forwards); `Connection` adds the
lifecycle that front ends drive (start, restart, close, status listeners, the reconnect
generation, warnings about the host's configuration).  Front ends get a Connection from one
factory (specdebug.remote.factory.connect_host) and never reach into an implementation; the
host-key decision is passed to the factory, never patched in later.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from specdebug.transport.base import (
    ConnectionDropped,
    ConnState,
    ConnStatus,
    Forward,
    HostKeyRefused,
    HostSpecError,
    NotConnected,
    RemoteError,
    RequestTimeout,
    TransportFailed,
)

__all__ = [
    "ConnState",
    "ConnStatus",
    "Connection",
    "ConnectionDropped",
    "FileRead",
    "Forward",
    "HostKeyRefused",
    "HostSpecError",
    "JobSteps",
    "NotConnected",
    "ProcInfo",
    "Remote",
    "RemoteError",
    "RequestTimeout",
    "RunResult",
    "StatusListener",
    "Stream",
    "TransportFailed",
]


@dataclass
class RunResult:
    """Outcome of a short command.  exit_status is None when it was killed by timeout."""

    exit_status: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    truncated: bool = False  # it printed more than the bound (RUN_OUTPUT_MAX): ended, output cut
    end_note: str = ""  # what was done about a command past its bound ("ended it", or why not)
    login_output: tuple[str, ...] = ()  # lines the box's login printed before the command (not its output)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass
class FileRead:
    """One file read by the probe: data, or an error name (ENOENT, EACCES, ESRCH...)."""

    path: str
    data: bytes | None = None
    error: str | None = None


@dataclass
class ProcInfo:
    """One process as /proc shows it (read in a single probe for the whole table)."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    uid: int
    state: str
    start_ticks: int
    comm: str
    cmdline: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return " ".join(self.cmdline) if self.cmdline else f"[{self.comm}]"


class Stream(Protocol):
    """Output of a long-running remote command, line by line.

    Iterate it for lines (str with the trailing newline removed, or raw bytes lines including
    b"\\n" when opened with binary=True), or iterate `chunks()` for raw blocks.  Leaving the loop
    early, `aclose()`, or cancelling the task ends the remote process too.  When the connection
    drops mid-stream, iteration raises ConnectionDropped.  After normal end, `exit_status` holds
    the remote exit code.
    """

    exit_status: int | None

    def __aiter__(self) -> AsyncIterator[Any]: ...

    def chunks(self, size: int = 1 << 16) -> AsyncIterator[bytes]:
        """The output as raw bytes in blocks of up to `size`, as they arrive (lines split anywhere):
        for readers that split records themselves, one await per block instead of one per line.
        Iterate either this or the stream itself, not both."""
        ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Stream: ...

    async def __aexit__(self, *exc: object) -> None: ...


@runtime_checkable
class Remote(Protocol):
    """One host.  All methods are safe to call concurrently."""

    name: str  # what the user typed (alias or user@host:port)
    state_dir: str | None  # box-side folder of server records; None: ~/.specdebug/servers on the box

    @property
    def status(self) -> ConnStatus: ...

    async def wait_connected(self, timeout: float | None = None) -> None: ...

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 30.0,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> RunResult:
        """Run a short command through the probe channel (no new process on the box)."""
        ...

    async def read_files(self, paths: Sequence[str], *, max_bytes: int = 1 << 20) -> list[FileRead]:
        """Read many (small) files in one round trip; one failure never hides the rest."""
        ...

    async def read_file(self, path: str, *, offset: int = 0, max_bytes: int = 1 << 20) -> bytes:
        """Read one file (raises RemoteError naming the path when it cannot)."""
        ...

    async def processes(
        self,
        *,
        match: str | None = None,
        pgid: int | None = None,
        root_pid: int | None = None,
        pids: Sequence[int] = (),
    ) -> list[ProcInfo]:
        """The box's process table from /proc, in one probe.

        With a filter (cmdline regex, process group, tree under root_pid, PIDs) only the processes
        that match any of them come back, with all their ancestors: on a box with thousands of
        processes that is what keeps a probe cheap (the box side caches per-PID facts).
        """
        ...

    async def box_op(
        self, op: str, args: Mapping[str, Any], *, timeout: float | None = 30.0
    ) -> dict[str, Any]:
        """One operation of the box-side modules (specdebug.box: process control, port holder,
        health): a request on the resident helper, or one python3 process where the box has none.
        Raises RemoteError when the box cannot run it."""
        ...

    def stream(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        binary: bool = False,
        stderr: bool = False,
    ) -> Stream:
        """Start a long-running command as its own process (over SSH: an exec channel, queued
        under MaxSessions).

        stderr=True merges stderr into the lines (2>&1 on the box)."""
        ...

    async def forward_local_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> Forward: ...

    async def close(self) -> None: ...


@runtime_checkable
class JobSteps(Protocol):
    """A Remote whose long-lived processes must each be a scheduler's job step (Slurm): a process
    started through a short request would die with that request's step on a cgroup-tracked node."""

    async def launch_step(
        self, argv: Sequence[str], *, name: str, timeout: float = 30.0
    ) -> tuple[RunResult, str]:
        """Run a launch command as a step that lasts while the server it starts lives: its output
        (as `run` would give it) and the step id."""
        ...

    async def cancel_step(self, step: str) -> None:
        """End the step (scancel) and wait until the scheduler no longer lists it."""
        ...


StatusListener = Callable[[ConnStatus], None]


@runtime_checkable
class Connection(Remote, Protocol):
    """A Remote with its lifecycle: what a front end holds for each host it shows."""

    warnings: list[str]  # problems with the host's configuration worth showing once (e.g. ignored options)

    @property
    def generation(self) -> int:
        """Counts successful connects: a change means a reconnect (cached facts may be stale)."""
        ...

    async def start(self) -> None:
        """Begin connecting in the background (never blocks on a slow host)."""
        ...

    async def restart(self) -> None:
        """Try again after a terminal failure (refused host key, failed auth); no-op while trying."""
        ...

    def subscribe(self, listener: StatusListener) -> Callable[[], None]:
        """Call `listener` on every status change until the returned unsubscribe is called."""
        ...
