"""Host addresses with a scheme, and the transport each one names.

`ssh://ALIAS` (or today's bare forms: HOST, user@HOST, user@HOST:PORT, an ssh config alias) is
SSH; `slurm:JOBID[:NODE]` a node of a Slurm allocation; `local:` this machine.  `k8s:` is kept for
a `kubectl exec` transport: it is refused by name until one exists.  A bare word is always SSH, so
a host that happens to be called `local` stays reachable as `local:22` or `ssh://local`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from specdebug.transport.base import HostSpecError, Transport

SSH = "ssh"
SLURM = "slurm"
LOCAL = "local"
K8S = "k8s"
_PLANNED = re.compile(r"k8s:(?!\d+$).*")  # `k8s:22` is a host named k8s, port 22


@dataclass(frozen=True)
class Address:
    """What the user typed, split into its scheme and the rest (`target`)."""

    text: str
    scheme: str
    target: str


def parse_address(text: str) -> Address:
    if text.startswith("ssh://"):
        target = text[len("ssh://") :]
        if not target:
            raise HostSpecError(f"bad host address {text!r}: expected ssh://HOST or ssh://ALIAS")
        return Address(text, SSH, target)
    if text.startswith("slurm:"):
        return Address(text, SLURM, text)
    if text in ("local:", "local://"):
        return Address(text, LOCAL, "")
    if _PLANNED.fullmatch(text):
        raise HostSpecError(f"host address {text!r}: the k8s: transport is not there yet")
    return Address(text, SSH, text)


def is_ssh(text: str) -> bool:
    """Whether `text` names an SSH host (bare or ssh://); HostSpecError for a malformed address."""
    return parse_address(text).scheme == SSH


def transport_for(text: str, ssh: object | None = None) -> Transport:
    """The transport `text` names, not yet connected; `ssh` is the SSHOptions for an SSH host.

    Raises HostSpecError (a ValueError) for an address or ssh config that cannot be used."""
    address = parse_address(text)
    if address.scheme == SLURM:
        from specdebug.transport.slurm.transport import SlurmTransport

        return SlurmTransport(address.target)
    if address.scheme == LOCAL:
        from specdebug.transport.local import LocalTransport

        return LocalTransport(address.text)
    from specdebug.transport.ssh.hostspec import HostSpec
    from specdebug.transport.ssh.options import SSHOptions
    from specdebug.transport.ssh.transport import SSHTransport

    options = ssh if isinstance(ssh, SSHOptions) else SSHOptions()
    spec = dataclasses.replace(HostSpec.parse(address.target, options.ssh_config), text=address.text)
    return SSHTransport(spec, options)
