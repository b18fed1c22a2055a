"""Host-key policy: always verify; tell unknown from changed; save accepted keys ourselves.

asyncssh raises the same HostKeyNotVerifiable for an unknown and a changed key, and never
writes known_hosts; both distinctions matter to the user, so they live here.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import asyncssh

from specdebug.capability import require_write


class KeyDecision(StrEnum):
    ONCE = "once"  # trust for this session only
    SAVE = "save"  # trust and append to known_hosts
    REFUSE = "refuse"


@dataclass(frozen=True)
class HostKeyInfo:
    host: str  # as shown to the user
    hostname: str
    port: int
    key_type: str
    fingerprint: str  # SHA256:...
    changed: bool
    key: asyncssh.SSHKey


def known_hosts_name(hostname: str, port: int) -> str:
    return hostname if port == 22 else f"[{hostname}]:{port}"


def classify(key: asyncssh.SSHKey, hostname: str, port: int, known_hosts: list[Path]) -> bool:
    """Return True when known_hosts holds *other* keys for this host (the key changed)."""
    for path in known_hosts:
        if not path.is_file():
            continue
        try:
            kh = asyncssh.read_known_hosts(str(path))
        except (OSError, ValueError, asyncssh.Error):
            continue
        trusted = kh.match(hostname, "", port)[0]
        if trusted and key.public_data not in {k.public_data for k in trusted}:
            return True
    return False


def trusted_keys(hostname: str, port: int, known_hosts: list[Path]) -> list[asyncssh.SSHKey]:
    """The keys known_hosts trusts for this host now (unreadable files trust nothing)."""
    keys: list[asyncssh.SSHKey] = []
    for path in known_hosts:
        if not path.is_file():
            continue
        try:
            keys += asyncssh.read_known_hosts(str(path)).match(hostname, "", port)[0]
        except (OSError, ValueError, asyncssh.Error):
            continue
    return keys


def differs_from_session(key: asyncssh.SSHKey, session_keys: list[asyncssh.SSHKey]) -> bool:
    """True when the user accepted another key "once" for this host in this session: the key CHANGED.

    A key accepted once is the session's key for the host, exactly as a known_hosts line would be."""
    return bool(session_keys) and key.public_data not in {k.public_data for k in session_keys}


def describe(host: str, hostname: str, port: int, key: asyncssh.SSHKey, changed: bool) -> HostKeyInfo:
    return HostKeyInfo(
        host=host,
        hostname=hostname,
        port=port,
        key_type=key.get_algorithm(),
        fingerprint=key.get_fingerprint("sha256"),
        changed=changed,
        key=key,
    )


def save_key(info: HostKeyInfo, known_hosts: Path) -> None:
    require_write("save a host key", known_hosts)
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    line = f"{known_hosts_name(info.hostname, info.port)} {info.key.export_public_key().decode().strip()}\n"
    existing = known_hosts.read_text() if known_hosts.exists() else ""
    with known_hosts.open("a") as f:
        if existing and not existing.endswith("\n"):
            f.write("\n")
        f.write(line)


def file_with_host(hostname: str, port: int, known_hosts: Sequence[Path]) -> Path | None:
    """The known_hosts file that holds a key for this host (the one a changed key contradicts)."""
    for path in known_hosts:
        try:
            if path.is_file() and asyncssh.read_known_hosts(str(path)).match(hostname, "", port)[0]:
                return path
        except (OSError, ValueError, asyncssh.Error):
            continue
    return None


def refusal_message(info: HostKeyInfo, known_hosts: Sequence[Path] = ()) -> str:
    if info.changed:
        name = known_hosts_name(info.hostname, info.port)
        path = file_with_host(info.hostname, info.port, known_hosts) or next(iter(known_hosts), None)
        where = str(path) if path else "known_hosts"
        fix = f"ssh-keygen -R {shlex.quote(name)}" + (f" -f {shlex.quote(str(path))}" if path else "")
        return (
            f"HOST KEY CHANGED for {info.host} ({name}): the server now offers {info.key_type} "
            f"{info.fingerprint}, which does not match the key in {where}. This can be a man-in-the-middle "
            f"attack. Nothing was run. If the change is expected, remove the old key with `{fix}` "
            f"and connect again."
        )
    return (
        f"unknown host key for {info.host} ({known_hosts_name(info.hostname, info.port)}): {info.key_type} "
        f"{info.fingerprint}; refusing. Check the fingerprint and rerun with --accept-new-host-key to trust and save it."
    )
