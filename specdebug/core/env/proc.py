"""Parsing the /proc files an environment check reads (environ, status, passwd, stat's btime).

Pure byte parsing, separate from the verdict rules so each format is tested on its own.
"""

from __future__ import annotations

import re

from specdebug.core.env.model import EnvironState
from specdebug.remote.api import FileRead
from specdebug.remote.shell import ENV_NAME_RE

_NAME_RE = re.compile(ENV_NAME_RE.pattern.encode())  # the one rule, on raw environ bytes
# ---------------------------------------------------------------------------------------------
# parsing /proc files


def parse_environ(data: bytes) -> dict[str, str] | None:
    """NAME=value pairs of a NUL-separated environ; None when it holds no pair at all (clobbered)."""
    env: dict[str, str] = {}
    for chunk in data.split(b"\0"):
        name, sep, value = chunk.partition(b"=")
        if sep and _NAME_RE.match(name):
            env[name.decode("ascii")] = value.decode("utf-8", "surrogateescape")
    return env or None


def parse_status(data: bytes | None) -> dict[str, str]:
    """/proc/PID/status as a dict of its `Key:\\tvalue` lines."""
    out: dict[str, str] = {}
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_passwd(data: bytes | None) -> dict[int, str]:
    out: dict[int, str] = {}
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        parts = line.split(":")
        if len(parts) > 3 and parts[2].isdigit():
            out.setdefault(int(parts[2]), parts[0])
    return out


def parse_btime(data: bytes | None) -> float | None:
    for line in (data or b"").decode("ascii", "replace").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def classify_environ(
    read: FileRead | None, proc_state: str | None
) -> tuple[EnvironState, dict[str, str], str | None]:
    """environ_state, the env (empty unless readable), and the error name (EACCES...) if any."""
    if read is None or read.error in ("ENOENT", "ESRCH") or proc_state in ("Z", "X"):
        return "gone", {}, (read.error if read else "ENOENT") or "zombie"
    if read.error in ("EACCES", "EPERM"):
        return "denied", {}, read.error
    if read.error:
        return "denied", {}, read.error
    data = read.data or b""
    if data == b"":
        # a process started with an empty environment (env -i) reads as b"", not as NULs
        return "readable", {}, None
    env = parse_environ(data)
    if env is None:
        return "clobbered", {}, None
    return "readable", env, None
