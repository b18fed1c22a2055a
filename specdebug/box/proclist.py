"""The box's process table for the `ps` op of the resident helper (helper.py): runs ON THE BOX.

Shipped in the same bundle as helper.py (specdebug.remote.boxcode), which serves RAW_OPS as its
own ops (the request is passed whole, as for run and read).  Stdlib only, Python >= 3.7.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: never evaluated by the box's python3
    from collections.abc import Callable

    Request = dict[str, Any]
    Op = Callable[[Request], dict[str, Any]]
    Row = list[Any]  # [pid, ppid, pgid, sid, uid, state, start_ticks, comm, argv]

# --- process listing ------------------------------------------------------------------------
# A busy GPU box has thousands of processes; reading stat+cmdline+uid of each on every request
# grows with the box.  Facts that cannot change while a process lives (start time, uid, and the
# cmdline once the process has settled: titles are set right after start) are cached per PID and
# keyed by start time, so a reused PID is read afresh.  A filtered request ("match"/"pgid"/"root"/
# "pids") decides membership from the cache, validated by the /proc/PID inode number that the
# directory listing gives for free (a new process behind the same PID is a new inode), and then
# reads stat again only for what it returns.

SETTLE_S = 10.0  # younger processes may still change their title (setproctitle) or group
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read_bytes(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _uid_of(path: str) -> int:
    return os.stat(path).st_uid


class ProcCache:
    """Per-PID cache of the process table (root, listdir and read are injectable for tests).

    entries: pid -> [inode, start_ticks, row, settled, cmdline text, {regex: matched}]."""

    def __init__(
        self,
        root: str = "/proc",
        listdir: Callable[[], list[tuple[int, int]]] | None = None,
        read: Callable[[str], bytes] | None = None,
        owner: Callable[[str], int] | None = None,
    ) -> None:
        self.root = root
        self._listdir = listdir or self._scan
        self._read = read or _read_bytes
        self._owner = owner or _uid_of
        self.entries: dict[int, list[Any]] = {}
        self.reads = 0  # files read (for tests and the benchmark)
        self._lock = threading.Lock()

    def _scan(self) -> list[tuple[int, int]]:
        return [(int(e.name), e.inode()) for e in os.scandir(self.root) if e.name.isdigit()]

    def _uptime(self) -> float:
        try:
            return float(self._read(self.root + "/uptime").split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0

    def _load(self, pid: int, ino: int, uptime: float) -> Row | None:
        """Read stat (always) and cmdline/uid (unless cached for the same start time); None: gone."""
        base = f"{self.root}/{pid}"
        try:
            stat = self._read(base + "/stat").decode("utf-8", "replace")
        except OSError:
            self.entries.pop(pid, None)
            return None
        self.reads += 1
        lp, rp = stat.find("("), stat.rfind(")")
        fields = stat[rp + 2 :].split()
        start = int(fields[19])
        old = self.entries.get(pid)
        args: list[str]
        if old is not None and old[1] == start and old[3]:
            args, uid = old[2][8], old[2][4]
        else:
            try:
                cmdline = self._read(base + "/cmdline")
                uid = self._owner(base)
            except OSError:
                self.entries.pop(pid, None)
                return None
            self.reads += 1
            args = [a.decode("utf-8", "replace") for a in cmdline.split(b"\0")]
            while args and args[-1] == "":
                args.pop()
        row: Row = [
            pid,
            int(fields[1]),
            int(fields[2]),
            int(fields[3]),
            uid,
            fields[0],
            start,
            stat[lp + 1 : rp],
            args,
        ]
        settled = uptime - start / float(_CLK_TCK) >= SETTLE_S
        text = " ".join(a for a in args if a)
        self.entries[pid] = [ino, start, row, settled, text, {}]  # {}: regex -> matched (memo)
        return row

    def listing(
        self,
        match: str | None = None,
        pgid: int | None = None,
        root: int | None = None,
        pids: list[int] | None = None,
    ) -> list[Row]:
        """Rows of the whole table, or (any filter given) of the matching processes and their ancestors."""
        with self._lock:
            listed = self._listdir()
            uptime = self._uptime()
            if match is None and pgid is None and root is None and not pids:
                loaded = [self._load(pid, ino, uptime) for pid, ino in listed]
                self._forget(listed)
                return [r for r in loaded if r is not None]
            alive = dict(listed)
            table = {}
            for pid, ino in listed:
                e = self.entries.get(pid)
                # cached: same inode (same process), settled, and its parent still there (no reparenting)
                if e is not None and e[0] == ino and e[3] and (e[2][1] in alive or e[2][1] == 0):
                    table[pid] = e
                elif self._load(pid, ino, uptime) is not None:
                    table[pid] = self.entries[pid]
            self._forget(listed)
            chosen = _choose(table, match, pgid, root, pids)
            rows = []
            for pid in sorted(chosen):
                row = self._load(pid, alive[pid], uptime)  # fresh state/ppid for what is returned
                if row is not None:
                    rows.append(row)
            return rows

    def _forget(self, listed: list[tuple[int, int]]) -> None:
        if len(self.entries) > len(listed):
            alive = set(pid for pid, _ in listed)
            for pid in [p for p in self.entries if p not in alive]:
                del self.entries[pid]


def _choose(
    table: dict[int, list[Any]],
    match: str | None,
    pgid: int | None,
    root: int | None,
    pids: list[int] | None,
) -> set[int]:
    """PIDs matching any given filter, with every ancestor (the client finds launchers from them).

    table: pid -> cache entry [ino, start, row, settled, cmdline text, regex memo].
    """
    chosen: set[int] = set()
    if match is not None:
        rx = re.compile(match)
        for pid, e in table.items():
            hit = e[5].get(match)
            if hit is None:
                hit = e[5][match] = bool(e[4]) and rx.search(e[4]) is not None
            if hit:
                chosen.add(pid)
    if pgid is not None:
        chosen.update(pid for pid, e in table.items() if e[2][2] == pgid)
    if root is not None and root in table:
        children: dict[int, list[int]] = {}
        for pid, e in table.items():
            children.setdefault(e[2][1], []).append(pid)
        stack = [root]
        chosen.add(root)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in chosen:
                    chosen.add(child)
                    stack.append(child)
    chosen.update(pid for pid in (pids or ()) if pid in table)
    for pid in list(chosen):
        seen = 0
        cur = table[pid][2][1]
        while cur in table and cur not in chosen and seen < 4096:
            chosen.add(cur)
            cur = table[cur][2][1]
            seen += 1
    return chosen


_PROCS = ProcCache()


def _op_ps(req: Request) -> dict[str, Any]:
    return {
        "procs": _PROCS.listing(
            match=req.get("match"), pgid=req.get("pgid"), root=req.get("root"), pids=req.get("pids")
        )
    }


RAW_OPS: dict[str, Op] = {"ps": _op_ps}
