"""Connections the agent keeps: one per login as OpenSSH would key it, reused by every request.

The key is what the host name resolves to NOW (user, HostName, port, the config's identities, the
proxy, the known_hosts files), as OpenSSH's ControlPath `%C` hashes user, host and port: the name is
resolved again on every request, so re-pointing an alias in the ssh config reaches the new host, and
the connection made for the old target is closed (it would reconnect to the new target under the old
key).  A kept connection answers only while the host still shows the key it verified and known_hosts
still trusts it; otherwise the request connects afresh, which refuses a changed key in the direct
path's words.

A kept connection has its resident helper (a probe is one helper round trip, not a new SSH channel).
A connection that is down when a request comes is given the request's connect timeout to come back;
one that fails is dropped, so the next request connects afresh and says why in the same words as the
direct path.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from specdebug.remote.api import ConnState

if TYPE_CHECKING:
    from specdebug.remote.api import Connection

HOST_KEY_CHECK_S = 5.0  # at most this long to ask the host for its key before a kept connection answers

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

    async def get(self, host: str, args: argparse.Namespace) -> Connection:
        """A connected remote for this host and settings; raises RemoteError like `connect`."""
        from specdebug.verbs.common import DEFAULT_CONNECT_TIMEOUT_S, connect, make_remote

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
                if await _still_trusted(remote, min(timeout, HOST_KEY_CHECK_S)):
                    return remote
            if remote is not None:
                await self._drop(key)
            remote = make_remote(host, args, helper=True)
            try:
                await connect(remote, host, timeout, getattr(args, "ssh_config", None))
            except BaseException:
                await remote.close()
                raise
            self._conns[key] = remote
            return remote

    async def _drop(self, key: Key) -> None:
        remote = self._conns.pop(key, None)
        self._asked_as.pop(key, None)
        if remote is not None:
            await remote.close()

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
        conns, self._conns = list(self._conns.values()), {}
        for remote in conns:
            await remote.close()


async def _still_trusted(remote: Connection, timeout: float) -> bool:
    """Whether a kept connection may answer: its host key is unchanged and still trusted (SSH only;
    other transports have no host key of their own)."""
    check = getattr(getattr(remote, "transport", None), "host_key_unchanged", None)
    if check is None:
        return True
    return bool(await check(timeout))
