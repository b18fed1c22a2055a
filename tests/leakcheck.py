"""No process the suite started outlives it (issue 26: an 11-process sim ran on 7 minutes later).

The tag: the process that runs the session (the xdist controller, or the only process with
`-n 0`) puts `SPECDEBUG_TEST_RUN=<run id>` in its environment before any worker or test starts,
so every process the suite starts inherits it (workers, sims, tmux servers, the demo's box);
the test sshd hands it to every session it opens (`SetEnv`, tests/sshd_harness.py), so what a
test launches on the box carries it too.  A process found by that tag in /proc/PID/environ
brings along the other members of its session and process group (a sim's workers, whose
environ setproctitle overwrites), never the session of pytest itself.  Nothing is found by name.
The test sshds are found by the pid files in the run's folder (`own_sshds`).
At the session's end, after the workers have ended, what is still running is listed, ended
(TERM, then KILL, by PID) and fails the run.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

TAG_VAR = "SPECDEBUG_TEST_RUN"
# a server a test stopped may still be on its way out; the suite's own test of this check, whose
# leak (`sleep 300`) never ends by itself, sets a short grace (tests/integration/test_suite_cleanup.py)
GRACE_S = float(os.environ.get("SPECDEBUG_LEAK_GRACE_S", "10"))
TERM_WAIT_S = 5.0


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    cmdline: str

    def line(self) -> str:
        return f"PID {self.pid} (parent {self.ppid}, group {self.pgid}): {self.cmdline[:200]}"


def tag_this_run() -> str:
    """A new tag for this run, in the environment its children inherit (a pytest run inside a
    test gets its own: it must never end the outer run's processes)."""
    os.environ[TAG_VAR] = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    return os.environ[TAG_VAR]


def _stat(pid: int | str) -> tuple[str, list[str]] | None:
    """(its comm, the fields after it: state, ppid, pgid, sid, ...) of a living process; None for a
    zombie or one that is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, _, rest = stat.rpartition(")")
    fields = rest.split()
    return None if fields[0] in ("Z", "X") else (head.partition("(")[2], fields)


def _read(pid: int) -> tuple[Proc, bytes] | None:
    """(the process, its environ) for a living process; None for a zombie or one that is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    if (stat := _stat(pid)) is None:
        return None
    comm, fields = stat
    cmd = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip() or comm
    proc = Proc(pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), sid=int(fields[3]), cmdline=cmd)
    return proc, environ


def _living() -> list[tuple[Proc, bytes]]:
    return [r for d in os.listdir("/proc") if d.isdigit() and (r := _read(int(d))) is not None]


def living_groups(pgids: list[int]) -> list[int]:
    """The groups among `pgids` with a living member (zombies do not count), from each process's
    stat alone (another user's process counts too: its environ need not be readable)."""
    wanted, found = set(pgids), set()
    for d in os.listdir("/proc"):
        if d.isdigit() and (stat := _stat(d)) is not None and int(stat[1][2]) in wanted:
            found.add(int(stat[1][2]))
    return sorted(found)


def group_members(pgid: int) -> list[Proc]:
    """The living (not zombie) processes of one process group: a test's or a script's own."""
    return [p for p, _ in _living() if p.pgid == pgid]


def tagged(tag: str) -> list[Proc]:
    """Living processes of this run: those with the tag, and the members of their sessions and
    groups (except pytest's own session and group: the user's shell is there)."""
    me = os.getpid()
    own_sid, own_pgid = os.getsid(me), os.getpgid(me)
    marker = f"{TAG_VAR}={tag}".encode()
    table = _living()
    hits = [p for p, env in table if marker in env.split(b"\0") and p.pid != me]
    sids = {p.sid for p in hits} - {own_sid}
    pgids = {p.pgid for p in hits} - {own_pgid}
    found = {p.pid: p for p in hits}
    for p, _ in table:
        if p.pid != me and (p.sid in sids or p.pgid in pgids):
            found.setdefault(p.pid, p)
    return sorted(found.values(), key=lambda p: p.pid)


def own_sshds(root: Path | None) -> list[Proc]:
    """This run's test sshds (tests/sshd_harness.py) still running, by the PidFile each writes in its
    own folder under the run's `root`, checked against the config path in its title.  The tag cannot
    find them: sshd writes its title over its environ.  A worker that crashed never stopped its own."""
    found = []
    for pidfile in root.rglob("sshd.pid") if root is not None else ():
        try:
            got = _read(int(pidfile.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            continue
        if got is not None and f"-f {pidfile.parent / 'sshd_config'}" in got[0].cmdline:
            found.append(got[0])
    return found


def left_running(tag: str, grace_s: float = GRACE_S, root: Path | None = None) -> list[Proc]:
    deadline = time.monotonic() + grace_s
    while True:
        alive = {p.pid: p for p in [*tagged(tag), *own_sshds(root)]}
        if not alive or time.monotonic() >= deadline:
            return sorted(alive.values(), key=lambda p: p.pid)
        time.sleep(0.2)


def _still(p: Proc) -> bool:
    """It still runs (not a zombie; an sshd's title changes as it runs, so it is not compared)."""
    return _read(p.pid) is not None


def end(procs: list[Proc], tag: str) -> list[Proc]:
    """TERM each listed process by PID, KILL what is left after a wait; returns what survived."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + TERM_WAIT_S
        while time.monotonic() < deadline:
            procs = [p for p in procs if _still(p)]
            if not procs:
                return []
            time.sleep(0.1)
    return procs
