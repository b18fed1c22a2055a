"""BoxClient: the Remote API over any Transport (SSH, a Slurm node, this machine).

Short requests (run, file reads, the process table, box ops) go to the resident helper on one
long-lived process when the box has one, and fall back to one process per request otherwise
(requests.py); streams are processes of their own under the stdin-EOF watchdog (stream.py).  The
lifecycle (connect, helper, reconnect, status) is session.py's.  The server-records folder
(`state_dir`) is the client's: it names a folder on the box, whatever reaches it.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specdebug.remote.api import FileRead, ProcInfo, RunResult
from specdebug.remote.boxcode import framed_reply, noise_warning, once_argv, once_reply
from specdebug.remote.probe import READ_FILES_SH, ProbeChannel, errname, file_read, parse_read_files
from specdebug.remote.requests import RUN_OUTPUT_MAX, run_exec
from specdebug.remote.session import Session
from specdebug.remote.shell import with_env_cwd
from specdebug.remote.stream import BoxStream
from specdebug.transport.base import ConnStatus, Forward, RemoteError, StepTransport, Transport


class BoxClient:
    """One host.  Create, `await start()`, use the Remote API, `await close()`."""

    def __init__(
        self,
        transport: Transport,
        *,
        state_dir: str | None = None,
        use_helper: bool = True,
        require_helper: bool = False,
        helper_start_s: float | None = None,
    ) -> None:
        self.transport = transport
        self.name = transport.name
        # box-side folder of server records (None: ~/.specdebug/servers on the box); the client's
        # SPECDEBUG_STATE_DIR is the default, so tests and demos keep their own records
        self.state_dir = state_dir or os.environ.get("SPECDEBUG_STATE_DIR") or None
        self.session = Session(
            transport, use_helper=use_helper, require_helper=require_helper, helper_start_s=helper_start_s
        )
        self.warnings = self.session.warnings

    # ---- lifecycle (the session's) -------------------------------------------------------------
    @property
    def status(self) -> ConnStatus:
        return self.session.status

    @property
    def generation(self) -> int:
        return self.session.generation

    @property
    def helper_info(self) -> dict[str, Any] | None:
        """The helper's greeting (its PID, python version) while there is one."""
        return self.session.helper_info

    @property
    def has_helper(self) -> bool:
        return self.session.probe is not None

    def subscribe(self, listener: Callable[[ConnStatus], None]) -> Callable[[], None]:
        return self.session.subscribe(listener)

    async def start(self) -> None:
        await self.session.start()

    async def restart(self) -> None:
        await self.session.restart()

    async def wait_connected(self, timeout: float | None = None) -> None:
        await self.session.wait_connected(timeout)

    async def close(self) -> None:
        await self.session.close()

    def sessions_full(self) -> bool:
        """Whether a process open waits for a session slot now (SSH's MaxSessions reached)."""
        return self.transport.sessions_full()

    def drop_connection(self) -> None:
        """Abort the link as a network fault would (used by tests and the demo)."""
        self.transport.abort()

    async def _ready(self, timeout: float | None) -> ProbeChannel | None:
        return await self.session.ready(timeout)

    # ---- requests ------------------------------------------------------------------------------
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
        probe = await self._ready(timeout)
        if probe is not None:
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
                truncated=bool(resp.get("truncated")),
            )
        return await run_exec(self.transport, with_env_cwd(argv, env, cwd), timeout=timeout, input=input)

    async def read_files(self, paths: Sequence[str], *, max_bytes: int = 1 << 20) -> list[FileRead]:
        probe = await self._ready(30.0)
        if probe is not None:
            resp = await probe.request("read", 30.0, paths=list(paths), offset=0, max=max_bytes)
            return [file_read(f) for f in resp["files"]]
        # no helper: every file in one process (one shell start-up, not one per file)
        r = await run_exec(
            self.transport,
            ["sh", "-c", READ_FILES_SH, "sh", str(max_bytes), *paths],
            timeout=30.0,
            input=None,
            cap=max(RUN_OUTPUT_MAX, len(paths) * (max_bytes * 4 // 3 + 4096)),  # base64 of each file
        )
        if not r.ok:
            raise RemoteError(f"{self.name}: cannot read files: {(r.err or r.out).strip()[:300]}")
        return parse_read_files(list(paths), r.stdout)

    async def read_file(self, path: str, *, offset: int = 0, max_bytes: int = 1 << 20) -> bytes:
        probe = await self._ready(30.0)
        if probe is not None:
            resp = await probe.request("read", 30.0, paths=[path], offset=offset, max=max_bytes)
            f = file_read(resp["files"][0])
        else:
            r = await run_exec(
                self.transport,
                [
                    "sh",
                    "-c",
                    'tail -c +"$1" -- "$2" | head -c "$3"',
                    "sh",
                    str(offset + 1),
                    path,
                    str(max_bytes),
                ],
                timeout=30.0,
                input=None,
                cap=max(RUN_OUTPUT_MAX, max_bytes + 1),
            )
            f = FileRead(path, data=r.stdout) if r.ok else FileRead(path, error=errname(r.err))
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
        probe = await self._ready(30.0)
        if probe is None:
            raise RemoteError(f"{self.name}: process listing needs python3 on the box")
        want = {"match": match, "pgid": pgid, "root": root_pid, "pids": list(pids) or None}
        resp = await probe.request("ps", 30.0, **{k: v for k, v in want.items() if v is not None})
        return [
            ProcInfo(
                pid=p[0],
                ppid=p[1],
                pgid=p[2],
                sid=p[3],
                uid=p[4],
                state=p[5],
                start_ticks=p[6],
                comm=p[7],
                cmdline=p[8],
            )
            for p in resp["procs"]
        ]

    async def box_op(
        self, op: str, args: Mapping[str, Any], *, timeout: float | None = 30.0
    ) -> dict[str, Any]:
        probe = await self._ready(timeout)
        if probe is not None:
            resp = await probe.request(op, timeout, args=dict(args))
            result: dict[str, Any] = resp["result"]
            return result
        r = await run_exec(
            self.transport, once_argv(op), timeout=timeout, input=json.dumps(dict(args)).encode()
        )
        if r.timed_out:
            raise RemoteError(
                f"box operation {op}: python3 on the box did not answer within {timeout} s ({r.end_note})"
            )
        _, noise = framed_reply(r.stdout)
        noise = [*r.login_output, *noise]  # what the login printed before the op ran, too
        if noise:
            self.session.warn(noise_warning(noise))
        return once_reply(op, r)

    def stream(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        binary: bool = False,
        stderr: bool = False,
    ) -> BoxStream:
        return BoxStream(
            self.transport,
            self._ready,
            with_env_cwd([str(a) for a in argv], env, cwd),
            binary=binary,
            merge_stderr=stderr,
        )

    def stream_with_input(self, argv: Sequence[str], *, binary: bool = False) -> BoxStream:
        """`stream` whose command reads what `BoxStream.send` writes; it must end at stdin's EOF
        itself (no watchdog around it).  Found by getattr: the follow agent's acknowledged flow
        control (core.logs.follow)."""
        return BoxStream(
            self.transport,
            self._ready,
            [str(a) for a in argv],
            binary=binary,
            merge_stderr=False,
            with_input=True,
        )

    async def forward_local_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> Forward:
        """A local port reaching the box's port; RemoteError naming why where the transport has none."""
        await self._ready(30.0)
        fwd = await self.transport.forward(remote_port, remote_host)
        if fwd is None:
            raise RemoteError(f"{self.name}: no forward: {self.transport.no_forward_reason(remote_host)}")
        return fwd


class StepBoxClient(BoxClient):
    """A box client whose servers run as job steps (api.JobSteps): a Slurm node."""

    def __init__(self, transport: StepTransport, **kw: Any) -> None:
        super().__init__(transport, **kw)
        self.steps = transport

    async def launch_step(
        self, argv: Sequence[str], *, name: str, timeout: float = 30.0
    ) -> tuple[RunResult, str]:
        await self._ready(timeout)
        rc, out, step = await self.steps.launch_step(argv, name=name, timeout=timeout)
        return RunResult(exit_status=rc, stdout=out), step

    async def cancel_step(self, step: str) -> None:
        await self.steps.cancel_step(step)
