"""§5: only regular files are read (a FIFO, /dev/zero or a directory is refused, saying what it is),
and a huge line (a 10 MB line, a sparse file of zeros) streams in bounded memory with the line
marked truncated. Over the real sshd for files on the box; locally for local paths."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.events import LogEvent
from specdebug.core.logs.follow import Follower, RawLine
from tests import clifork
from tests.security.cli_run import run_cli
from tests.unit.test_log_follow_local import Pump


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.log"
    os.mkfifo(path)
    return path


def _box(sshd, path: Path | str) -> list[str]:
    return ["-F", str(sshd.config_path), f"{sshd.alias}:{path}"]


@pytest.mark.parametrize("verb", ["grep", "scan"])
def test_fifo_on_the_box_is_refused(sshd, fifo: Path, verb: str) -> None:
    args = [verb, *_box(sshd, fifo)] + (["-e", "x"] if verb == "grep" else [])
    res = run_cli(*args, timeout=60)
    assert res.rc == 1, res.err
    assert "fifo" in res.err.lower() and "not a regular file" in res.err and "Traceback" not in res.err


@pytest.mark.parametrize("target", ["/dev/zero", "DIR"])
def test_device_and_directory_on_the_box_are_refused(sshd, tmp_path: Path, target: str) -> None:
    path = str(tmp_path) if target == "DIR" else target
    for args in (["scan", *_box(sshd, path)], ["grep", *_box(sshd, path), "-e", "x"]):
        res = run_cli(*args, timeout=60)
        assert res.rc == 1, res.err
        want = "directory" if target == "DIR" else "character"
        assert want in res.err and "not a regular file" in res.err, res.err


async def test_follow_of_a_fifo_reports_and_ends(remote, fifo: Path) -> None:
    follower = Follower(remote, str(fifo), offset=0)

    async def run() -> list:
        return [item async for item in follower.lines()]

    items = await asyncio.wait_for(run(), 60)
    errors = [i.detail for i in items if isinstance(i, LogEvent) and i.kind == "error"]
    assert errors and "FIFO" in errors[0]


@pytest.mark.parametrize("target", ["FIFO", "/dev/zero", "DIR"])
def test_local_scan_grep_and_bench_parse_refuse_non_regular(fifo: Path, tmp_path: Path, target: str) -> None:
    path = {"FIFO": str(fifo), "DIR": str(tmp_path)}.get(target, target)
    for args, rc in ((["scan", path], 1), (["grep", path, "-e", "x"], 1), (["bench", "--parse", path], 2)):
        res = run_cli(*args, timeout=60)
        assert res.rc == rc and "not a regular file" in res.err, (args, res.rc, res.err)


def test_sparse_file_on_the_box_scans_in_bounded_memory(sshd, tmp_path: Path) -> None:
    log = tmp_path / "sparse.log"
    with open(log, "wb") as f:
        f.write(b"[2026-01-15 12:00:00] server_args=ServerArgs(model_path='m')\n")
        f.truncate(256 << 20)  # 256 MiB of zeros: one endless line, no newline
    res = run_cli("scan", *_box(sshd, log), "--json", timeout=240)
    assert res.rc == 0, res.err
    d = json.loads(res.out)
    assert d["lines"] == 2 and d["truncated_lines"] == 1 and d["bytes"] == 256 << 20
    assert res.peak_rss_mb < 400, f"peak RSS {res.peak_rss_mb:.0f} MB for a 256 MiB line"


def test_bench_parse_of_a_huge_file_reads_a_bounded_tail(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with open(path, "wb") as f:
        f.truncate(1 << 30)  # 1 GiB sparse: 10 GB of RSS with a plain read
    res = run_cli("bench", "--parse", str(path), timeout=120)
    assert res.rc == 1 and "only its last" in res.err, res.err
    assert res.peak_rss_mb < 400


async def test_ten_megabyte_line_while_following(remote, tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"")
    pump = Pump(Follower(remote, str(log), offset=0).lines())
    await pump.until(lambda p: "opened" in p.events(), timeout=60)
    with open(log, "ab") as f:
        f.write(b"before\n" + b"x" * 10_000_000 + b"\nafter\n")
    await pump.until(lambda p: len(p.lines()) >= 3, timeout=120)
    with open(log, "ab") as f:
        f.write(b"later\n")
    await pump.until(lambda p: len(p.lines()) >= 4, timeout=60)
    await pump.stop()
    lines: list[RawLine] = pump.lines()
    assert [(x.offset, x.truncated) for x in lines] == [
        (0, None),
        (7, 10_000_000),
        (10_000_008, None),
        (10_000_014, None),
    ]
    assert lines[1].data == b"x" * MAX_LINE
    assert [lines[0].data, lines[2].data, lines[3].data] == [b"before", b"after", b"later"]
    assert "error" not in pump.events()


def test_grep_json_marks_a_cut_line(sshd, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"short hit\n" + b"hit " + b"y" * 200_000 + b"\nlast\n")
    res = run_cli("grep", *_box(sshd, log), "-e", "hit", "--json", timeout=90)
    assert res.rc == 0, res.err
    got = [json.loads(x) for x in res.out.splitlines()]
    assert [g.get("truncated") for g in got] == [None, 200_004]
    assert len(got[1]["line"]) == MAX_LINE and got[1]["offset"] == 10


def test_scan_progress_only_on_a_terminal(tmp_path: Path) -> None:
    import pty
    import subprocess
    import sys

    log = tmp_path / "server.log"
    log.write_bytes(b"[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 1, accept len: 2.50\n" * 40_000)
    cmd = [sys.executable, "-m", "specdebug.cli", "scan", str(log)]
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out, _ = proc.communicate(timeout=120)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == 0 and b"lines: 40000" in out
    assert b"scanned" in seen and b"MB/s" in seen  # progress on the terminal...
    piped = clifork.run(cmd, capture_output=True, timeout=120)
    assert piped.returncode == 0 and b"scanned" not in piped.stderr  # ...and not into a pipe


def test_startup_excerpt_lines_are_capped() -> None:
    from specdebug.core.control.watch import _clean_line

    text = _clean_line(b"E" * 10_000_000 + b"\n")
    assert len(text) < MAX_LINE + 100 and text.endswith("more characters cut]")
