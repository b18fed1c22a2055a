"""The client of the resident probe helper (specdebug/box/helper.py), and the decoding of file reads.

Transport-neutral: the channel talks to a transport's Process (stdin, stdout, stderr, close), so
SSH, srun and this machine share it, as a later `kubectl exec -i` transport will.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from specdebug.remote.api import ConnectionDropped, FileRead, RemoteError, RequestTimeout
from specdebug.remote.boxcode import FRAME, SPAWN_WAIT_S, source
from specdebug.remote.boxcode import helper_argv as helper_argv  # the argv that starts it
from specdebug.remote.lines import BoundedLines, LineTooLong
from specdebug.transport.base import Process
from specdebug.transport.teardown import best_effort

HELPER_START_S = 10.0  # a python3 that has not greeted by then is ended (connects go on without it)
PROBE_LINE_MAX = 96 << 20  # the helper's answers are bounded (runs 2 x 8 MiB, reads 64 MiB) in base64
NOISE_KEPT = 3
NOISE_MAX_BYTES = 1 << 20  # printed by the box after our spawn frame (python3's start-up, a wrapper)
# printed before it: the login's own output (a 1.3 MB welcome text was seen); the start's deadline
# (HELPER_START_S) bounds the time, this the bytes, and only NOISE_KEPT lines are held
LOGIN_NOISE_MAX_BYTES = 64 << 20


class HelperStartFailed(RemoteError):
    """The helper did not greet; `pid` (when told) is the process to end on the box."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class ProbeChannel:
    """The resident helper on one channel: JSON-line requests, answered by id, overlapping."""

    def __init__(self, proc: Process, errors: tuple[type[BaseException], ...] = (OSError,)) -> None:
        self.proc = proc
        self._errors = errors  # what the transport raises when it breaks (asyncssh.Error for SSH)
        self._lines = BoundedLines(proc.stdout, PROBE_LINE_MAX, refuse=True)
        self._next = 1
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.spawned_pid: int | None = None  # the helper's PID on the box, told before it starts
        self.noise: list[str] = []  # first lines the box printed outside the protocol (skipped)
        self.noise_count = 0
        self._noise_bytes = 0  # after the spawn frame
        self._login_noise_bytes = 0  # before it: what the login printed

    def _note_noise(self, text: str) -> None:
        if not text.strip():
            return
        self.noise_count += 1
        if self.spawned_pid is None:
            self._login_noise_bytes += len(text)
        else:
            self._noise_bytes += len(text)
        if len(self.noise) < NOISE_KEPT:
            self.noise.append(text.rstrip("\r\n")[:200])

    def _frame(self, line: bytes) -> Any:
        """The JSON object of one framed line (None for a line that is not ours: noted as noise)."""
        text = line.decode("utf-8", "replace")
        at = text.find(FRAME)
        if at < 0:
            self._note_noise(text)
            return None
        self._note_noise(text[:at])
        try:
            return json.loads(text[at + len(FRAME) :])
        except ValueError:
            self._note_noise(text)
            return None

    async def start(self, timeout: float = HELPER_START_S) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(self._greeting(), timeout)
        except TimeoutError as exc:
            if self.spawned_pid is None:  # a slow session start: learn what to end before giving up
                with best_effort("wait for the probe helper's PID"):
                    await asyncio.wait_for(self._spawn_frame(), SPAWN_WAIT_S)
            pid = f" (PID {self.spawned_pid})" if self.spawned_pid else ""
            raise HelperStartFailed(
                f"python3 on the box{pid} did not answer within {timeout:g} s", self.spawned_pid
            ) from exc

    async def _spawn_frame(self) -> None:
        while self.spawned_pid is None:
            line = await self._lines.readline()
            if not line:
                return
            told = self._frame(line)
            if isinstance(told, dict) and isinstance(told.get("spawned"), int):
                self.spawned_pid = told["spawned"]

    async def _greeting(self) -> dict[str, Any]:
        while True:
            try:
                line = await self._lines.readline()
            except LineTooLong as exc:
                raise HelperStartFailed(
                    f"probe helper did not start: {exc} before its greeting", None
                ) from exc
            if not line:
                err = await self._stderr_tail()
                if not err and self.spawned_pid is None:  # SPAWN_SH never ran: the login did not hand over
                    raise HelperStartFailed(await self._login_ended(), None)
                raise HelperStartFailed(f"probe helper did not start: {err or 'no output'}", self.spawned_pid)
            if self._noise_bytes > NOISE_MAX_BYTES or self._login_noise_bytes > LOGIN_NOISE_MAX_BYTES:
                over, who = (
                    (NOISE_MAX_BYTES, "python3 printed")
                    if self._noise_bytes > NOISE_MAX_BYTES
                    else (LOGIN_NOISE_MAX_BYTES, "the login printed")
                )
                raise HelperStartFailed(
                    f"probe helper did not start: {who} over {over} bytes of other output first",
                    self.spawned_pid,
                )
            hello = self._frame(line)
            if isinstance(hello, dict) and isinstance(hello.get("spawned"), int):
                self.spawned_pid = hello["spawned"]
                continue
            if hello is None:
                continue
            if not isinstance(hello, dict) or hello.get("hello") != "specdebug-helper":
                raise HelperStartFailed("probe helper sent an unexpected greeting", self.spawned_pid)
            self._reader = asyncio.create_task(self._read_loop())
            return hello

    async def _login_ended(self) -> str:
        """Why: a login whose ~/.bashrc runs `exit 0` ends the session before the helper's command,
        silently; "no output" then read as a box without python3."""
        status = None
        with best_effort("read the session's exit status"):
            status = await asyncio.wait_for(self.proc.wait(), 1.0)
        shown = f" with status {status}" if status is not None else ""
        printed = f", after printing {self.noise_count} line(s)" if self.noise_count else ""
        return f"the box's login shell ended{shown} before running the probe helper{printed}"

    async def _stderr_tail(self) -> str:
        with best_effort("read the probe helper's stderr"):
            data: bytes = await asyncio.wait_for(self.proc.stderr.read(4096), 1.0)
            return data.decode("utf-8", "replace").strip()
        return ""

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self._lines.readline()
                if not line:
                    break
                resp = self._frame(line)
                if not isinstance(resp, dict):
                    continue
                rid = resp.get("id")
                fut = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if fut and not fut.done():
                    fut.set_result(resp)
        except self._errors + (LineTooLong,):
            pass  # a line past the bound is a broken channel: it closes, a reconnect rebuilds it
        finally:
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionDropped("connection lost during a probe request"))
            self._pending.clear()

    async def request(self, op: str, wait_s: float | None, **fields: object) -> dict[str, Any]:
        if self.closed.is_set():
            raise ConnectionDropped("probe channel is closed")
        rid = self._next
        self._next += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        payload = json.dumps({"id": rid, "op": op, **fields}, separators=(",", ":")) + "\n"
        try:
            self.proc.stdin.write(payload.encode())
        except self._errors + (OSError,) as exc:
            self._pending.pop(rid, None)
            raise ConnectionDropped(f"probe channel write failed: {exc}") from exc
        try:
            # the helper enforces run timeouts itself; this is the backstop for a wedged channel
            backstop = None if wait_s is None else wait_s + 5.0
            resp = await asyncio.wait_for(fut, backstop)
        except TimeoutError as exc:
            self._pending.pop(rid, None)
            raise RequestTimeout(f"{op} request timed out after {wait_s} s") from exc
        if not resp.get("ok"):
            raise RemoteError(f"probe helper: {resp.get('error')}")
        return resp

    def close(self) -> None:
        with best_effort("EOF to the probe helper"):
            self.proc.stdin.write_eof()
        with best_effort("close the probe helper's channel"):
            self.proc.close()
        if self._reader:
            self._reader.cancel()


