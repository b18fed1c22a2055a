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
import socket
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: never evaluated by the box's python3
    from collections.abc import Callable, Iterator

LISTEN = "0A"  # the st column of /proc/net/tcp for a listening socket
ESTABLISHED = "01"
MAX_PIDS = 4096


TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
TCP_LISTEN = 10  # the kernel's TCP state number of LISTEN (0A in /proc/net/tcp)
SOCK_DIAG = 4  # NETLINK_SOCK_DIAG
SOCK_DIAG_BY_FAMILY, NLMSG_ERROR, NLMSG_DONE = 20, 2, 3
NLM_F_REQUEST_DUMP = 0x301  # NLM_F_REQUEST | NLM_F_DUMP


def listeners(tables: tuple[str, ...] = TABLES) -> list[tuple[int, int, str]]:
    """(port, owner uid, fd link text `socket:[INODE]`) of every TCP socket listening (any user's).

    From the kernel's sock_diag netlink where it answers: it walks the listening sockets only, ~0.1 ms,
    where /proc/net/tcp (and tcp6, even when empty) walks every socket of the machine, ~4 ms each on a
    box with a few hundred connections, which was 80 % of a warm `status`.  Else from the tables."""
    if tables == TABLES:
        found = _diag_listeners(socket.AF_INET)
        found6 = _diag_listeners(socket.AF_INET6) if found is not None else None
        if found is not None and found6 is not None:
            return found + found6
    rows: list[tuple[int, int, str]] = []
    for f in _tcp_rows(tables):
        if f[3] == LISTEN:
            try:
                port = int(f[1].rsplit(":", 1)[1], 16)
            except ValueError:
                continue
            rows.append((port, int(f[7]) if f[7].isdigit() else -1, f"socket:[{f[9]}]"))
    return rows


def _diag_listeners(family: int) -> list[tuple[int, int, str]] | None:
    """The listening TCP sockets of one address family from sock_diag; None where it does not answer
    (no netlink: not Linux, a sandbox), so the tables are read instead."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, SOCK_DIAG)
    except (AttributeError, OSError):
        return None
    try:
        sock.settimeout(2.0)
        # inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid (48 bytes, any)
        req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN) + bytes(48)
        sock.sendall(
            struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST_DUMP, 1, 0) + req
        )
        found: list[tuple[int, int, str]] = []
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return None
            at = 0
            while at + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, at)
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR or length < 16:
                    return None
                body = at + 16  # inet_diag_msg: family, state, timer, retrans, sockid (sport first), ...
                if length >= 16 + 72 and data[body + 1] == TCP_LISTEN:
                    port = struct.unpack_from("!H", data, body + 4)[0]
                    uid, inode = struct.unpack_from("=II", data, body + 64)
                    found.append((port, uid, f"socket:[{inode}]"))
                at += (length + 3) & ~3
    except (OSError, struct.error):
        return None
    finally:
        sock.close()


def listening_inodes(port: int, tables: tuple[str, ...] = TABLES, uids: set[int] | None = None) -> set[str]:
    """fd link texts (`socket:[INODE]`) of the sockets listening on `port` (their owners' uids,
    which the kernel shows for every user's socket, go into `uids`)."""
    return _inodes_on(port, listeners(tables), uids)


def _inodes_on(port: int, found: list[tuple[int, int, str]], uids: set[int] | None = None) -> set[str]:
    inodes = set()
    for listen_port, uid, inode in found:
        if listen_port == port:
            inodes.add(inode)
            if uids is not None and uid >= 0:
                uids.add(uid)
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


def port_holder(port: int, found: list[tuple[int, int, str]] | None = None) -> dict[str, Any]:
    uids: set[int] = set()
    inodes = _inodes_on(port, listeners() if found is None else found, uids)
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
    found = listeners()  # read once: the holder and the free port come from the same look
    out = port_holder(port, found)
    if out["listening"]:
        out["free"], out["free_from"] = free_port_for(port, found)
    return out


PORTS_VAR = "SPECDEBUG_SIM_PORTS"  # LOW-HIGH (HIGH excluded): this login's block (sim/box/install.py)
FREE_SCAN = 1000  # ports looked at above a taken one when the login has no block


def listening_ports(tables: tuple[str, ...] = TABLES) -> set[int]:
    """Every port some socket listens on (any user's: the kernel shows them all)."""
    return {port for port, _, _ in listeners(tables)}


def _own_block() -> tuple[int, int] | None:
    low, sep, high = os.environ.get(PORTS_VAR, "").strip().partition("-")
    try:
        lo, hi = int(low), int(high)
    except ValueError:
        return None
    return (lo, hi) if sep and 1024 <= lo < hi <= 65536 else None


def free_port_for(port: int, found: list[tuple[int, int, str]] | None = None) -> tuple[int | None, str]:
    """A port to suggest instead of a taken one: nobody listens on it now (the launch checks again).
    This login's block first (two users of a box then never get the same suggestion), else above."""
    taken = {p for p, _, _ in found} if found is not None else listening_ports()
    block = _own_block()
    if block is not None:
        for candidate in range(*block):
            if candidate not in taken:
                return candidate, PORTS_VAR
    for candidate in range(port + 1, min(port + 1 + FREE_SCAN, 65536)):
        if candidate not in taken:
            return candidate, "above"
    return None, ""


def connected_inodes(port: int, tables: tuple[str, ...] = TABLES) -> set[str]:
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
