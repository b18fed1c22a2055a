"""What a front end may choose about an SSH connection, and the host-key decisions.

The host-key decision is fixed at construction: headless verbs refuse unknown keys (or save them
with --accept-new-host-key), the TUI asks through a `HostKeyPrompt` its app answers once it is up.
"""

from __future__ import annotations

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
    it goes.  Without an answerer the key is refused, never accepted by default."""

    def __init__(self) -> None:
        self.ask: HostKeyDecider | None = None

    async def __call__(self, info: HostKeyInfo) -> KeyDecision:
        if self.ask is None:
            return await refuse_unknown_keys(info)
        return await self.ask(info)


@dataclass(frozen=True)
class SSHOptions:
    """SSH's own choices (defaults: a long-lived interactive connection)."""

    ssh_config: str | Path | None = None
    on_host_key: HostKeyDecider = refuse_unknown_keys
    connect_timeout: float = 10.0
    keepalive_interval: float = 5.0
    keepalive_count_max: int = 3
    max_sessions: int = 10
