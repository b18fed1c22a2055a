"""The Remote API calls of a Slurm node: requests on the resident helper, streams as job steps.

Short requests (run, file reads, the process table, box ops) go to the helper that runs as one
long-lived overlap step on the node (slurm.py keeps it); each stream is a step of its own under
the same stdin-EOF watchdog as over SSH.  A base class of SlurmRemote, kept apart from its
supervisor as ssh_ops.py is from SSHRemote's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from specdebug.remote.api import ConnectionDropped, FileRead, ProcInfo, RemoteError, RunResult
from specdebug.remote.probe import ProbeChannel, file_read
from specdebug.remote.shell import watchdog_command, with_env_cwd
from specdebug.remote.slurm_job import SlurmMissing, SlurmSpec, srun_argv
from specdebug.remote.teardown import best_effort

PIPE_LIMIT = 64 << 20  # one helper answer is one line (a 1 MiB file read is ~1.4 MiB of base64)


async def spawn_srun(argv: Sequence[str], *, merge_stderr: bool = False) -> asyncio.subprocess.Process:
    """srun here, with pipes; stdout lines may be as long as a helper answer."""
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            limit=PIPE_LIMIT,
            # our own session: a Ctrl-C at the terminal reaches us, not srun (which would only
            # print the step's status on a first SIGINT); we end it ourselves (end_process)
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise SlurmMissing("srun not found: the Slurm client programs are not installed here") from exc


class StderrTail:
    """srun's stderr read as it comes (a full pipe would stall the step), keeping its last bytes
    for the error message when the step fails."""

    def __init__(self, reader: asyncio.StreamReader | None, keep: int = 4096) -> None:
        self.data = b""
        self._keep = keep
        self.task = asyncio.ensure_future(self._run(reader)) if reader is not None else None

    async def _run(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := await reader.read(1 << 16):
                self.data = (self.data + chunk)[-self._keep :]

    async def text(self, wait_s: float = 1.0) -> str:
        """What srun said, after waiting up to `wait_s` for its stderr to end."""
        if self.task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.task), wait_s)
        return self.data.decode("utf-8", "replace")

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()


async def end_process(proc: asyncio.subprocess.Process, grace_s: float = 5.0) -> None:
    """EOF first (the watchdog ends the step's group), then TERM (srun cancels the step), then KILL.

    A step whose task died by a signal takes slurmstepd about 3 s to end, hence the grace."""
    if proc.stdin is not None:
        with best_effort("EOF to an srun"):
            proc.stdin.close()
    for step in ("wait", "terminate", "kill"):
        if proc.returncode is not None:
            return
        if step == "terminate":
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        elif step == "kill":
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace_s)


class SlurmRemoteAPI:
    """The Remote API on top of SlurmRemote's helper step (see SlurmRemote for the state)."""

    name: str
    spec: SlurmSpec
    _probe: ProbeChannel | None

    async def ready(self, timeout: float | None) -> tuple[str, ProbeChannel]:
        """The node and its live helper, waiting up to `timeout` (SlurmRemote implements this)."""
        raise NotImplementedError

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 30.0,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> RunResult:
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        _, probe = await self.ready(timeout)
        resp = await probe.request(
            "run",
            timeout,
            argv=argv,
            stdin=base64.b64encode(input).decode() if input is not None else None,
            env=dict(env) if env else None,
            cwd=cwd,
            timeout=timeout,
        )
        return RunResult(
            exit_status=resp["rc"],
            stdout=base64.b64decode(resp["out"]),
            stderr=base64.b64decode(resp["err"]),
            timed_out=bool(resp.get("timed_out")),
        )

    async def read_files(self, paths: Sequence[str], *, max_bytes: int = 1 << 20) -> list[FileRead]:
        _, probe = await self.ready(30.0)
        resp = await probe.request("read", 30.0, paths=list(paths), offset=0, max=max_bytes)
        return [file_read(f) for f in resp["files"]]

    async def read_file(self, path: str, *, offset: int = 0, max_bytes: int = 1 << 20) -> bytes:
        _, probe = await self.ready(30.0)
        resp = await probe.request("read", 30.0, paths=[path], offset=offset, max=max_bytes)
        f = file_read(resp["files"][0])
        if f.error:
            raise RemoteError(f"{self.name}: cannot read {path}: {f.error}")
        return f.data or b""

    async def processes(
        self,
        *,
        match: str | None = None,
        pgid: int | None = None,
        root_pid: int | None = None,
        pids: Sequence[int] = (),
    ) -> list[ProcInfo]:
        _, probe = await self.ready(30.0)
        want = {"match": match, "pgid": pgid, "root": root_pid, "pids": list(pids) or None}
        resp = await probe.request("ps", 30.0, **{k: v for k, v in want.items() if v is not None})
        return [ProcInfo(*p[:9]) for p in resp["procs"]]

    async def box_op(
        self, op: str, args: Mapping[str, Any], *, timeout: float | None = 30.0
    ) -> dict[str, Any]:
        _, probe = await self.ready(timeout)
        resp = await probe.request(op, timeout, args=dict(args))
        result: dict[str, Any] = resp["result"]
        return result

    def stream(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        binary: bool = False,
        stderr: bool = False,
    ) -> SrunStream:
        return SrunStream(
            self, with_env_cwd([str(a) for a in argv], env, cwd), binary=binary, merge_stderr=stderr
        )


class SrunStream:
    """A long-running command on the node as its own overlap step (see api.Stream)."""

    def __init__(
        self, remote: SlurmRemoteAPI, argv: Sequence[str], *, binary: bool, merge_stderr: bool
    ) -> None:
        self._remote = remote
        self._argv = ["sh", "-c", watchdog_command(argv, merge_stderr=merge_stderr)]
        self._binary = binary
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: StderrTail | None = None
        self._closed = False
        self.exit_status: int | None = None

    async def _open(self) -> None:
        node, _ = await self._remote.ready(None)
        self._proc = await spawn_srun(srun_argv(self._remote.spec.job, node, self._argv))
        self._stderr = StderrTail(self._proc.stderr)

    def __aiter__(self) -> AsyncIterator[str | bytes]:
        return self._iterate()

    def chunks(self, size: int = 1 << 16) -> AsyncIterator[bytes]:
        """Raw bytes in blocks of up to `size` as they arrive."""
        return self._iterate(size)

    async def _iterate(self, chunk: int = 0) -> AsyncIterator[Any]:
        if self._proc is None:
            await self._open()
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while True:
                try:
                    line = await (self._proc.stdout.read(chunk) if chunk else self._proc.stdout.readline())
                except (OSError, ValueError) as exc:
                    raise ConnectionDropped(f"{self._remote.name}: stream broke: {exc}") from exc
                if not line:
                    break
                if self._binary or chunk:
                    yield line
                else:
                    yield line.decode("utf-8", "replace").rstrip("\r\n")
            self.exit_status = await self._proc.wait()
            if self.exit_status != 0 and await self._step_failed():
                raise ConnectionDropped(
                    f"{self._remote.name}: the stream's job step ended ({self.exit_status})"
                )
        finally:
            await self.aclose()

    async def _step_failed(self) -> bool:
        """srun's own failure (the job ended, the node went) rather than the command's exit status."""
        return self._stderr is not None and "srun: error" in await self._stderr.text()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._proc is not None:
            await end_process(self._proc)
        if self._stderr is not None:
            self._stderr.cancel()

    async def __aenter__(self) -> SrunStream:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class DirectForward:
    """The node's port is this machine's loopback port: no tunnel, the same number."""

    def __init__(self, port: int) -> None:
        self.local_port = port

    async def close(self) -> None:
        return None
