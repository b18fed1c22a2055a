"""Connections the agent keeps: one per host and connect settings, reused by every request.

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


def _key(host: str, args: argparse.Namespace) -> tuple[object, ...]:
    return (
        host,
        getattr(args, "ssh_config", None),
        bool(getattr(args, "accept_new_host_key", False)),
        getattr(args, "state_dir", None),
    )


class KeptConnections:
    def __init__(self) -> None:
        self._conns: dict[tuple[object, ...], Connection] = {}
        self._locks: dict[tuple[object, ...], asyncio.Lock] = {}

    async def get(self, host: str, args: argparse.Namespace) -> Connection:
        """A connected remote for this host and settings; raises RemoteError like `connect`."""
        from specdebug.verbs.common import DEFAULT_CONNECT_TIMEOUT_S, connect, make_remote

        key = _key(host, args)
        timeout = getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
        async with self._locks.setdefault(key, asyncio.Lock()):
            remote = self._conns.get(key)
            if remote is not None and remote.status.state is ConnState.CONNECTED:
                return remote
            if remote is not None and remote.status.state is ConnState.RECONNECTING:
                try:
                    await remote.wait_connected(timeout)
                    return remote
                except Exception:
                    pass
            if remote is not None:
                self._conns.pop(key, None)
                await remote.close()
            remote = make_remote(host, args, helper=True)
            try:
                await connect(remote, host, timeout, getattr(args, "ssh_config", None))
            except BaseException:
                await remote.close()
                raise
            self._conns[key] = remote
            return remote

    def hosts(self) -> list[dict[str, object]]:
        """What `specdebug agent status` shows: each kept host and its connection state."""
        return [
            {"host": key[0], "ssh_config": key[1], "state": str(remote.status.state)}
            for key, remote in self._conns.items()
        ]

    async def close_all(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for remote in conns:
            await remote.close()
