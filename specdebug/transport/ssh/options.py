"""What a front end may choose about an SSH connection, and the host-key decisions.

The host-key decision is fixed at construction: headless verbs refuse unknown keys (or save them
with --accept-new-host-key), the TUI asks through a `HostKeyPrompt` its app answers once it is up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from specdebug.transport.ssh.hostkeys import HostKeyInfo, KeyDecision

HostKeyCallback = Callable[[HostKeyInfo], Awaitable[KeyDecision]]
HostKeyDecider = HostKeyCallback


async def refuse_unknown_keys(info: HostKeyInfo) -> KeyDecision:
    return KeyDecision.REFUSE


async def accept_and_save_keys(info: HostKeyInfo) -> KeyDecision:
    return KeyDecision.SAVE


class HostKeyPrompt:
    """The decision of a front end that exists only after its connections (the TUI's key screen).

    The connection is built with this object; the app sets `ask` when it mounts and clears it when
    it goes.  A key asked before the app has mounted waits for it, up to ARRIVE_S: a pane's first
    `wait_connected` starts the connection while the app is still mounting, and on a loaded machine
    the key was asked first and refused unseen (a busy run of the suite, 2026-12-06).  Once the app
    has gone, or never came, the key is refused, never accepted by default."""

    ARRIVE_S = 120.0

    def __init__(self) -> None:
        self._ask: HostKeyDecider | None = None
        self._came = asyncio.Event()  # set once an app answers (or has gone: nobody will)

    @property
    def ask(self) -> HostKeyDecider | None:
        return self._ask

    @ask.setter
    def ask(self, decider: HostKeyDecider | None) -> None:
        self._ask = decider
        self._came.set()  # an answerer, or (None) the app leaving: a waiting key is decided now

    async def __call__(self, info: HostKeyInfo) -> KeyDecision:
        if self._ask is None and not self._came.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._came.wait(), self.ARRIVE_S)
        if self._ask is None:
            return await refuse_unknown_keys(info)
        return await self._ask(info)


@dataclass(frozen=True)
class SSHOptions:
    """SSH's own choices (defaults: a long-lived interactive connection)."""

    ssh_config: str | Path | None = None
    on_host_key: HostKeyDecider = refuse_unknown_keys
    connect_timeout: float = 10.0
    keepalive_interval: float = 5.0
    keepalive_count_max: int = 3
    max_sessions: int = 10
