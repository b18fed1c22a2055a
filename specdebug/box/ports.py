"""Who listens on a TCP port, seen from the box: an op of the resident helper (helper.py).

/proc/net/tcp{,6} give the inode of each LISTEN socket on the port; the /proc/PID/fd links name it.
Sockets of another user's processes are not visible (their fd folders are not readable): the port
then shows as in use with no PIDs, and the client says so.  Stdlib only, Python >= 3.7.

Op:  port_holder {port} -> {listening, pids, cmdline (of the lowest PID), owners [{uid, user}] of the
     listening sockets (visible for every user), self_uid (this login's), and when the port is taken
     free: a port nobody listens on now, from this login's $SPECDEBUG_SIM_PORTS block (what `specdebug
     sim install-box` gives each user) else the first above the port, with free_from saying which}
     connected_to {port, pids} -> {pids: those of `pids` holding an ESTABLISHED connection to a remote
     `port`} (a deployment node's processes joined the rendezvous at the leader's port, or did not)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: never evaluated by the box's python3
    from collections.abc import Callable, Iterator

LISTEN = "0A"  # the st column of /proc/net/tcp for a listening socket
ESTABLISHED = "01"
MAX_PIDS = 4096


def listening_inodes(
    port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6"), uids: set[int] | None = None
) -> set[str]:
    """fd link texts (`socket:[INODE]`) of the sockets listening on `port` (their owners' uids,
    which /proc/net/tcp shows for every user's socket, go into `uids`)."""
    inodes = set()
    for f in _tcp_rows(tables):
        if f[3] == LISTEN and int(f[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(f"socket:[{f[9]}]")
            if uids is not None and f[7].isdigit():
                uids.add(int(f[7]))
    return inodes


def _tcp_rows(tables: tuple[str, ...]) -> Iterator[list[str]]:
    """The split lines of the socket tables (header skipped); an unreadable table has none."""
    for name in tables:
        try:
            with open(name) as fh:
                next(fh)
                rows = [f for f in (line.split() for line in fh) if len(f) > 9]
        except (OSError, StopIteration):
            continue
        yield from rows


def holders(inodes: set[str]) -> list[int]:
    """PIDs with an open fd on one of the sockets (only processes whose fds we may read)."""
    pids: list[int] = []
    if not inodes:
        return pids
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    pids.append(int(pid))
                    break
            except OSError:
                pass
    return sorted(pids)


def _user(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def port_holder(port: int) -> dict[str, Any]:
    uids: set[int] = set()
    inodes = listening_inodes(port, uids=uids)
    pids = holders(inodes)
    cmd: list[str] = []
    if pids:
        try:
            with open(f"/proc/{pids[0]}/cmdline", "rb") as fh:
                cmd = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
        except OSError:
            pass
    owners = [{"uid": u, "user": _user(u)} for u in sorted(uids)]
    return {
        "listening": bool(inodes),
        "pids": pids,
        "cmdline": cmd,
        "owners": owners,
        "self_uid": os.getuid(),
    }


def op_port_holder(req: dict[str, Any]) -> dict[str, Any]:
    port = int(req["port"])
    out = port_holder(port)
    if out["listening"]:
        out["free"], out["free_from"] = free_port_for(port)
    return out


PORTS_VAR = "SPECDEBUG_SIM_PORTS"  # LOW-HIGH (HIGH excluded): this login's block (sim/box/install.py)
FREE_SCAN = 1000  # ports looked at above a taken one when the login has no block


def listening_ports(tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> set[int]:
    """Every port some socket listens on (any user's: the tables show them all)."""
    ports = set()
    for f in _tcp_rows(tables):
        if f[3] == LISTEN:
            try:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
            except ValueError:
                continue
    return ports


def _own_block() -> tuple[int, int] | None:
    low, sep, high = os.environ.get(PORTS_VAR, "").strip().partition("-")
    try:
        lo, hi = int(low), int(high)
    except ValueError:
        return None
    return (lo, hi) if sep and 1024 <= lo < hi <= 65536 else None


def free_port_for(port: int) -> tuple[int | None, str]:
    """A port to suggest instead of a taken one: nobody listens on it now (the launch checks again).
    This login's block first (two users of a box then never get the same suggestion), else above."""
    taken = listening_ports()
    block = _own_block()
    if block is not None:
        for candidate in range(*block):
            if candidate not in taken:
                return candidate, PORTS_VAR
    for candidate in range(port + 1, min(port + 1 + FREE_SCAN, 65536)):
        if candidate not in taken:
            return candidate, "above"
    return None, ""


def connected_inodes(port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> set[str]:
    """fd link texts of the ESTABLISHED sockets whose remote end is on `port`."""
    inodes = set()
    for name in tables:
        try:
            for f in _tcp_rows((name,)):
                if f[3] == ESTABLISHED and int(f[2].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{f[9]}]")
        except ValueError:
            pass  # the rest of that table, as before: a malformed line ends its reading
    return inodes


def op_connected_to(req: dict[str, Any]) -> dict[str, Any]:
    port = int(req["port"])
    pids = [int(p) for p in req.get("pids") or []][:MAX_PIDS]
    inodes = connected_inodes(port)
    found = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    found.append(pid)
                    break
            except OSError:
                pass
    return {"pids": sorted(found)}


OPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "port_holder": op_port_holder,
    "connected_to": op_connected_to,
}
