"""One way from a host spec to a Connection.

Front ends (verbs, the TUI, the demo) name a host and options; this module picks the transport
(SSH, or Slurm job steps for `slurm:JOBID[:NODE]`; a `kubectl exec` one plugs in here) so no
caller constructs one by hand or reaches into it.  The host-key decision is part of the options, fixed at construction:
headless verbs refuse unknown keys (or save them with --accept-new-host-key), the TUI asks through
a `HostKeyPrompt` its app answers once it is up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specdebug.remote.api import Connection
from specdebug.remote.connection import HostKeyCallback as HostKeyDecider
from specdebug.remote.connection import SSHRemote, accept_and_save_keys, refuse_unknown_keys
from specdebug.remote.hostkeys import HostKeyInfo, KeyDecision
from specdebug.remote.hostspec import HostSpec, resolve
from specdebug.remote.slurm import SlurmRemote
from specdebug.remote.slurm_job import is_slurm_spec

__all__ = [
    "ConnectOptions",
    "HostKeyDecider",
    "HostKeyPrompt",
    "accept_and_save_keys",
    "address_note",
    "connect_host",
    "refuse_unknown_keys",
]


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
class ConnectOptions:
    """What a front end may choose about a connection (defaults: a long-lived interactive one)."""

    ssh_config: str | Path | None = None
    on_host_key: HostKeyDecider = refuse_unknown_keys
    state_dir: str | None = None  # box-side folder of server records (None: the default)
    use_helper: bool = True  # False: no resident probe helper (one-shot verbs)
    connect_timeout: float = 10.0
    keepalive_interval: float = 5.0


def connect_host(spec: str | HostSpec, options: ConnectOptions | None = None) -> Connection:
    """A Connection for `spec` (alias, host, user@host:port, slurm:JOBID[:NODE]), not yet started.

    Raises HostSpecError (a ValueError) for a spec or ssh config that cannot be used."""
    o = options or ConnectOptions()
    if isinstance(spec, str) and is_slurm_spec(spec):
        # a helper step waits for the controller and the node's slurmd: slower than an ssh connect
        return SlurmRemote(spec, state_dir=o.state_dir, connect_timeout=max(o.connect_timeout, 30.0))
    return SSHRemote(
        spec,
        ssh_config=o.ssh_config,
        on_host_key=o.on_host_key,
        state_dir=o.state_dir,
        use_helper=o.use_helper,
        connect_timeout=o.connect_timeout,
        keepalive_interval=o.keepalive_interval,
    )


def address_note(spec: str, ssh_config: str | Path | None = None) -> str:
    """` (HOSTNAME port N)` when `spec` is an alias for another address, else empty: error
    messages then say where a failed connect really went."""
    if is_slurm_spec(spec):
        return ""
    parsed = HostSpec.parse(spec, ssh_config)
    r = resolve(parsed)
    aliased = r.hostname != parsed.host or (parsed.port or r.port) != r.port
    return f" ({r.hostname} port {r.port})" if aliased else ""
