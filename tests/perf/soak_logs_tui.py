"""Soak: the Logs pane follows a log written at 20k lines/s for N minutes, in the real TUI in tmux.

    python tests/perf/soak_logs_tui.py [--minutes 10] [--rate 20000] [--match-every 1]

It starts its own loopback sshd (tests/sshd_harness.py), a writer appending SGLang decode lines at
`--rate` lines/s (one in `--match-every` is a decode line the pane counts, the rest noise), and the
TUI in a private tmux server following the file (keys 3, o, the path, Enter, as a user types
them). Every minute it prints the TUI process's RSS, the lines written, the matches the pane's
status line reports and what it says about being behind. At the end the writer stops, the pane is
given time to read the rest, and the last line says whether RSS stayed within 20 % of the first
minute's and whether the count equals what was written:

    RESULT minutes=.. rate=.. written=.. counted=.. not_counted=.. in_hand=.. rss_first_mib=.. rss_max_mib=.. flat=yes|no

not_counted: decode lines the pane had not read when the catch-up time ran out (while it says how far
behind it is); they are still in the file, not lost.  To check the count exactly the pane is then
stopped (x) and marked (m): the mark in the session journal holds the follower's offset and the
pane's count, and the decode lines of the file before that offset are counted here.  in_hand: lines
read from the box but not yet counted when the stop came (at most one block; a count above the
lines before the offset would be a double count, and more than a block missing a loss).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sshd_harness import start_sshd  # noqa: E402
from tests.tmux_harness import Tmux  # noqa: E402

DECODE = (
    "[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 16, #token: 150000, token usage: 0.41, "
    "accept len: {al:.2f}, accept rate: 0.74, cuda graph: True, gen throughput (token/s): 310.40, "
    "#queue-req: 0"
)
NOISE = '[2026-01-15 12:00:03] INFO:     127.0.0.1:40052 - "POST /v1/chat/completions HTTP/1.1" 200 OK'

# appends at RATE lines/s in 10 ms slices; writes how many decode lines so far to COUNT (atomically)
WRITER = r"""
import os, sys, time
path, count_path, rate, every, decode, noise = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
n = decodes = 0
t0 = last_note = time.monotonic()
stop = False
def end(*_):
    global stop
    stop = True
import signal
signal.signal(signal.SIGTERM, end)
while not stop:
    due = int((time.monotonic() - t0) * rate)
    chunk = []
    while n < due:
        if n % every == 0:
            chunk.append(decode.format(al=2.0 + (n % 9) * 0.25))
            decodes += 1
        else:
            chunk.append(noise)
        n += 1
    if chunk:
        os.write(fd, ("\n".join(chunk) + "\n").encode())
    if time.monotonic() - last_note > 0.5:
        last_note = time.monotonic()
        with open(count_path + ".tmp", "w") as f:
            f.write(f"{n} {decodes}\n")
        os.replace(count_path + ".tmp", count_path)
    time.sleep(0.01)
with open(count_path + ".tmp", "w") as f:
    f.write(f"{n} {decodes}\n")
