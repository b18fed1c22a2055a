"""SSHRemote: one self-healing asyncssh connection per host, implementing the Remote API.

- A supervisor task connects, watches the connection, and reconnects with capped exponential
  backoff (0.5 s doubling to 30 s).  asyncssh never reconnects and has keepalive off by default:
  both are ours.  State changes go to listeners, so a dead host only changes its own row.
- Short requests go through the resident helper (box_helper.py) on one long-lived channel;
  boxes without python3 fall back to one exec channel per request.
- Long work (streams) gets its own exec channel under a session-slot limiter that learns the
  server's MaxSessions when an open fails, and queues the rest.  Each stream runs under a
  stdin-EOF watchdog so closing it ends the remote command even where signals are ignored.
- Host keys are verified against known_hosts on every connect (see hostkeys.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path

import asyncssh

from specdebug.remote import hostkeys
from specdebug.remote.api import (
    ConnectionDropped,
    ConnState,
    ConnStatus,
    FileRead,
    HostKeyRefused,
    NotConnected,
    ProcInfo,
    RemoteError,
    RequestTimeout,
    RunResult,
)
from specdebug.remote.hostkeys import HostKeyInfo, KeyDecision
from specdebug.remote.hostspec import HostSpec, ResolvedHost, resolve
from specdebug.remote.shell import sh_join, watchdog_command, with_env_cwd

log = logging.getLogger("specdebug.remote")

HostKeyCallback = Callable[[HostKeyInfo], Awaitable[KeyDecision]]
BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0
_CONNECT_ERRORS = (OSError, asyncssh.Error, TimeoutError, asyncio.TimeoutError)


def _helper_command() -> str:
    """python3 -c with the helper compressed: short in `ps` output, no quoting surprises."""
    import zlib

    source = resources.files("specdebug.remote").joinpath("box_helper.py").read_text()
    packed = base64.b64encode(zlib.compress(source.encode(), 9)).decode()
    boot = f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{packed}')))"
    return sh_join(["python3", "-u", "-c", boot])


async def refuse_unknown_keys(info: HostKeyInfo) -> KeyDecision:
    return KeyDecision.REFUSE


async def accept_and_save_keys(info: HostKeyInfo) -> KeyDecision:
    return KeyDecision.SAVE


class _SlotLimiter:
    """Counts open exec channels; shrinks its limit to what the server really allows.

    A refusal right after one of our channels closed is sshd still tearing that session down,
    not a lower MaxSessions, so it only waits; the learned limit starts over on each connection."""

    RELEASE_GRACE_S = 1.0

    def __init__(self, limit: int) -> None:
        self.initial = self.limit = max(1, limit)
        self.open = 0
        self._last_release = 0.0
        self._cond = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.open < self.limit)
            self.open += 1

    async def release(self) -> None:
        async with self._cond:
            self.open -= 1
            self._last_release = time.monotonic()
            self._cond.notify_all()

    async def server_refused(self) -> None:
        """An open failed with 'open failed': a session is still closing, or MaxSessions is lower."""
        async with self._cond:
            self.open -= 1
            if time.monotonic() - self._last_release > self.RELEASE_GRACE_S:
                self.limit = max(1, min(self.limit, self.open))
            self._cond.notify_all()

    def reset(self) -> None:
        self.limit = self.initial


class _ProbeChannel:
    """The resident helper on one channel: JSON-line requests, answered by id, overlapping."""

    def __init__(self, proc: asyncssh.SSHClientProcess) -> None:
        self.proc = proc
        self._next = 1
        self._pending: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self.closed = asyncio.Event()

    async def start(self, timeout: float = 15.0) -> dict:
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            err = await self._stderr_tail()
            raise RemoteError(f"probe helper did not start: {err or 'no output'}")
        hello = json.loads(line)
        if hello.get("hello") != "specdebug-helper":
            raise RemoteError("probe helper sent an unexpected greeting")
        self._reader = asyncio.create_task(self._read_loop())
        return hello

    async def _stderr_tail(self) -> str:
        with contextlib.suppress(Exception):
            data = await asyncio.wait_for(self.proc.stderr.read(4096), 1.0)
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
        except (asyncssh.Error, OSError):
            pass
        finally:
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionDropped("connection lost during a probe request"))
            self._pending.clear()

    async def request(self, op: str, wait_s: float | None, **fields: object) -> dict:
        if self.closed.is_set():
            raise ConnectionDropped("probe channel is closed")
        rid = self._next
        self._next += 1
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        payload = json.dumps({"id": rid, "op": op, **fields}, separators=(",", ":")) + "\n"
        try:
            self.proc.stdin.write(payload.encode())
        except (asyncssh.Error, OSError, BrokenPipeError) as exc:
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
        with contextlib.suppress(Exception):
            self.proc.stdin.write_eof()
        with contextlib.suppress(Exception):
            self.proc.close()
        if self._reader:
            self._reader.cancel()


class SSHStream:
    """A long-running remote command on its own channel (see api.Stream)."""

    def __init__(self, remote: SSHRemote, argv: Sequence[str], *, binary: bool, merge_stderr: bool) -> None:
        self._remote = remote
        self._command = watchdog_command(argv, merge_stderr=merge_stderr)
        self._binary = binary
        self._proc: asyncssh.SSHClientProcess | None = None
        self._holding_slot = False
        self._closed = False
        self.exit_status: int | None = None

    async def _open(self) -> None:
        self._proc = await self._remote.open_exec(self._command)
        self._holding_slot = True

    def __aiter__(self):
        return self._iterate()

    def chunks(self, size: int = 1 << 16):
        """Raw bytes in blocks of up to `size` as they arrive: for readers that split records
        themselves (one await per block instead of one per line)."""
        return self._iterate(size)

    async def _iterate(self, chunk: int = 0):
        if self._proc is None:
            await self._open()
        assert self._proc is not None
        try:
            while True:
                try:
                    if chunk:
                        line = await self._proc.stdout.read(chunk)
                    else:
                        line = await self._proc.stdout.readline()
                except asyncssh.ConnectionLost as exc:
                    raise ConnectionDropped(
                        f"{self._remote.name}: connection lost during stream: {exc}"
                    ) from exc
                except asyncssh.DisconnectError as exc:
                    raise ConnectionDropped(
                        f"{self._remote.name}: disconnected during stream: {exc}"
                    ) from exc
                if not line:
                    break
                if self._binary or chunk:
                    yield line
                else:
                    yield line.decode("utf-8", "replace").rstrip("\r\n")
            await self._finish()
        finally:
            await self.aclose()

    async def _finish(self) -> None:
        assert self._proc is not None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._proc.wait_closed(), 5.0)
        self.exit_status = self._proc.exit_status
        if self.exit_status is None and self._remote.conn_lost_since(self._proc):
            raise ConnectionDropped(f"{self._remote.name}: connection lost during stream")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._proc is not None:
            with contextlib.suppress(Exception):
                self._proc.stdin.write_eof()  # watchdog sees EOF and ends the remote group
            with contextlib.suppress(Exception):
                self._proc.close()
            # the server frees the session slot only once the channel is closed on its side
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait_closed(), 2.0)
        if self._holding_slot:
            self._holding_slot = False
            await self._remote.release_slot()

    async def __aenter__(self) -> SSHStream:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _SSHForward:
    """A local forward that the remote re-creates on the same local port after a reconnect."""

    def __init__(self, remote: SSHRemote, remote_host: str, remote_port: int) -> None:
        self._remote = remote
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.local_port = 0
        self._listener: asyncssh.SSHListener | None = None

    async def bind(self, conn: asyncssh.SSHClientConnection) -> None:
        self._listener = await conn.forward_local_port(
            "127.0.0.1", self.local_port, self.remote_host, self.remote_port
        )
        self.local_port = self._listener.get_port()

    def unbind(self) -> None:
        """The connection went: the listener went with it (bound again on the next connect)."""
        self._listener = None

    async def close(self) -> None:
        self._remote.forget_forward(self)
        if self._listener is not None:
            self._listener.close()
            self._listener = None


class SSHRemote:
    """One host.  Create, `await start()`, use the Remote API, `await close()`."""

    def __init__(
        self,
        spec: str | HostSpec,
        *,
        ssh_config: str | Path | None = None,
        on_host_key: HostKeyCallback = refuse_unknown_keys,
        max_sessions: int = 10,
        connect_timeout: float = 10.0,
        keepalive_interval: float = 5.0,
        keepalive_count_max: int = 3,
        use_helper: bool = True,
        state_dir: str | None = None,
    ) -> None:
        self.spec = spec if isinstance(spec, HostSpec) else HostSpec.parse(spec, ssh_config)
        self.name = self.spec.text
        self.resolved: ResolvedHost = resolve(self.spec)
        self.warnings = list(self.resolved.warnings)
        # box-side folder of server records (None: ~/.specdebug/servers on the box); the client's
        # SPECDEBUG_STATE_DIR is the default, so tests and demos keep their own records
        self.state_dir = state_dir or os.environ.get("SPECDEBUG_STATE_DIR") or None
        self._on_host_key = on_host_key
        self._connect_timeout = connect_timeout
        self._keepalive = self.resolved.keepalive_interval or keepalive_interval
        self._keepalive_count = keepalive_count_max
        self._use_helper = use_helper
        self._slots = _SlotLimiter(max_sessions - 1)  # one session is the probe channel
        self._status = ConnStatus(ConnState.CONNECTING)
        self._listeners: list[Callable[[ConnStatus], None]] = []
        self._conn: asyncssh.SSHClientConnection | None = None
        self._probe: _ProbeChannel | None = None
        self._connected = asyncio.Event()
        self._settled = asyncio.Event()  # first attempt finished (success or terminal failure)
        self._supervisor: asyncio.Task | None = None
        self._closing = False
        self._once_keys: list[asyncssh.SSHKey] = []
        self._forwards: set[_SSHForward] = set()
        self._generation = 0
        self._failed_ev: asyncio.Event | None = None  # made on first use (needs the running loop)
        self.helper_info: dict | None = None

    # ---- state -------------------------------------------------------------------------------
    @property
    def status(self) -> ConnStatus:
        return self._status

    @property
    def generation(self) -> int:
        """Counts successful connects: a change means a reconnect (cached facts may be stale)."""
        return self._generation

    def subscribe(self, listener: Callable[[ConnStatus], None]) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):  # already gone: unsubscribing twice is harmless
                self._listeners.remove(listener)

        return unsubscribe

    def _set_status(self, status: ConnStatus) -> None:
        self._status = status
        for cb in list(self._listeners):
            try:
                cb(status)
            except Exception:  # a listener's bug must not stop the connection (or the other listeners)
                log.debug("%s: status listener %r failed", self.name, cb, exc_info=True)

    async def start(self) -> None:
        """Begin connecting in the background (never blocks on a slow host)."""
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name=f"ssh:{self.name}")

    async def restart(self) -> None:
        """Try again after a terminal failure (refused host key, failed auth) once the user fixed it."""
        if self._supervisor is not None and not self._supervisor.done():
            return
        self._failure = None
        self._failed_event.clear()
        # keys accepted "once" stay this session's keys for the host: a retry never turns a
        # changed key into an "unknown" one that could be accepted again
        self._supervisor = None
        await self.start()

    async def wait_connected(self, timeout: float | None = None) -> None:
        await self.start()

        async def _wait() -> None:
            while not self._connected.is_set():
                if self._status.state is ConnState.FAILED:
                    raise self._failure or NotConnected(f"{self.name}: {self._status.last_error}")
                waiter = asyncio.create_task(self._connected.wait())
                failed = asyncio.create_task(self._failed_event.wait())
                try:
                    await asyncio.wait({waiter, failed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                    failed.cancel()

        try:
            await asyncio.wait_for(_wait(), timeout)
        except TimeoutError as exc:
            raise NotConnected(
                f"{self.name}: not connected after {timeout} s ({self._status.state.value}"
                f"{': ' + self._status.last_error if self._status.last_error else ''})"
            ) from exc

    _failure: Exception | None = None

    @property
    def _failed_event(self) -> asyncio.Event:
        if self._failed_ev is None:
            self._failed_ev = asyncio.Event()
        return self._failed_ev

    def _fail(self, exc: Exception) -> None:
        self._failure = exc
        self._set_status(ConnStatus(ConnState.FAILED, last_error=str(exc)))
        self._failed_event.set()

    # ---- connecting --------------------------------------------------------------------------
    def _connect_kwargs(self) -> dict:
        r = self.resolved
        kwargs: dict = dict(
            config=r.config_paths or None,
            connect_timeout=self._connect_timeout,
            keepalive_interval=self._keepalive,
            keepalive_count_max=self._keepalive_count,
        )
        if self.spec.user:
            kwargs["username"] = self.spec.user
        if self.spec.port:
            kwargs["port"] = self.spec.port
        known = [str(p) for p in r.known_hosts if p.is_file()]
        if self._once_keys:
            kwargs["known_hosts"] = (self._once_keys, [], [])
        elif known:
            kwargs["known_hosts"] = known
        else:
            kwargs["known_hosts"] = ([], [], [])  # nothing trusted yet: every key is unknown
        return kwargs

    async def _connect_once(self) -> asyncssh.SSHClientConnection:
        try:
            return await asyncssh.connect(self.spec.host, **self._connect_kwargs())
        except asyncssh.HostKeyNotVerifiable:
            pass
        # unknown or changed: fetch the key ourselves and tell the two apart
        r = self.resolved
        key = await asyncssh.get_server_host_key(
            self.spec.host, self.spec.port or (), config=r.config_paths or None
        )
        if key is None:
            raise RemoteError(f"{self.name}: server offered no host key")
        changed = hostkeys.classify(key, r.hostname, r.port, r.known_hosts) or hostkeys.differs_from_session(
            key, self._once_keys
        )
        info = hostkeys.describe(self.name, r.hostname, r.port, key, changed)
        if changed:
            raise HostKeyRefused(
                hostkeys.refusal_message(info, r.known_hosts),
                host=self.name,
                key_type=info.key_type,
                fingerprint=info.fingerprint,
                changed=True,
            )
        decision = await self._on_host_key(info)
        if decision is KeyDecision.REFUSE:
            raise HostKeyRefused(
                hostkeys.refusal_message(info),
                host=self.name,
                key_type=info.key_type,
                fingerprint=info.fingerprint,
                changed=False,
            )
        if decision is KeyDecision.SAVE:
            hostkeys.save_key(info, r.known_hosts[0])
        else:
            self._once_keys = [key]
        return await asyncssh.connect(self.spec.host, **self._connect_kwargs())

    async def _supervise(self) -> None:
        attempt = 0
        delay = BACKOFF_START_S
        last_error: str | None = None
        while not self._closing:
            attempt += 1
            state = ConnState.CONNECTING if self._generation == 0 else ConnState.RECONNECTING
            self._set_status(ConnStatus(state, attempt=attempt, last_error=last_error))
            try:
                conn = await self._connect_once()
                await self._setup(conn)
            except (HostKeyRefused, asyncssh.PermissionDenied) as exc:
                msg = (
                    str(exc)
                    if isinstance(exc, HostKeyRefused)
                    else f"{self.name}: authentication failed ({exc})"
                )
                self._fail(exc if isinstance(exc, HostKeyRefused) else NotConnected(msg))
                self._settled.set()
                return
            except asyncio.CancelledError:
                raise
            except (*_CONNECT_ERRORS, RemoteError) as exc:
                last_error = _describe_error(exc)
                log.info("%s: connect attempt %d failed: %s", self.name, attempt, last_error)
                self._settled.set()
                self._set_status(ConnStatus(ConnState.RECONNECTING, attempt=attempt, last_error=last_error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP_S)
                continue
            # connected
            self._generation += 1
            attempt = 0
            delay = BACKOFF_START_S
            self._settled.set()
            self._set_status(ConnStatus(ConnState.CONNECTED))
            self._connected.set()
            rtt = await self._measure_rtt()
            self._set_status(ConnStatus(ConnState.CONNECTED, rtt_ms=rtt))
            last_error = await self._watch(conn)
            self._connected.clear()
            self._teardown()
            if self._closing:
                break
        self._set_status(ConnStatus(ConnState.CLOSED))

    async def _setup(self, conn: asyncssh.SSHClientConnection) -> None:
        self._conn = conn
        self._probe = None
        self._slots.reset()
        if self._use_helper:
            try:
                proc = await conn.create_process(_helper_command(), encoding=None)
                probe = _ProbeChannel(proc)
                self.helper_info = await probe.start()
                self._probe = probe
            except (RemoteError, asyncssh.Error, OSError, ValueError, TimeoutError) as exc:
                log.warning(
                    "%s: resident helper unavailable (%s); using one exec channel per request", self.name, exc
                )
                self.warnings.append(
                    f"no python3 helper on the box ({exc}); probes use exec channels (slower)"
                )
        for fwd in list(self._forwards):
            try:
                await fwd.bind(conn)
            except (asyncssh.Error, OSError) as exc:
                self.warnings.append(f"forward to port {fwd.remote_port} could not be restored: {exc}")

    async def _watch(self, conn: asyncssh.SSHClientConnection) -> str | None:
        """Wait until the connection ends; refresh the RTT figure meanwhile."""
        closed = asyncio.create_task(conn.wait_closed())
        try:
            while True:
                done, _ = await asyncio.wait({closed}, timeout=5.0)
                if done:
                    break
                if self._probe is not None and self._probe.closed.is_set():
                    conn.close()  # helper died: rebuild everything
                    continue
                rtt = await self._measure_rtt()
                if rtt is not None and self._status.state is ConnState.CONNECTED:
                    self._set_status(ConnStatus(ConnState.CONNECTED, rtt_ms=rtt))
        finally:
            closed.cancel()
        return "connection lost"

    def _teardown(self) -> None:
        if self._probe is not None:
            self._probe.close()
        self._probe = None
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        for fwd in self._forwards:
            fwd.unbind()

    async def _measure_rtt(self) -> float | None:
        if self._probe is None:
            return None
        try:
            t0 = time.perf_counter()
            await self._probe.request("ping", 5.0)
            return (time.perf_counter() - t0) * 1000
        except RemoteError:
            return None

    async def release_slot(self) -> None:
        """Give back the session slot an exec channel from `open_exec` held."""
        await self._slots.release()

    def forget_forward(self, fwd: _SSHForward) -> None:
        """A forward closed by its owner is not bound again on reconnect."""
        self._forwards.discard(fwd)

    def conn_lost_since(self, proc: asyncssh.SSHClientProcess) -> bool:
        return self._conn is None or self._conn is not proc.channel.get_connection()

    async def close(self) -> None:
        self._closing = True
        for fwd in list(self._forwards):
            await fwd.close()
        self._teardown()
        if self._supervisor is not None:
            self._supervisor.cancel()
            try:
                await self._supervisor
            except asyncio.CancelledError:
                pass
            except Exception:  # the supervisor's own bug: closing goes on, the traceback is kept
                log.debug("%s: supervisor ended with an error", self.name, exc_info=True)
        self._set_status(ConnStatus(ConnState.CLOSED))

    # ---- Remote API ----------------------------------------------------------------------------
    async def _ready(self, timeout: float | None) -> asyncssh.SSHClientConnection:
        if not self._connected.is_set():
            await self.wait_connected(timeout if timeout is not None else 30.0)
        if self._conn is None:
            raise NotConnected(f"{self.name}: not connected")
        return self._conn

    async def open_exec(self, command: str) -> asyncssh.SSHClientProcess:
        """Open an exec channel, queueing under the session limit; learns MaxSessions."""
        await self._slots.acquire()
        for attempt in range(200):
            try:
                conn = await self._ready(None)
                return await conn.create_process(command, encoding=None)
            except asyncssh.ChannelOpenError as exc:
                if exc.code != asyncssh.OPEN_CONNECT_FAILED:
                    await self._slots.release()
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
            )
        return await self._run_exec(with_env_cwd(argv, env, cwd), timeout=timeout, input=input)

    async def _run_exec(
        self, argv: Sequence[str], *, timeout: float | None, input: bytes | None
    ) -> RunResult:
        # with input the command reads stdin itself, so it cannot sit under the stdin watchdog
        command = sh_join(argv) if input is not None else watchdog_command(argv)
        proc = await self.open_exec(command)
        try:
            if input is not None:
                proc.stdin.write(input)
                proc.stdin.write_eof()
            try:
                out, err = await asyncio.wait_for(
                    asyncio.gather(proc.stdout.read(), proc.stderr.read()), timeout
                )
            except TimeoutError:
                return RunResult(exit_status=None, timed_out=True)
            await proc.wait_closed()
            return RunResult(exit_status=proc.exit_status, stdout=out, stderr=err)
        finally:
            with contextlib.suppress(Exception):
                proc.stdin.write_eof()
            with contextlib.suppress(Exception):
                proc.close()
            await self._slots.release()

    async def read_files(self, paths: Sequence[str], *, max_bytes: int = 1 << 20) -> list[FileRead]:
        await self._ready(30.0)
        if self._probe is not None:
            resp = await self._probe.request("read", 30.0, paths=list(paths), offset=0, max=max_bytes)
            return [_file_read(f) for f in resp["files"]]
        # no helper: every file in one exec channel (one shell start-up, not one per file)
        r = await self._run_exec(
            ["sh", "-c", _READ_FILES_SH, "sh", str(max_bytes), *paths], timeout=30.0, input=None
        )
        if not r.ok:
            raise RemoteError(f"{self.name}: cannot read files: {(r.err or r.out).strip()[:300]}")
        return _parse_read_files(list(paths), r.stdout)

    async def read_file(self, path: str, *, offset: int = 0, max_bytes: int = 1 << 20) -> bytes:
        await self._ready(30.0)
        if self._probe is not None:
            resp = await self._probe.request("read", 30.0, paths=[path], offset=offset, max=max_bytes)
            f = _file_read(resp["files"][0])
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
            )
            f = FileRead(path, data=r.stdout) if r.ok else FileRead(path, error=_errname(r.err))
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

    async def forward_local_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> _SSHForward:
        conn = await self._ready(30.0)
        fwd = _SSHForward(self, remote_host, remote_port)
        await fwd.bind(conn)
        self._forwards.add(fwd)
        return fwd

    # ---- test / fault helpers ------------------------------------------------------------------
    def drop_connection(self) -> None:
        """Abort the transport as a network fault would (used by tests and the demo)."""
        if self._conn is not None:
            self._conn.abort()


def _file_read(f: dict) -> FileRead:
    if "error" in f:
        return FileRead(f["path"], error=f["error"])
    return FileRead(f["path"], data=base64.b64decode(f["data"]))


# prints, per path: `@ok I` and the bytes as base64 lines, or `@err I MESSAGE` (base64 never starts with @)
_READ_FILES_SH = (
    'max=$1; shift; i=0; for p in "$@"; do '
    'if [ -r "$p" ] && [ ! -d "$p" ]; then printf \'@ok %s\\n\' "$i"; head -c "$max" -- "$p" | base64; '
    'else printf \'@err %s %s\\n\' "$i" "$(if [ -d "$p" ]; then echo EISDIR; else head -c 0 -- "$p" 2>&1 | head -n 1; fi)"; fi; '
    "i=$((i+1)); done"
)


def _parse_read_files(paths: list[str], out: bytes) -> list[FileRead]:
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
            results[int(idx)] = FileRead(paths[int(idx)], error=_errname(" ".join(msg) or "cannot read"))
        elif current is not None:
            current[1].append(line.strip())
    flush()
    return [results.get(i, FileRead(p, error="error")) for i, p in enumerate(paths)]


def _errname(text: str) -> str:
    low = text.lower()
    if "no such file" in low:
        return "ENOENT"
    if "permission denied" in low:
        return "EACCES"
    return text.strip() or "error"


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "connect timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    text = str(exc) or type(exc).__name__
    return text
