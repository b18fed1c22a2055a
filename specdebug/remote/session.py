"""The box client's lifecycle over any transport: connect, keep the helper, reconnect, tell listeners.

A supervisor task connects the transport, starts the resident helper (specdebug/box/helper.py)
on one long-lived process, watches both, and reconnects with capped exponential backoff (0.5 s
doubling to 30 s).  State changes go to listeners, so a dead host only changes its own row.  A
connect the transport calls hopeless (TransportFailed: a refused host key, failed
authentication, an ended allocation) makes the host FAILED until `restart()`; so does a
ProxyCommand that ends before the first handshake (a reconnect retries it: the route may come back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from specdebug.remote.helperstart import start_helper
from specdebug.remote.probe import ProbeChannel
from specdebug.transport.base import (
    ConnState,
    ConnStatus,
    NotConnected,
    ProxyFailed,
    RemoteError,
    Transport,
    TransportFailed,
)

log = logging.getLogger("specdebug.remote")

BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0
RTT_EVERY_S = 5.0


class Session:
    """One transport kept connected, with its helper (or, where the box has none, without)."""

    def __init__(
        self,
        transport: Transport,
        *,
        use_helper: bool = True,
        require_helper: bool = False,
        helper_start_s: float | None = None,
    ) -> None:
        self.transport = transport
        self.name = transport.name
        self.warnings = transport.warnings  # one list: the transport's and the helper's
        self.helper_info: dict[str, Any] | None = None
        self.probe: ProbeChannel | None = None
        self._use_helper = use_helper
        self._require_helper = require_helper  # no helper is a failed connect (Slurm), not a fallback
        self._helper_start_s = helper_start_s
        self._status = ConnStatus(ConnState.CONNECTING)
        self._listeners: list[Callable[[ConnStatus], None]] = []
        self._connected = asyncio.Event()
        self._failed_ev: asyncio.Event | None = None  # made on first use (needs the running loop)
        self._failure: Exception | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._generation = 0
        self._helper_since: float | None = None  # the link is up and the helper's python3 is starting

    # ---- state -------------------------------------------------------------------------------
    @property
    def status(self) -> ConnStatus:
        return self._status

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

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

    @property
    def _failed(self) -> asyncio.Event:
        if self._failed_ev is None:
            self._failed_ev = asyncio.Event()
        return self._failed_ev

    def _fail(self, exc: Exception) -> None:
        self._failure = exc
        self._set_status(ConnStatus(ConnState.FAILED, last_error=str(exc)))
        self._failed.set()

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise(), name=f"box:{self.name}")

    async def restart(self) -> None:
        if self._supervisor is not None and not self._supervisor.done():
            return
        self._failure = None
        self._failed.clear()
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
                waiter = asyncio.ensure_future(self._connected.wait())
                failed = asyncio.ensure_future(self._failed.wait())
                try:
                    await asyncio.wait({waiter, failed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                    failed.cancel()

        try:
            await asyncio.wait_for(_wait(), timeout)
        except TimeoutError as exc:
            if self._helper_since is not None:  # the login works: python3 is what did not answer
                waited = time.monotonic() - self._helper_since
                raise NotConnected(
                    f"{self.name}: python3 on the box did not answer within {waited:.0f} s (the SSH login "
                    "works; specdebug's helper runs the first python3 on the box's PATH)",
                    "a python3 earlier on the box's PATH that hangs? `ssh HOST python3 -c 1` runs the same one",
                ) from exc
            raise NotConnected(
                f"{self.name}: not connected after {timeout} s ({self._status.state.value}"
                f"{': ' + self._status.last_error if self._status.last_error else ''})",
                "is the box up and its SSH port reachable from here (`ssh HOST true`)? "
                "A slow link: give more time with --connect-timeout S",
            ) from exc

    async def ready(self, timeout: float | None) -> ProbeChannel | None:
        """Wait up to `timeout` for the link; the helper channel, or None where there is none."""
        if not self._connected.is_set():
            await self.wait_connected(timeout if timeout is not None else 30.0)
        return self.probe

    async def close(self) -> None:
        self._closing = True
        if self._helper_since is None:
            await self._teardown()
        # else the link stays up while the supervisor is cancelled: a helper start in flight ends its
        # python3 on the box (start_helper), which OpenSSH leaves running when the link just goes
        if self._supervisor is not None:
            self._supervisor.cancel()
            try:
                await self._supervisor
            except asyncio.CancelledError:
                pass
            except Exception:  # the supervisor's own bug: closing goes on, the traceback is kept
                log.debug("%s: supervisor ended with an error", self.name, exc_info=True)
        await self._teardown()
        # the supervisor was cancelled inside its watch, before it cleared this: left set, a closed
        # remote said "connected" while every open failed, and a log follower retried in a hot loop
        self._connected.clear()
        self._set_status(ConnStatus(ConnState.CLOSED))

    # ---- the supervisor ----------------------------------------------------------------------
    async def _supervise(self) -> None:
        attempt = 0
        delay = BACKOFF_START_S
        last_error: str | None = None
        while not self._closing:
            attempt += 1
            state = ConnState.CONNECTING if self._generation == 0 else ConnState.RECONNECTING
            self._set_status(ConnStatus(state, attempt=attempt, last_error=last_error))
            try:
                await self.transport.connect()
                await self._setup()
            except asyncio.CancelledError:
                raise
            except (RemoteError, OSError, TimeoutError, ValueError) as exc:
                await self._teardown()
                if self._hopeless(exc):
                    self._fail(exc)
                    return
                last_error = str(exc) or type(exc).__name__
                log.info("%s: connect attempt %d failed: %s", self.name, attempt, last_error)
                self._set_status(ConnStatus(ConnState.RECONNECTING, attempt=attempt, last_error=last_error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP_S)
                continue
            attempt = 0
            delay = BACKOFF_START_S
            # the first RTT is measured before anyone is told "connected": a status without it
            # printed `rtt 0.0 ms` / `"rtt_ms": null` for a one-shot probe
            rtt = await self._measure_rtt()
            # a new generation and "connected" at one moment (no await between): counted before
            # the RTT, a watcher saw generation 2 while the status still said reconnecting
            self._generation += 1
            self._set_status(ConnStatus(ConnState.CONNECTED, rtt_ms=rtt))
            self._connected.set()
            last_error = await self._watch()
            self._connected.clear()
            await self._teardown()
        self._set_status(ConnStatus(ConnState.CLOSED))

    def _hopeless(self, exc: BaseException) -> bool:
        """A connect failure retrying cannot fix: the transport says so, or a ProxyCommand ended
        before the first handshake (the same command would fail again; a reconnect retries it)."""
        return isinstance(exc, TransportFailed) or (isinstance(exc, ProxyFailed) and self._generation == 0)

    async def _setup(self) -> None:
        self.probe = None
        if not self._use_helper:
            return
        self._helper_since = time.monotonic()
        try:
            self.probe, self.helper_info = await start_helper(
                self.transport,
                self.name,
                self.warn,
                timeout=self._helper_start_s,
                quiet=self._require_helper,
            )
        finally:
            self._helper_since = None

    async def _watch(self) -> str:
        """Wait until the link or the helper ends; refresh the RTT figure meanwhile."""
        lost = asyncio.ensure_future(self.transport.wait_lost())
        waits: set[asyncio.Future[Any]] = {lost}
        if self.probe is not None:
            waits.add(asyncio.ensure_future(self.probe.closed.wait()))
        try:
            while True:
                done, _ = await asyncio.wait(waits, timeout=RTT_EVERY_S, return_when=asyncio.FIRST_COMPLETED)
                if done:
                    return "connection lost" if lost in done else "the helper ended"
                rtt = await self._measure_rtt()
                if rtt is not None and self._status.state is ConnState.CONNECTED:
                    self._set_status(ConnStatus(ConnState.CONNECTED, rtt_ms=rtt))
        finally:
            for w in waits:
                w.cancel()

    async def _teardown(self) -> None:
        probe, self.probe = self.probe, None
        if probe is not None:
            probe.close()
            await probe.proc.wait_closed(2.0)  # the helper's process is gone before the link goes
        with contextlib.suppress(RemoteError, OSError):
            await self.transport.close()

    async def _measure_rtt(self) -> float | None:
        """One round trip in ms: a ping through the resident helper, or without one what the
        transport can measure itself (an SSH keepalive, which the server answers)."""
        if self.probe is None:
            return await self.transport.ping()
        try:
            t0 = time.perf_counter()
            await self.probe.request("ping", 5.0)
            return (time.perf_counter() - t0) * 1000
        except RemoteError:
            return None