os.replace(count_path + ".tmp", count_path)
"""

MATCHES = re.compile(r"(\d+) matches")
BEHIND = re.compile(r"([\d.]+ [KMG]?B) behind")


def rss_mib(pid: int) -> float:
    """RSS of the TUI: the python process under the tmux pane's shell (or the pane itself)."""
    pids = [pid] + [int(p) for p in _children(pid)]
    best = 0.0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    best = max(best, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return best


def _children(pid: int) -> list[str]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return out + [c for p in out for c in _children(int(p))]


def status_of(screen: str) -> tuple[int | None, str]:
    for line in screen.splitlines():
        m = MATCHES.search(line)
        if m:
            b = BEHIND.search(line)
            return int(m.group(1)), b.group(1) if b else "-"
    return None, "-"


def written(count_path: Path) -> tuple[int, int]:
    try:
        lines, decodes = count_path.read_text().split()
        return int(lines), int(decodes)
    except (OSError, ValueError):
        return 0, 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=20000.0, help="lines per second written")
    ap.add_argument("--match-every", type=int, default=1, help="one decode line in this many (1: all)")
    ap.add_argument("--catch-up", type=float, default=120.0, help="seconds allowed to read the rest")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("tmux not installed", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="specdebug-soak-"))
    sshd = start_sshd(work / "sshd")
    log, count = work / "server.log", work / "count"
    log.write_text("")
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(log),
            str(count),
            str(args.rate),
            str(args.match_every),
            DECODE,
            NOISE,
        ],
        start_new_session=True,
    )
    tmux = Tmux("specdebug-soak")
    home = work / "home"
    home.mkdir()
    rows: list[tuple[float, float, int, int | None, str]] = []
    try:
        tmux.new_session(
            "tui",
            f"env HOME={home} {sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox "
            f"--session {work / 'session'}",
            160,
            40,
        )
        tmux.wait_screen("tui", lambda s: "gpubox connected" in s, 60)
        for key in ["3", "o"]:
            tmux("send-keys", "-t", "tui", key)
            time.sleep(0.5)
        tmux("send-keys", "-t", "tui", "-l", str(log))
        tmux("send-keys", "-t", "tui", "Enter")
        tmux.wait_screen("tui", lambda s: "following" in s, 60)
        pane_pid = int(tmux("display", "-p", "-t", "tui", "#{pane_pid}").stdout.strip())
        t0 = time.monotonic()
        print(f"{'min':>5} {'rss MiB':>8} {'written':>10} {'counted':>10}  behind", flush=True)
        for minute in range(1, int(args.minutes) + 1):
            while time.monotonic() < t0 + 60 * minute:
                time.sleep(1)
            got, behind = status_of(tmux.screen("tui"))
            rss = rss_mib(pane_pid)
            rows.append((minute, rss, written(count)[1], got, behind))
            print(f"{minute:>5} {rss:>8.1f} {rows[-1][2]:>10} {got!s:>10}  {behind}", flush=True)
        writer.send_signal(signal.SIGTERM)
        writer.wait(30)
        total = written(count)[1]
        deadline = time.monotonic() + args.catch_up
        got = None
        while time.monotonic() < deadline:
            got, behind = status_of(tmux.screen("tui"))
            if got is not None and got >= total:
                break
            time.sleep(1)
        rss_end = rss_mib(pane_pid)
        print(f"  end {rss_end:>8.1f} {total:>10} {got!s:>10}  (after the writer stopped)", flush=True)
        in_hand = check_count(tmux, log, work / "session")
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait()
        tmux.kill()
        sshd.stop()
        shutil.rmtree(work, ignore_errors=True)
    steady = [r[1] for r in rows[1:]] or [r[1] for r in rows]
    first = rows[0][1] if rows else 0.0
    rss_max = max([*steady, rss_end]) if rows else 0.0
    flat = bool(rows) and rss_max <= first * 1.2
    not_counted = total - (got or 0)
    print(
        f"RESULT minutes={args.minutes:g} rate={args.rate:g} match_every={args.match_every} written={total} "
        f"counted={got} not_counted={not_counted} in_hand={in_hand} rss_first_mib={first:.1f} "
        f"rss_max_mib={rss_max:.1f} flat={'yes' if flat else 'no'}"
    )
    exact = in_hand is not None and 0 <= in_hand <= IN_HAND_MAX
    return 0 if flat and exact else 1


# one 64 KiB block of records: what a stop can leave uncounted
IN_HAND_MAX = (1 << 16) // len(DECODE.format(al=2.0)) + 1


def check_count(tmux: Tmux, log: Path, session: Path) -> int | None:
    """Stop the pane, mark, and compare the mark's count with the decode lines before its offset."""
    tmux("send-keys", "-t", "tui", "x")
    time.sleep(2)
    tmux("send-keys", "-t", "tui", "m")
    deadline = time.monotonic() + 30
    mark = None
    while mark is None and time.monotonic() < deadline:
        time.sleep(1)
        for path in session.rglob("events.jsonl"):
            for line in path.read_text().splitlines():
                ev = json.loads(line)
                if ev.get("kind") == "mark" and ev.get("pane") == "logs":
                    mark = ev
    if mark is None or mark.get("offset") is None:
        print("no mark with an offset in the session journal: cannot tell", flush=True)
        return None
    offset, counted = int(mark["offset"]), int(mark["matches"])
    before = 0
    with log.open("rb") as f:
        left = offset
        while left > 0:
            block = f.read(min(left, 1 << 24))
            if not block:
                break
            left -= len(block)
            before += block.count(b"Decode batch")
    print(
        f"count  at offset {offset}: {before} decode lines before it in the file, {counted} counted by the pane",
        flush=True,
    )
    return before - counted


if __name__ == "__main__":
    sys.exit(main())
