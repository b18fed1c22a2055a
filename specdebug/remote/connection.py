"""SSHRemote: one self-healing asyncssh connection per host, implementing the Remote API.

- A supervisor task connects, watches the connection, and reconnects with capped exponential
  backoff (0.5 s doubling to 30 s).  asyncssh never reconnects and has keepalive off by default:
  both are ours.  State changes go to listeners, so a dead host only changes its own row.
- Short requests go through the resident helper (specdebug/box/helper.py) on one long-lived channel;
  boxes without python3 fall back to one exec channel per request.
- Long work (streams) gets its own exec channel under a session-slot limiter that learns the
  server's MaxSessions when an open fails, and queues the rest.  Each stream runs under a
  stdin-EOF watchdog so closing it ends the remote command even where signals are ignored.
- Host keys are verified against known_hosts on every connect (see hostkeys.py).

This module is the supervisor (connect, reconnect, state); the Remote API calls are in ssh_ops.py,
streams and forwards in ssh_stream.py, the probe client in probe.py, the slot limiter in slots.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncssh

from specdebug.remote import hostkeys
from specdebug.remote.api import ConnState, ConnStatus, HostKeyRefused, NotConnected, RemoteError
from specdebug.remote.helperstart import start_helper
from specdebug.remote.hostkeys import HostKeyInfo, KeyDecision
from specdebug.remote.hostspec import HostSpec, ResolvedHost, resolve
from specdebug.remote.probe import ProbeChannel
from specdebug.remote.slots import SlotLimiter
from specdebug.remote.ssh_ops import SSHRemoteAPI
from specdebug.remote.ssh_stream import SSHForward, SSHStream

log = logging.getLogger("specdebug.remote")

HostKeyCallback = Callable[[HostKeyInfo], Awaitable[KeyDecision]]
BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0
_CONNECT_ERRORS = (OSError, asyncssh.Error, TimeoutError, asyncio.TimeoutError)


async def refuse_unknown_keys(info: HostKeyInfo) -> KeyDecision:
    return KeyDecision.REFUSE


async def accept_and_save_keys(info: HostKeyInfo) -> KeyDecision:
    return KeyDecision.SAVE


class SSHRemote(SSHRemoteAPI):
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
        self._slots = SlotLimiter(max_sessions - 1)  # one session is the probe channel
        self._status = ConnStatus(ConnState.CONNECTING)
        self._listeners: list[Callable[[ConnStatus], None]] = []
        self._conn: asyncssh.SSHClientConnection | None = None
        self._probe: ProbeChannel | None = None
        self._connected = asyncio.Event()
        self._settled = asyncio.Event()  # first attempt finished (success or terminal failure)
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._once_keys: list[asyncssh.SSHKey] = []
        self._forwards: set[SSHForward] = set()
        self._generation = 0
        self._failed_ev: asyncio.Event | None = None  # made on first use (needs the running loop)
        self.helper_info: dict[str, Any] | None = None

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
                if self._closing:  # closed by its owner: it will not connect again
                    raise NotConnected(f"{self.name}: closed")
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
    def _connect_kwargs(self) -> dict[str, Any]:
        r = self.resolved
        kwargs: dict[str, Any] = dict(
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
            # the first RTT is measured before anyone is told "connected": a status without it
            # printed `rtt 0.0 ms` / `"rtt_ms": null` for a one-shot probe
            rtt = await self._measure_rtt()
            self._settled.set()
            self._set_status(ConnStatus(ConnState.CONNECTED, rtt_ms=rtt))
            self._connected.set()
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
            await self._start_helper(conn)
        for fwd in list(self._forwards):
            try:
                await fwd.bind(conn)
            except (asyncssh.Error, OSError) as exc:
                self.warnings.append(f"forward to port {fwd.remote_port} could not be restored: {exc}")

    async def _start_helper(self, conn: asyncssh.SSHClientConnection) -> None:
        """The resident helper, or a warning saying why not (specdebug.remote.helperstart)."""
        self._probe, self.helper_info = await start_helper(conn, self.name, self._warn)

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

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
        """One round trip in ms: a ping through the resident helper, or without one (one-shot
        probe) an SSH keepalive request, which the server answers itself (no process on the box)."""
        try:
            t0 = time.perf_counter()
            if self._probe is not None:
                await self._probe.request("ping", 5.0)
            elif self._conn is not None:
                await asyncio.wait_for(_keepalive_round_trip(self._conn), 5.0)
            else:
                return None
            return (time.perf_counter() - t0) * 1000
        except (RemoteError, asyncssh.Error, OSError, TimeoutError):
            return None

    async def release_slot(self) -> None:
        """Give back the session slot an exec channel from `open_exec` held."""
        await self._slots.release()

    def forget_forward(self, fwd: SSHForward) -> None:
        """A forward closed by its owner is not bound again on reconnect."""
        self._forwards.discard(fwd)

    def _conn_now(self) -> asyncssh.SSHClientConnection | None:
        return self._conn if self._connected.is_set() else None

    def conn_lost_since(self, proc: asyncssh.SSHClientProcess[bytes]) -> bool:
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
        # the supervisor was cancelled inside its watch, before it cleared this: left set, a closed
        # remote said "connected" while every open failed, and a log follower retried in a hot loop
        self._connected.clear()
        self._set_status(ConnStatus(ConnState.CLOSED))

    async def _ready(self, timeout: float | None) -> asyncssh.SSHClientConnection:
        if not self._connected.is_set():
            await self.wait_connected(timeout if timeout is not None else 30.0)
        if self._conn is None:
            raise NotConnected(f"{self.name}: not connected")
        return self._conn

    # ---- test / fault helpers ------------------------------------------------------------------
    def drop_connection(self) -> None:
        """Abort the transport as a network fault would (used by tests and the demo)."""
        if self._conn is not None:
            self._conn.abort()


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "connect timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    text = str(exc) or type(exc).__name__
    return text


__all__ = [
    "BACKOFF_CAP_S",
    "BACKOFF_START_S",
    "HostKeyCallback",
    "SSHForward",
    "SSHRemote",
    "SSHStream",
    "accept_and_save_keys",
    "refuse_unknown_keys",
]


async def _keepalive_round_trip(conn: asyncssh.SSHClientConnection) -> None:
    """An SSH `keepalive@openssh.com` global request and its reply (what OpenSSH's
    ServerAliveInterval sends).  asyncssh keeps this request to itself, so it is reached by name;
    on a release without it the RTT stays unknown rather than made up."""
    request = getattr(conn, "_make_global_request", None)
    if request is None:
        raise OSError("this asyncssh cannot send a keepalive request")
    await request(b"keepalive@openssh.com")
