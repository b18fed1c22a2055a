"""The Remote API calls of an SSH host: run, file reads, process listing, streams, forwards.

Each goes through the probe helper when the box has one and falls back to exec channels under the
slot limiter otherwise.  A base class of SSHRemote, kept apart from its connect/reconnect supervisor.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import asyncssh

from specdebug.remote.api import ConnectionDropped, FileRead, ProcInfo, RemoteError, RunResult
from specdebug.remote.boxcode import (
    FRAME,
    SPAWN_ERR_SH,
    end_spawned_argv,
    framed_reply,
    noise_warning,
    once_argv,
    once_reply,
    spawned_pid,
)
from specdebug.remote.probe import READ_FILES_SH, ProbeChannel, errname, file_read, parse_read_files
from specdebug.remote.shell import sh_join, watchdog_command, with_env_cwd
from specdebug.remote.slots import SlotLimiter
from specdebug.remote.ssh_stream import SSHForward, SSHStream
from specdebug.remote.teardown import best_effort


class SSHRemoteAPI:
    """The Remote API on top of SSHRemote's live connection (see SSHRemote for the state)."""

    name: str
    warnings: list[str]
    _probe: ProbeChannel | None
    _slots: SlotLimiter
    _forwards: set[SSHForward]

    async def _ready(self, timeout: float | None) -> asyncssh.SSHClientConnection:
        """The live connection, waiting up to `timeout` for it (SSHRemote implements this)."""
        raise NotImplementedError

    def conn_lost_since(self, proc: asyncssh.SSHClientProcess[bytes]) -> bool:
        raise NotImplementedError

    async def release_slot(self) -> None:
        raise NotImplementedError

    def forget_forward(self, fwd: SSHForward) -> None:
        raise NotImplementedError

    async def _went_down(self, conn: asyncssh.SSHClientConnection) -> bool:
        """Whether `conn` is closing (a request it refused was refused by the drop, not the box)."""
        for _ in range(10):
            if conn.is_closed() or self._conn_now() is not conn:
                return True
            await asyncio.sleep(0.02)
        return False

    def _conn_now(self) -> asyncssh.SSHClientConnection | None:
        raise NotImplementedError

    # ---- Remote API ----------------------------------------------------------------------------
    async def open_exec(self, command: str) -> asyncssh.SSHClientProcess[bytes]:
        """Open an exec channel, queueing under the session limit; learns MaxSessions."""
        await self._slots.acquire()
        for attempt in range(200):
            try:
                conn = await self._ready(None)
                return await conn.create_process(command, encoding=None)
            except asyncssh.ChannelOpenError as exc:
                if exc.code != asyncssh.OPEN_CONNECT_FAILED:
                    await self._slots.release()
                    if await self._went_down(conn):  # refused because the link is going: a drop
                        raise ConnectionDropped(f"{self.name}: connection lost opening a channel") from exc
                    raise RemoteError(f"{self.name}: cannot open channel: {exc.reason}") from exc
                # MaxSessions reached on the server (or a slot not yet released): wait our turn
                await self._slots.server_refused()
                await asyncio.sleep(min(0.05 * (attempt + 1), 0.5))
                await self._slots.acquire()
            except (asyncssh.Error, OSError) as exc:
                await self._slots.release()
                raise ConnectionDropped(f"{self.name}: {exc}") from exc
            except BaseException:
                await self._slots.release()
                raise
        await self._slots.release()
        raise RemoteError(f"{self.name}: no SSH session slot became free")

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
        await self._ready(timeout)
        if self._probe is not None:
            resp = await self._probe.request(
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
        return await self._run_exec(with_env_cwd(argv, env, cwd), timeout=timeout, input=input)

    async def _run_exec(
        self, argv: Sequence[str], *, timeout: float | None, input: bytes | None, cap: int = 0
    ) -> RunResult:
        # with input the command reads stdin itself, so it cannot sit under the stdin watchdog: it
        # tells its PID first (on stderr), by which a command past its timeout is ended
        command = (
            sh_join(["sh", "-c", SPAWN_ERR_SH, "sh", *argv]) if input is not None else watchdog_command(argv)
        )
        proc = await self.open_exec(command)
        out, err = bytearray(), bytearray()
        ended = False
        try:
            if input is not None:
                proc.stdin.write(input)
                proc.stdin.write_eof()
            try:
                over = await asyncio.wait_for(_read_both(proc, out, err, cap or RUN_OUTPUT_MAX), timeout)
            except TimeoutError:
                ended = True
                return RunResult(exit_status=None, timed_out=True, stdout=bytes(out), stderr=_unspawn(err))
            if over:
                ended = True
                return RunResult(exit_status=None, stdout=bytes(out), stderr=_unspawn(err), truncated=True)
            await proc.wait_closed()
            return RunResult(exit_status=proc.exit_status, stdout=bytes(out), stderr=_unspawn(err))
        finally:
            if ended and input is not None:
                await self._end_timed_out(proc, err)
            with best_effort("%s: EOF to a finished command", self.name):
                proc.stdin.write_eof()
            with best_effort("%s: close a finished command's channel", self.name):
                proc.close()
            await self._slots.release()

    async def _end_timed_out(self, proc: Any, err: bytearray) -> None:
        """End a command that outran its timeout or its output bound (its PID is on stderr; a
        session slow to start is given a few seconds to tell it)."""
        with best_effort("%s: wait for a command's PID", self.name):
            async with asyncio.timeout(5.0):
                while spawned_pid(bytes(err)) is None:
                    data = await proc.stderr.read(1 << 16)
                    if not data:
                        break
                    err += data[: RUN_OUTPUT_MAX - len(err)]
        pid = spawned_pid(bytes(err))
        if pid is None:
            return
        with best_effort("%s: end a command past its bound (PID %s)", self.name, pid):
            conn = await self._ready(10.0)
            await asyncio.wait_for(conn.run(sh_join(end_spawned_argv(pid))), 10)

    async def read_files(self, paths: Sequence[str], *, max_bytes: int = 1 << 20) -> list[FileRead]:
        await self._ready(30.0)
        if self._probe is not None:
            resp = await self._probe.request("read", 30.0, paths=list(paths), offset=0, max=max_bytes)
            return [file_read(f) for f in resp["files"]]
        # no helper: every file in one exec channel (one shell start-up, not one per file)
        r = await self._run_exec(
            ["sh", "-c", READ_FILES_SH, "sh", str(max_bytes), *paths],
            timeout=30.0,
            input=None,
            cap=max(RUN_OUTPUT_MAX, len(paths) * (max_bytes * 4 // 3 + 4096)),  # base64 of each file
        )
        if not r.ok:
            raise RemoteError(f"{self.name}: cannot read files: {(r.err or r.out).strip()[:300]}")
        return parse_read_files(list(paths), r.stdout)

    async def read_file(self, path: str, *, offset: int = 0, max_bytes: int = 1 << 20) -> bytes:
        await self._ready(30.0)
        if self._probe is not None:
            resp = await self._probe.request("read", 30.0, paths=[path], offset=offset, max=max_bytes)
            f = file_read(resp["files"][0])
        else:
            r = await self._run_exec(
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
        await self._ready(30.0)
        if self._probe is None:
            raise RemoteError(f"{self.name}: process listing needs python3 on the box")
        want = {"match": match, "pgid": pgid, "root": root_pid, "pids": list(pids) or None}
        resp = await self._probe.request("ps", 30.0, **{k: v for k, v in want.items() if v is not None})
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
        await self._ready(timeout)
        if self._probe is not None:
            resp = await self._probe.request(op, timeout, args=dict(args))
            result: dict[str, Any] = resp["result"]
            return result
        r = await self._run_exec(once_argv(op), timeout=timeout, input=json.dumps(dict(args)).encode())
        if r.timed_out:
            raise RemoteError(
                f"box operation {op}: python3 on the box did not answer within {timeout} s (ended it)"
            )
        _, noise = framed_reply(r.stdout)
        if noise:
            note = noise_warning(noise)
            if note not in self.warnings:
                self.warnings.append(note)
        return once_reply(op, r)

    def stream(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        binary: bool = False,
        stderr: bool = False,
    ) -> SSHStream:
        return SSHStream(
            self, with_env_cwd([str(a) for a in argv], env, cwd), binary=binary, merge_stderr=stderr
        )

    def stream_with_input(self, argv: Sequence[str], *, binary: bool = False) -> SSHStream:
        """`stream` whose command reads what `SSHStream.send` writes; it must end at stdin's EOF
        itself (no watchdog around it).  Found by getattr: the follow agent's acknowledged flow
        control (core.logs.follow) where a remote offers it."""
        return SSHStream(self, [str(a) for a in argv], binary=binary, merge_stderr=False, with_input=True)

    async def forward_local_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> SSHForward:
        conn = await self._ready(30.0)
        fwd = SSHForward(self, remote_host, remote_port)
        try:
            await fwd.bind(conn)
        except (asyncssh.Error, OSError) as exc:
            if await self._went_down(conn):
                raise ConnectionDropped(f"{self.name}: connection lost opening a forward") from exc
            raise
        if self._conn_now() is not conn:  # bound on a link that went meanwhile: it would forward nothing
            await fwd.close()
            raise ConnectionDropped(f"{self.name}: connection lost opening a forward")
        self._forwards.add(fwd)
        return fwd


FRAME_B = FRAME.encode()
RUN_OUTPUT_MAX = 8 << 20  # bytes kept of a command's stdout and of its stderr (box/helper.py's bound)


async def _read_capped(stream: Any, sink: bytearray, cap: int = RUN_OUTPUT_MAX) -> bool:
    """Read a channel stream into `sink` (kept there if cut short); True when it passed the cap."""
    while True:
        data = await stream.read(1 << 16)
        if not data:
            return False
        sink += data[: cap + 1 - len(sink)]
        if len(sink) > cap:  # one byte past the cap: it printed more than is kept
            del sink[cap:]
            return True


async def _read_both(proc: Any, out: bytearray, err: bytearray, cap: int) -> bool:
    """stdout and stderr to their ends; True (and the other left) as soon as one passes the cap."""
    tasks = {
        asyncio.ensure_future(_read_capped(proc.stdout, out, cap)),
        asyncio.ensure_future(_read_capped(proc.stderr, err, cap)),
    }
    try:
        while tasks:
            done, tasks = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if any(t.result() for t in done):
                return True
        return False
    finally:
        for t in tasks:
            t.cancel()


def _unspawn(err: bytearray) -> bytes:
    """stderr without the PID frame SPAWN_ERR_SH wrote first."""
    data = bytes(err)
    at = data.find(FRAME_B)
    if at < 0:
        return data
    end = data.find(b"\n", at)
    return data[:at] + (data[end + 1 :] if end >= 0 else b"")
