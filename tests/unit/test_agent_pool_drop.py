"""A kept connection dropped while a request waits on the host-key ask it shares with the background
asker: the request gets "may not answer" (False), never a CancelledError that ends it without an
answer (CI, issue 41: "the agent ended without an answer" beside a re-keyed host under load).

The pool's logic only: the remote is a stand-in whose key check the test answers."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from specdebug.agent import pool
from specdebug.remote.api import ConnState


class _Transport:
    def __init__(self) -> None:
        self.asks: list[asyncio.Future[bool]] = []
        self.known_hosts_trusts = True

    async def host_key_unchanged(self, timeout: float, ask_host: bool = True) -> bool:
        if not self.known_hosts_trusts:
            return False
        if not ask_host:
            return True
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.asks.append(answer)
        return await answer


class _Remote:
    def __init__(self) -> None:
        self.transport = _Transport()
        self.status = SimpleNamespace(state=ConnState.CONNECTED)
        self.closed = False

    async def close(self) -> None:
        await asyncio.sleep(0)  # a close that yields, as a real one does
        self.closed = True


async def _wait_for(cond, what: str) -> None:
    async with asyncio.timeout(5):
        while not cond():
            await asyncio.sleep(0.01)


def test_a_drop_during_a_shared_ask_answers_false_not_cancelled():
    async def run() -> None:
        kept = pool.KeptConnections()
        remote = _Remote()
        key = ("ssh", "u", "h", 22)
        kept._conns[key] = remote  # noqa: SLF001 - the pool's own state, set as `get` would
        first = kept._check(key, remote, 5.0)  # noqa: SLF001
        assert first is not None
        await _wait_for(lambda: len(remote.transport.asks) == 1, "the first ask")
        remote.transport.asks[0].set_result(True)
        assert await first is True
        # past the ask interval the background asker asks again; a request arriving meanwhile
        # (its answer no longer fresh) shares that ask
        kept._asked[key] = (kept._asked[key][0] - pool.KEY_ASK_EVERY_S, *kept._asked[key][1:])  # noqa: SLF001
        kept._confirmed.pop(key)  # noqa: SLF001
        await _wait_for(lambda: len(remote.transport.asks) == 2, "the asker's ask")
        request = kept._check(key, remote, 5.0)  # noqa: SLF001
        assert request is not None
        remote.transport.known_hosts_trusts = False
        remote.transport.asks[1].set_result(False)  # the host says no: the connection is dropped
        assert await asyncio.wait_for(request, 5) is False
        assert remote.closed and key not in kept._conns  # noqa: SLF001
        await kept.close_all()

    asyncio.run(run())