def file_read(f: dict[str, Any]) -> FileRead:
    if "error" in f:
        return FileRead(f["path"], error=f["error"])
    return FileRead(f["path"], data=base64.b64decode(f["data"]))


# the helper-less file reader: `sh -c READ_FILES_SH sh MAX PATH...` (framing in the file's comment)
READ_FILES_SH = source("read_files.sh")


def parse_read_files(paths: list[str], out: bytes) -> list[FileRead]:
    results: dict[int, FileRead] = {}
    current: tuple[int, list[bytes]] | None = None

    def flush() -> None:
        if current is not None:
            results[current[0]] = FileRead(paths[current[0]], data=base64.b64decode(b"".join(current[1])))

    for line in out.splitlines():
        if line.startswith(b"@ok "):
            flush()
            current = (int(line.split()[1]), [])
        elif line.startswith(b"@err "):
            flush()
            current = None
            _, idx, *msg = line.decode("utf-8", "replace").split(" ", 2)
            results[int(idx)] = FileRead(paths[int(idx)], error=errname(" ".join(msg) or "cannot read"))
        elif current is not None:
            current[1].append(line.strip())
    flush()
    return [results.get(i, FileRead(p, error="error")) for i, p in enumerate(paths)]


def errname(text: str) -> str:
    low = text.lower()
    if "no such file" in low:
        return "ENOENT"
    if "permission denied" in low:
        return "EACCES"
    return text.strip() or "error"
