"""One way from a host address to a Connection: the transport its scheme names, under one box client.

Front ends (verbs, the TUI, the demo) name a host and options; the address picks the transport
(SSH, Slurm job steps for `slurm:JOBID[:NODE]`, this machine for `local:`; specdebug.transport.
address), so no caller constructs one by hand or reaches into it.  The host-key decision is part of
the SSH options, fixed at construction (specdebug.transport.ssh.options).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specdebug.remote.api import Connection
from specdebug.remote.client import BoxClient, StepBoxClient
from specdebug.transport.address import parse_address, transport_for
from specdebug.transport.base import StepTransport
from specdebug.transport.ssh.options import (
    HostKeyDecider,
    HostKeyPrompt,
    SSHOptions,
    accept_and_save_keys,
    refuse_unknown_keys,
)

__all__ = [
    "ConnectOptions",
    "HostKeyDecider",
    "HostKeyPrompt",
    "SSHOptions",
    "accept_and_save_keys",
    "address_note",
    "connect_host",
    "ssh_hostname",
    "slurm_node_address",
    "refuse_unknown_keys",
]

if TYPE_CHECKING:
    from specdebug.transport.ssh.hostspec import HostSpec, ResolvedHost

SLURM_HELPER_START_S = 30.0  # a helper step waits for the controller and the node's slurmd: slower than ssh


@dataclass(frozen=True)
class ConnectOptions:
    """What a front end may choose about a connection (defaults: a long-lived interactive one)."""

    ssh: SSHOptions = field(default_factory=SSHOptions)  # SSH's own vocabulary (config, host keys)
    state_dir: str | None = None  # box-side folder of server records (None: the default)
    use_helper: bool = True  # False: no resident probe helper (one-shot verbs)


def connect_host(spec: str, options: ConnectOptions | None = None) -> Connection:
    """A Connection for the address `spec` (alias, host, user@host:port, ssh://alias,
    slurm:JOBID[:NODE], local:), not yet started.

    Raises HostSpecError (a ValueError) for an address or ssh config that cannot be used."""
    o = options or ConnectOptions()
    transport = transport_for(spec, o.ssh)
    if isinstance(transport, StepTransport):
        # every process on a node is a job step: the helper is required (no one-shot fallback)
        return StepBoxClient(
            transport,
            state_dir=o.state_dir,
            require_helper=True,
            helper_start_s=max(o.ssh.connect_timeout, SLURM_HELPER_START_S),
        )
    return BoxClient(transport, state_dir=o.state_dir, use_helper=o.use_helper)


def _resolved_ssh(spec: str, ssh_config: str | Path | None) -> tuple[HostSpec, ResolvedHost] | None:
    """An SSH spec as typed and as ssh config resolves it; None for other schemes."""
    address = parse_address(spec)
    if address.scheme != "ssh":
        return None
    from specdebug.transport.ssh.hostspec import HostSpec, resolve  # ssh config only when asked

    parsed = HostSpec.parse(address.target, ssh_config)
    return parsed, resolve(parsed)


def address_note(spec: str, ssh_config: str | Path | None = None) -> str:
    """` (HOSTNAME port N)` when `spec` is an alias for another address, else empty: error
    messages then say where a failed connect really went."""
    got = _resolved_ssh(spec, ssh_config)
    if got is None:
        return ""
    parsed, r = got
    aliased = r.hostname != parsed.host or (parsed.port or r.port) != r.port
    return f" ({r.hostname} port {r.port})" if aliased else ""


def ssh_hostname(spec: str, ssh_config: str | Path | None = None) -> str | None:
    """The address an SSH host spec reaches (ssh config's HostName for an alias, the host of
    `user@host:port`); None for other schemes.  Raises HostSpecError or OSError when the spec or
    the config cannot be read."""
    got = _resolved_ssh(spec, ssh_config)
    return got[1].hostname if got is not None else None


def slurm_node_address(spec: str) -> str | None:
    """The NodeAddr of the node a `slurm:JOBID[:NODE]` spec names (the job's first node when none),
    as scontrol says it now; None when Slurm cannot say (or the spec is not a Slurm one)."""
    if parse_address(spec).scheme != "slurm":
        return None
    from specdebug.transport.slurm.job import address_now

    return address_now(spec)
