"""SSHTransport: one asyncssh connection to a host, as a Transport.

- `connect()` is one attempt: host keys are verified against known_hosts (see hostkeys.py), an
  unknown key goes to the front end's decision, a changed one is refused.  The box client
  (specdebug.remote.session) retries with backoff: asyncssh never reconnects and has keepalive off
  by default; both are ours.
- Each `exec` is an exec channel under a session-slot limiter that learns the server's MaxSessions
  when an open fails, and queues the rest (slots.py).  The argv is quoted here, the one place where
  it becomes shell text (sshd hands a command string to the login shell).
- Forwards are bound again on the same local port after a reconnect (forward.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Sequence
from typing import Any

import asyncssh

from specdebug.transport.base import (
    AuthFailed,
    ConnectionDropped,
    HostKeyRefused,
    NotConnected,
    RemoteError,
)
from specdebug.transport.ssh import hostkeys
from specdebug.transport.ssh.forward import SSHForward
from specdebug.transport.ssh.hostkeys import KeyDecision
from specdebug.transport.ssh.hostspec import HostSpec, ResolvedHost, resolve
from specdebug.transport.ssh.options import HostKeyCallback, SSHOptions
from specdebug.transport.ssh.process import SSHProcess
from specdebug.transport.ssh.proxy import ProxyLink, through_proxy
from specdebug.transport.ssh.quote import sh_join
from specdebug.transport.ssh.slots import SlotLimiter
from specdebug.transport.teardown import best_effort

PROXY_CLOSE_WAIT_S = 2.0  # a closing link over a ProxyCommand: its goodbye, before the command is stopped
# AES-GCM before ChaCha20-Poly1305 (asyncssh's first choice, as OpenSSH's): on this client each
# ChaCha packet builds cipher objects in Python, ~20 us against ~3 us for AES-GCM (one object,
# AES-NI), and a followed log is hundreds of packets a second (issue 43; a config's Ciphers stands)
CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)
_CONNECT_ERRORS = (OSError, asyncssh.Error, TimeoutError, asyncio.TimeoutError)


class SSHTransport:
    """One host over SSH.  `connect()`, `exec`/`forward`, `close()` (the box client drives it)."""

    def __init__(self, spec: str | HostSpec, options: SSHOptions | None = None) -> None:
        o = options or SSHOptions()
        self.spec = spec if isinstance(spec, HostSpec) else HostSpec.parse(spec, o.ssh_config)
        self.name = self.spec.text
        self.resolved: ResolvedHost = resolve(self.spec)
        self.warnings = list(self.resolved.warnings)
        self._on_host_key: HostKeyCallback = o.on_host_key
        self._connect_timeout = o.connect_timeout
        self._keepalive = self.resolved.keepalive_interval or o.keepalive_interval
        self._keepalive_count = o.keepalive_count_max
        # every channel counts, the helper's included: MaxSessions in all
        self._slots = SlotLimiter(o.max_sessions)
        self._queued = 0  # opens now waiting for a session slot (all taken, or sshd refused one)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._once_keys: list[asyncssh.SSHKey] = []
        self._forwards: set[SSHForward] = set()
        self._proxy: ProxyLink | None = None  # the ProxyCommand under the live connection, if any

    # ---- connecting --------------------------------------------------------------------------
    def _connect_kwargs(self) -> dict[str, Any]:
        r = self.resolved
        kwargs: dict[str, Any] = dict(
            config=r.config_paths or None,
            connect_timeout=self._connect_timeout,
            keepalive_interval=self._keepalive,
            keepalive_count_max=self._keepalive_count,
        )
        if not r.ciphers:
            kwargs["encryption_algs"] = CIPHERS
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

    async def _open(self) -> asyncssh.SSHClientConnection:
        """One asyncssh connect, over a ProxyCommand we run ourselves where the config names one
        (proxy.py: its exit and stderr are seen at once)."""
        command = self.resolved.proxy_command
        if command is None:
            return await asyncssh.connect(self.spec.host, **self._connect_kwargs())
        kwargs = self._connect_kwargs()
        conn, link = await through_proxy(
            self.name, command, lambda sock: asyncssh.connect(self.spec.host, sock=sock, **kwargs)
        )
        self._proxy = link
        return conn

    async def _host_key(self) -> asyncssh.SSHKey | None:
        r = self.resolved
        if r.proxy_command is None:
            return await asyncssh.get_server_host_key(
                self.spec.host, self.spec.port or (), config=r.config_paths or None
            )
        key, link = await through_proxy(
            self.name,
            r.proxy_command,
            lambda sock: asyncssh.get_server_host_key(
                self.spec.host, self.spec.port or (), sock=sock, config=r.config_paths or None
            ),
        )
        await link.close()
        return key

    async def _connect_checked(self) -> asyncssh.SSHClientConnection:
        try:
            return await self._open()
        except asyncssh.HostKeyNotVerifiable:
            await self._drop_proxy()
        # unknown or changed: fetch the key ourselves and tell the two apart
        r = self.resolved
        key = await self._host_key()
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
            # keys accepted "once" stay this session's keys for the host: a retry never turns a
            # changed key into an "unknown" one that could be accepted again
            self._once_keys = [key]
        return await self._open()

    async def _drop_proxy(self) -> None:
        link, self._proxy = self._proxy, None
        if link is not None:
            await link.close()

    async def connect(self) -> None:
        await self._drop_proxy()  # a command left from an earlier link
        try:
            conn = await self._connect_checked()
        except asyncssh.PermissionDenied as exc:
            raise AuthFailed(
                f"{self.name}: authentication failed ({exc})",
                "specdebug logs in as ssh would (your ssh agent, the ssh config's User and IdentityFile): "
                "`ssh -v HOST true` shows which keys the box refused",
            ) from exc
        except _CONNECT_ERRORS as exc:
            await self._drop_proxy()
            raise RemoteError(_describe_error(exc)) from exc
        except BaseException:
            await self._drop_proxy()
            raise
        self._conn = conn
        await self._slots.reset()
        for fwd in list(self._forwards):
            try:
                await fwd.bind(conn)
            except (asyncssh.Error, OSError) as exc:
                self.warnings.append(f"forward to port {fwd.remote_port} could not be restored: {exc}")

    async def host_key_unchanged(self, timeout: float, ask_host: bool = True) -> bool:
        """Whether this connection may still answer for the host: the key it verified is still
        trusted (known_hosts, or this session's key accepted once) and, with `ask_host`, the host
        still shows it to a new connection (one key exchange, no login, at most `timeout` s).  A kept
        connection (the local agent's) asks before it answers, so a changed host key is met by a fresh
        connect, refused in its own words, not answered from the old link."""
        conn, r = self._conn, self.resolved
        kept = conn.get_server_host_key() if conn is not None else None
        if kept is None:
            return False
        keys, cas, revoked = hostkeys.trusted_keys(r.hostname, r.port, r.known_hosts)
        if kept.public_data in {k.public_data for k in revoked}:
            return False
        # a host known by its CA (@cert-authority) was checked against it at connect: the host is
        # asked below whether it still shows the same key
        trusted = self._once_keys or keys
        if not (cas and not self._once_keys) and kept.public_data not in {k.public_data for k in trusted}:
            return False
        if not ask_host:
            return True
        # the same kind of key as the kept one: a box has several (ed25519, ecdsa, rsa) and left to
        # itself the exchange may pick another kind, which is no change
        algs = [a.decode() for a in getattr(kept, "sig_algorithms", ())] or ()
        try:
            now = await asyncio.wait_for(
                asyncssh.get_server_host_key(
                    self.spec.host,
                    self.spec.port or (),
                    config=r.config_paths or None,
                    server_host_key_algs=algs,
                ),
                timeout,
            )
        except _CONNECT_ERRORS:
            return False
        return now is not None and now.public_data == kept.public_data

    async def wait_lost(self) -> None:
        if self._conn is not None:
            await self._conn.wait_closed()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        for fwd in self._forwards:
            fwd.unbind()
        if conn is not None:
            conn.close()
            if self._proxy is not None:  # the link's goodbye through the command, then the command
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(conn.wait_closed(), PROXY_CLOSE_WAIT_S)
        await self._drop_proxy()

    async def shut(self) -> None:
        """The owner is done with the host: forwards go for good, then the link."""
        for fwd in list(self._forwards):
            await fwd.close()
        await self.close()

    def abort(self) -> None:
        if self._conn is not None:
            self._conn.abort()
        if self._proxy is not None:
            self._proxy.kill()

    def _live(self) -> asyncssh.SSHClientConnection:
        if self._conn is None:
            raise NotConnected(f"{self.name}: not connected")
        return self._conn

    async def _went_down(self, conn: asyncssh.SSHClientConnection) -> bool:
        """Whether `conn` is closing (a request it refused was refused by the drop, not the box)."""
        for _ in range(10):
            if conn.is_closed() or self._conn is not conn:
                return True
            await asyncio.sleep(0.02)
        return False

    # ---- exec ----------------------------------------------------------------------------------
    async def exec(self, argv: Sequence[str], stdin: bytes | None = None) -> SSHProcess:
        """An exec channel, queueing under the session limit (learns MaxSessions)."""
        command = sh_join(argv)
        queued = await self._slots.acquire()  # an open waiting its turn: sessions_full() says so
        self._queued += queued
        try:
            for attempt in range(200):
                conn = self._conn
                try:
                    if conn is None:
                        raise NotConnected(f"{self.name}: not connected")
                    proc = await conn.create_process(command, encoding=None)
                except asyncssh.ChannelOpenError as exc:
                    assert conn is not None
                    if exc.code != asyncssh.OPEN_CONNECT_FAILED or _closed_under_us(exc, conn):
                        await self._slots.release()
                        if await self._went_down(conn):  # refused because the link is going: a drop
                            raise ConnectionDropped(
                                f"{self.name}: connection lost opening a channel"
                            ) from exc
                        raise RemoteError(f"{self.name}: cannot open channel: {exc.reason}") from exc
                    # MaxSessions reached on the server (or a slot not yet released): wait our turn
                    if not queued:
                        queued = True
                        self._queued += 1
                    await self._slots.server_refused()
                    await asyncio.sleep(min(0.05 * (attempt + 1), 0.5))
                    await self._slots.acquire()
                    continue
                except (asyncssh.Error, OSError) as exc:
                    await self._slots.release()
                    raise ConnectionDropped(f"{self.name}: {exc}") from exc
                except AttributeError as exc:
                    # asyncssh: the link closed between the box accepting the exec and the channel
                    # starting its session (channel.create: `self._session.session_started()` on a
                    # session the close already cleared). A drop, not a fault: the follower that
                    # met it ended silently and a healthy server timed out unseen (busy run, stop 49)
                    await self._slots.release()
                    assert conn is not None
                    if await self._went_down(conn):
                        raise ConnectionDropped(f"{self.name}: connection lost opening a channel") from exc
                    raise
                except BaseException:
                    await self._slots.release()
                    raise
                process = SSHProcess(proc, self._slots, functools.partial(self._link_gone, conn), self.name)
                if stdin is not None:
                    with best_effort("%s: write a command's input", self.name):
                        proc.stdin.write(stdin)
                        proc.stdin.write_eof()
                return process
            await self._slots.release()
            raise RemoteError(f"{self.name}: no SSH session slot became free")
        finally:
            self._queued -= queued

    def sessions_full(self) -> bool:
        """Whether an open is waiting for a session slot now (MaxSessions reached): a caller that
        cannot wait (the log follower) turns to the helper's channel instead."""
        return self._queued > 0

    def _link_gone(self, conn: asyncssh.SSHClientConnection) -> bool:
        """Whether the link a process ran on is gone (closed, or replaced by a reconnect)."""
        return self._conn is not conn or conn.is_closed()

    # ---- forwards ------------------------------------------------------------------------------
    async def forward(self, port: int, host: str = "127.0.0.1") -> SSHForward:
        conn = self._live()
        fwd = SSHForward(self.name, host, port, self._forwards.discard)
        try:
            await fwd.bind(conn)
        except (asyncssh.Error, OSError) as exc:
            if await self._went_down(conn):
                raise ConnectionDropped(f"{self.name}: connection lost opening a forward") from exc
            raise
        if self._conn is not conn:  # bound on a link that went meanwhile: it would forward nothing
            await fwd.close()
            raise ConnectionDropped(f"{self.name}: connection lost opening a forward")
        self._forwards.add(fwd)
        return fwd

    def no_forward_reason(self, host: str) -> str:
        return "SSH always forwards"

    # ---- round trips ---------------------------------------------------------------------------
    async def ping(self) -> float | None:
        """An SSH keepalive request, which the server answers itself (no process on the box)."""
        if self._conn is None:
            return None
        try:
            t0 = time.perf_counter()
            await asyncio.wait_for(_keepalive_round_trip(self._conn), 5.0)
            return (time.perf_counter() - t0) * 1000
        except (asyncssh.Error, OSError, TimeoutError):
            return None


def _closed_under_us(exc: asyncssh.ChannelOpenError, conn: asyncssh.SSHClientConnection) -> bool:
    """An open that failed because our side of the link closed: asyncssh fails every pending and
    later open of a closed connection with the same code sshd uses for MaxSessions, and only its
    reason tells them apart.  Read as a refusal, a drop shrank the learned session limit and the
    open retried on the dead link for up to a minute."""
    return exc.reason == "SSH connection closed" or conn.is_closed()


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "connect timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return str(exc) or type(exc).__name__


async def _keepalive_round_trip(conn: asyncssh.SSHClientConnection) -> None:
    """An SSH `keepalive@openssh.com` global request and its reply (what OpenSSH's
    ServerAliveInterval sends).  asyncssh keeps this request to itself, so it is reached by name;
    on a release without it the RTT stays unknown rather than made up."""
    request = getattr(conn, "_make_global_request", None)
    if request is None:
        raise OSError("this asyncssh cannot send a keepalive request")
    await request(b"keepalive@openssh.com")


__all__ = ["SSHTransport"]
