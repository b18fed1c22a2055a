"""Connections the agent keeps: one per login as OpenSSH would key it, reused by every request.

The key is what the host name resolves to NOW (user, HostName, port, the config's identities, the
proxy, the known_hosts files), as OpenSSH's ControlPath `%C` hashes user, host and port: the name is
resolved again on every request, so re-pointing an alias in the ssh config reaches the new host, and
the connection made for the old target is closed (it would reconnect to the new target under the old
key).  A kept connection answers only while known_hosts still trusts the key it verified (checked on
every use) and the host still shows that key to a new connection (one key exchange without a login,
beside the verb, at most every KEY_ASK_EVERY_S per login: OpenSSH's PerSourcePenalties counts each
such connection as `noauth`, 1 s of penalty, and refuses a source past 15 s, so asking on every use of
a busy agent would lock the user out of the box); otherwise the request connects afresh, which refuses
a changed key in the direct path's words.

The host is asked off the answer's path where that is safe: after a request, the agent keeps asking
every KEY_ASK_EVERY_S for KEEP_ASKING_S (while the user works, the next request finds an answer at
most FRESH_S old and is answered at once, known_hosts still read on every use); a request that finds
no answer that fresh (the first after a quiet spell) holds its output until the host answers, as
before.  So a changed key is met within FRESH_S, and an answer waits for the host at most once per
quiet spell, never more than once per KEY_ASK_EVERY_S.

A kept connection has its resident helper (a probe is one helper round trip, not a new SSH channel).
A connection that is down when a request comes is given the request's connect timeout to come back;
one that fails is dropped, so the next request connects afresh and says why in the same words as the
direct path.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING, Any

from specdebug.remote.api import ConnState

if TYPE_CHECKING:
    from specdebug.remote.api import Connection

HOST_KEY_CHECK_S = 5.0  # at most this long to ask the host for its key before a kept connection answers
KEY_ASK_EVERY_S = 2.0  # a login's host is asked for its key at most this often (penalty: 0.5 s/s < decay)
KEEP_ASKING_S = 30.0  # after a request, the host is asked every KEY_ASK_EVERY_S for this long
FRESH_S = 4.0  # a host's answer this recent lets a request answer without waiting for a new one

Key = tuple[object, ...]


def connection_key(host: str, args: argparse.Namespace) -> Key:
    """What identifies a login (resolved now from the ssh config); raises HostSpecError as connect
    would for an address or config that cannot be used."""
    from specdebug.transport.address import SSH, parse_address

    settings = (bool(getattr(args, "accept_new_host_key", False)), getattr(args, "state_dir", None))
    address = parse_address(host)
    if address.scheme != SSH:
        return (address.scheme, host, *settings)
    from specdebug.transport.ssh.hostspec import HostSpec, resolve

    r = resolve(HostSpec.parse(address.target, getattr(args, "ssh_config", None)))
    known = tuple(str(p) for p in r.known_hosts)
    return (SSH, r.user, r.hostname, r.port, r.identities, r.proxy, known, *settings)


def _name(host: str, args: argparse.Namespace) -> Key:
    return (host, getattr(args, "ssh_config", None), getattr(args, "state_dir", None))


class KeptConnections:
    def __init__(self) -> None:
        self._conns: dict[Key, Connection] = {}
        self._asked_as: dict[Key, str] = {}  # key -> the name it was last asked by (for status)
        self._resolved: dict[Key, Key] = {}  # name -> the key it resolved to last time
        self._locks: dict[Key, asyncio.Lock] = {}
        # key -> (when, the check that asked the host, the connection it was about)
        self._asked: dict[Key, tuple[float, asyncio.Future[bool], Connection]] = {}
        # key -> (the connection, when the host was last asked and showed its key)
        self._confirmed: dict[Key, tuple[Connection, float]] = {}
        self._used: dict[Key, float] = {}  # key -> when a request last used it
        self._askers: dict[Key, asyncio.Task[None]] = {}  # key -> the task asking while it is used

    async def get(
        self, host: str, args: argparse.Namespace
    ) -> tuple[Connection, asyncio.Future[bool] | None]:
        """A connected remote for this host and settings, and for a kept one the check (running) that
        its host key is unchanged and trusted: the caller answers from it only once that says True
        (False drops it).  Raises RemoteError like `connect`."""
        from specdebug.verbs.connecting import DEFAULT_CONNECT_TIMEOUT_S, connect, make_remote

        key = connection_key(host, args)
        name = _name(host, args)
        before = self._resolved.get(name)
        self._resolved[name] = key
        if before is not None and before != key:  # the name points elsewhere now
            await self._drop(before)
        timeout = getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
        async with self._locks.setdefault(key, asyncio.Lock()):
            self._asked_as[key] = host
            remote = self._conns.get(key)
            if remote is not None and remote.status.state is ConnState.RECONNECTING:
                try:
                    await remote.wait_connected(timeout)
                except Exception:
                    pass
            if remote is not None and remote.status.state is ConnState.CONNECTED:
                return remote, self._check(key, remote, min(timeout, HOST_KEY_CHECK_S))
            if remote is not None:
                await self._drop(key)
            remote = make_remote(host, args, helper=True)
            try:
                await connect(remote, host, timeout, getattr(args, "ssh_config", None))
            except BaseException:
                await remote.close()
                raise
            self._conns[key] = remote
            return remote, None  # just verified by the connect

    def _check(self, key: Key, remote: Connection, timeout: float) -> asyncio.Future[bool] | None:
        """The running check that `remote` may answer: known_hosts now, and the host's key from an ask
        at most FRESH_S old (kept fresh in the background while requests come), else from an ask
        started for it within KEY_ASK_EVERY_S (shared) or a new one."""
        if _key_check(remote) is None:
            return None  # no host key of its own (Slurm steps, this machine)
        now = time.monotonic()
        self._used[key] = now
        self._keep_asking(key, remote, timeout)
        confirmed = self._confirmed.get(key)
        if confirmed is not None and confirmed[0] is remote and now - confirmed[1] < FRESH_S:
            return asyncio.ensure_future(self._confirm(key, remote, timeout, ask_host=False))
        return self._ask(key, remote, timeout, now)

    def _ask(self, key: Key, remote: Connection, timeout: float, now: float) -> asyncio.Future[bool]:
        asked = self._asked.get(key)
        if (
            asked is not None
            and asked[2] is remote
            and (not asked[1].done() or now - asked[0] < KEY_ASK_EVERY_S)
        ):
            return asyncio.ensure_future(self._confirm(key, remote, timeout, asked[1]))
        check = asyncio.ensure_future(self._confirm(key, remote, timeout))
        self._asked[key] = (now, check, remote)
        return check

    def _keep_asking(self, key: Key, remote: Connection, timeout: float) -> None:
        """Ask the host every KEY_ASK_EVERY_S while requests use `remote` (KEEP_ASKING_S after the last)."""
        running = self._askers.get(key)
        if running is not None and not running.done():
            return
        self._askers[key] = asyncio.ensure_future(self._asker(key, remote, timeout))

    async def _asker(self, key: Key, remote: Connection, timeout: float) -> None:
        while self._conns.get(key) is remote:
            now = time.monotonic()
            if now - self._used.get(key, 0.0) > KEEP_ASKING_S:
                return
            asked = self._asked.get(key)
            due = asked[0] + KEY_ASK_EVERY_S if asked is not None and asked[2] is remote else now
            if not (asked is None or asked[1].done()) or due > now:
                await asyncio.sleep(max(due - now, 0.05))
                continue
            # shielded: a drop cancels this task, and cancelling it must not cancel the ask that
            # requests share (they would get CancelledError, not False, and end without an answer)
            if not await _settled(asyncio.shield(self._ask(key, remote, timeout, now))):
                return  # dropped: the next request connects afresh

    async def _confirm(
        self,
        key: Key,
        remote: Connection,
        timeout: float,
        asked: asyncio.Future[bool] | None = None,
        *,
        ask_host: bool = True,
    ) -> bool:
        """Whether the kept `remote` may answer; when not, it is dropped (the next use connects afresh)."""
        check = _key_check(remote)
        started = time.monotonic()
        if asked is not None or not ask_host:
            ok = (
                (asked is None or await _settled(asyncio.shield(asked)))
                and check is not None
                and bool(await check(timeout, ask_host=False))
            )
        else:
            ok = check is not None and bool(await check(timeout))
            if ok:
                self._confirmed[key] = (remote, started)
        if not ok and self._conns.get(key) is remote:
            await self._drop(key)
        return ok

    async def _drop(self, key: Key) -> None:
        remote = self._conns.pop(key, None)
        self._asked_as.pop(key, None)
        self._asked.pop(key, None)
        self._confirmed.pop(key, None)
        asker = self._askers.pop(key, None)
        if asker is not None and asker is not asyncio.current_task():
            asker.cancel()
        if remote is not None:
            await asyncio.shield(remote.close())  # a drop started is finished, whoever is cancelled

    def hosts(self) -> list[dict[str, object]]:
        """What `specdebug agent status` shows: each kept login, the name it was asked by, its state."""
        shown: list[dict[str, object]] = []
        for key, remote in self._conns.items():
            entry: dict[str, object] = {
                "host": self._asked_as.get(key, "?"),
                "state": str(remote.status.state),
            }
            if key[0] == "ssh":
                entry["login"] = f"{key[1]}@{key[2]}:{key[3]}"
            shown.append(entry)
        return shown

    async def close_all(self) -> None:
        for asker in self._askers.values():
            asker.cancel()
        conns, self._conns = list(self._conns.values()), {}
        for remote in conns:
            await remote.close()


def _key_check(remote: Connection) -> Any:
    """The transport's host-key check (SSH only: other transports have no host key of their own)."""
    return getattr(getattr(remote, "transport", None), "host_key_unchanged", None)


async def _settled(check: asyncio.Future[bool]) -> bool:
    """A shared check's answer, False when it was cancelled (a drop ended it: the connection may not
    answer); a cancel of the task that awaits it still propagates."""
    try:
        return bool(await check)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        return False
