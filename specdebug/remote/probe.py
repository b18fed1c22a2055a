"""The client of the resident probe helper (specdebug/box/helper.py), and the decoding of file reads.

Transport-neutral: the channel talks to a reader/writer pair (an object with stdin, stdout, stderr
and close, like an asyncssh process), so a `kubectl exec -i` or `srun` transport can reuse it.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any, Protocol

from specdebug.remote.api import ConnectionDropped, FileRead, RemoteError, RequestTimeout
from specdebug.remote.boxcode import helper_command as helper_command  # the command that starts it
from specdebug.remote.boxcode import source
from specdebug.remote.teardown import best_effort


class ProbeTransport(Protocol):
    """A reader/writer pair to the helper: an asyncssh process, or any other pipe to the box.

    stdout/stderr need `readline()`/`read(n)` coroutines, stdin `write(bytes)` and `write_eof()`."""

    @property
    def stdin(self) -> Any: ...

    @property
    def stdout(self) -> Any: ...

    @property
    def stderr(self) -> Any: ...

    def close(self) -> None: ...


class ProbeChannel:
    """The resident helper on one channel: JSON-line requests, answered by id, overlapping."""

    def __init__(self, proc: ProbeTransport, errors: tuple[type[BaseException], ...] = (OSError,)) -> None:
        self.proc = proc
        self._errors = errors  # what the transport raises when it breaks (asyncssh.Error for SSH)
        self._next = 1
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    async def start(self, timeout: float = 15.0) -> dict[str, Any]:
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            err = await self._stderr_tail()
            raise RemoteError(f"probe helper did not start: {err or 'no output'}")
        hello = json.loads(line)
        if not isinstance(hello, dict) or hello.get("hello") != "specdebug-helper":
            raise RemoteError("probe helper sent an unexpected greeting")
        self._reader = asyncio.create_task(self._read_loop())
        return hello

    async def _stderr_tail(self) -> str:
        with best_effort("read the probe helper's stderr"):
            data: bytes = await asyncio.wait_for(self.proc.stderr.read(4096), 1.0)
            return data.decode("utf-8", "replace").strip()
        return ""

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                try:
                    resp = json.loads(line)
                except ValueError:
                    continue
                fut = self._pending.pop(resp.get("id"), None)
                if fut and not fut.done():
                    fut.set_result(resp)
        except self._errors:
            pass
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
