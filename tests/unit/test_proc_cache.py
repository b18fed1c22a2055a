"""The box helper's per-PID process cache: reused PIDs are read afresh, filters return subsets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from specdebug.box.proclist import ProcCache
from specdebug.core.control.workers import listing_filter, select_workers
from specdebug.remote.api import ProcInfo

BOOT_UPTIME = 100000.0  # seconds since boot in the fake /proc


class FakeProc:
    """A fake /proc (pure data): pid -> (inode, stat fields, cmdline)."""

    def __init__(self) -> None:
        self.procs: dict[int, tuple[int, str, bytes]] = {}

    def add(self, pid: int, ino: int, ppid: int, pgid: int, start: int, argv: list[str]) -> None:
        stat = f"{pid} (x) S {ppid} {pgid} {pgid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0"
        self.procs[pid] = (ino, stat, b"\0".join(a.encode() for a in argv) + b"\0")

    def cache(self) -> ProcCache:
        def read(path: str) -> bytes:
            if path == "/p/uptime":
                return f"{BOOT_UPTIME} 0".encode()
            _, pid, name = path.split("/")[1:]
            if int(pid) not in self.procs:
                raise FileNotFoundError(path)
            ino, stat, cmd = self.procs[int(pid)]
            return stat.encode() if name == "stat" else cmd

        return ProcCache(
            root="/p",
            listdir=lambda: [(pid, v[0]) for pid, v in self.procs.items()],
            read=read,
            owner=lambda path: 1000,
        )


def rows_by_pid(rows: list) -> dict[int, list]:
    return {r[0]: r for r in rows}


def test_unchanged_process_is_not_read_again_for_a_filtered_listing() -> None:
    fake = FakeProc()
    fake.add(1, 11, 0, 1, 10, ["init"])
    for pid in range(100, 400):
        fake.add(pid, pid * 10, 1, pid, 100, [f"sleep-{pid}"])
    fake.add(500, 5000, 1, 500, 100, ["sglang::scheduler_TP0"])
    cache = fake.cache()
    cache.listing()  # first sight: everything read
    before = cache.reads
    rows = cache.listing(match="sglang::")
    assert sorted(rows_by_pid(rows)) == [1, 500]  # the match and its ancestor
    assert cache.reads - before == 2  # only the returned processes' stat, nothing else


def test_reused_pid_with_new_start_time_is_read_again() -> None:
    fake = FakeProc()
    fake.add(1, 11, 0, 1, 10, ["init"])
    fake.add(200, 2000, 1, 200, 100, ["old-title"])
    cache = fake.cache()
    assert rows_by_pid(cache.listing())[200][8] == ["old-title"]
    fake.add(200, 2001, 1, 200, 500, ["new-title"])  # same PID, a new process (new start, new inode)
    assert rows_by_pid(cache.listing())[200][8] == ["new-title"]
    assert rows_by_pid(cache.listing(match="new-title"))[200][6] == 500


def test_reused_pid_is_reread_even_when_the_inode_number_repeats() -> None:
    fake = FakeProc()
    fake.add(1, 11, 0, 1, 10, ["init"])
    fake.add(200, 2000, 1, 200, 100, ["old-title"])
    cache = fake.cache()
    cache.listing()
    fake.add(200, 2000, 1, 200, 500, ["new-title"])  # full listing reads stat: start time decides
    assert rows_by_pid(cache.listing())[200][8] == ["new-title"]


def test_young_process_title_is_not_trusted_from_cache() -> None:
    fake = FakeProc()
    fake.add(1, 11, 0, 1, 10, ["init"])
    just_started = int(BOOT_UPTIME * os.sysconf("SC_CLK_TCK")) - 1
    fake.add(300, 3000, 1, 300, just_started, ["python", "-m", "sglang"])
    cache = fake.cache()
    cache.listing()
    fake.add(300, 3000, 1, 300, just_started, ["sglang::scheduler_TP0"])  # setproctitle
    assert 300 in rows_by_pid(cache.listing(match="sglang::scheduler"))


def test_tree_and_group_filters_match_select_workers() -> None:
    fake = FakeProc()
    fake.add(1, 11, 0, 1, 10, ["init"])
    fake.add(50, 500, 1, 50, 10, ["bash"])
    fake.add(60, 600, 50, 60, 10, ["launcher"])
    fake.add(61, 610, 60, 60, 10, ["worker", "0"])
    fake.add(62, 620, 61, 60, 10, ["worker", "1"])
    fake.add(70, 700, 1, 70, 10, ["unrelated"])
    cache = fake.cache()
    full = [ProcInfo(*r) for r in cache.listing()]
    for where in ({"root_pid": 60}, {"pgid": 60}, {"match": "worker"}, {"pids": [62]}):
        kw = listing_filter(**where)
        sub = [
            ProcInfo(*r)
            for r in cache.listing(
                match=kw.get("match"), pgid=kw.get("pgid"), root=kw.get("root_pid"), pids=kw.get("pids")
            )
        ]
        assert 70 not in {p.pid for p in sub}
        a, b = select_workers(full, **where), select_workers(sub, **where)
        assert [p.pid for p in a.workers] == [p.pid for p in b.workers]
        assert (a.launcher and a.launcher.pid) == (b.launcher and b.launcher.pid)


def test_real_proc_filter_finds_own_child_and_drops_the_rest() -> None:
    tag = f"proc-cache-test-{os.getpid()}-{time.time_ns()}"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", tag], start_new_session=True
    )
    try:
        # until the child has exec'd, /proc shows the forked pytest's cmdline (a loaded machine can
        # take a while): the filter is what is tested here, not how fast a child starts
        deadline = time.monotonic() + 30
        while tag.encode() not in Path(f"/proc/{child.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the child never exec'd"
            time.sleep(0.01)
        cache = ProcCache()
        full = cache.listing()
        rows = cache.listing(match=tag)
        pids = {r[0] for r in rows}
        assert child.pid in pids
        assert len(rows) < len(full)
        assert all(r[0] == child.pid or tag not in " ".join(r[8]) for r in rows)
    finally:
        os.killpg(child.pid, 9)
        child.wait()
