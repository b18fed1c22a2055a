"""The log follow agent: runs ON THE BOX as `python3 -I -S -c SOURCE PATH OFFSET INODE MODE CHECK PAT...`.

Why an agent and not `tail -F | grep`: exact byte offsets (resume after a reconnect with no line
lost or repeated), Python's regex dialect on both sides, truncation and rotation reported as
records, and bounded memory and regex time.  The record format and the client side (argv, parsing)
are in specdebug/core/logs/agent.py and follow.py; the client appends `run(LIMIT, RX_S, Flow)` to
this source (its line and regex-time limits, and box/follow_flow.py's acknowledged flow control,
loaded as a module of its own).  Stdlib only, Python >= 3.7.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import stat
import sys
import time
import zlib
from typing import Any

out: Any = sys.stdout.buffer  # replaced by run(): a follow_flow.Flow (counts, waits for acks)
LIMIT = 1 << 20  # bytes of one line kept (the client passes core.limits.MAX_LINE)
# lines close together go out at most every FLUSH_S: at 10k lines/s a line waits up to this long
# (p99 latency ~ FLUSH_S + transport; issue 43: within 10 ms of `tail -F | grep`), while one
# SSH packet still carries 30+ lines (10 ms made p99 15-21 ms, 2 ms costs the client a packet
# every 2 ms at any rate)
FLUSH_S = 0.003
DENSE_S = 0.001
TAILK = 256
RX_S = 0.5  # seconds one regex pass over a block may take (the client passes BOX_REGEX_TIMEOUT_S)
KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def ctl(*parts: bytes | str | int) -> None:
    out.write(b"!" + b"\t".join(p if isinstance(p, bytes) else str(p).encode() for p in parts) + b"\n")


def b64(text: bytes | str) -> bytes:
    return base64.b64encode(text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape"))


class Slow(Exception):
    pass


class NotRegular(Exception):
    pass


def on_alarm(signum: int, frame: Any) -> None:
    raise Slow()


def open_regular(p: str) -> tuple[int, os.stat_result]:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO must not wait for a writer
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise NotRegular(f"{p} is {kind}, not a regular file: refusing to read it")
    return fd, st


def main() -> None:
    path = os.path.expanduser(sys.argv[1])
    off = int(sys.argv[2])
    want = int(sys.argv[3])
    mode = sys.argv[4].split(",")
    check = sys.argv[5]
    once = mode[0] == "once"
    poll = mode[0] == "poll"
    poll_wait = float(mode[1]) if poll else 0.0
    poll_max = int(mode[2]) if poll else 0
    if not poll and len(mode) > 2 and mode[1] == "ack":
        out.window = int(mode[2])
    args = [a.encode("utf-8", "surrogateescape") for a in sys.argv[6:]]
    lits = [a[1:] for a in args if a[:1] == b"="]
    srcs = [a[1:] for a in args if a[:1] == b"~"]
    singles = [(i, re.compile(s, re.M)) for i, s in enumerate(srcs)]
    rxs = list(singles)
    if len(srcs) > 1:
        try:
            rxs = [(-1, re.compile(b"|".join(b"(?:" + s + b")" for s in srcs), re.M))]
        except re.error:
            pass
    if rxs:
        signal.signal(signal.SIGALRM, on_alarm)
    every = not args
    ifd: int | None = None
    lib: Any = None
    try:
        import ctypes

        lib = ctypes.CDLL(None, use_errno=True)
        ifd = lib.inotify_init1(0o4000 | 0o2000000)
        if ifd < 0:
            ifd = None
    except Exception:
        ifd = None

    def watch(p: str) -> None:
        if ifd is not None:
            lib.inotify_add_watch(ifd, p.encode("utf-8", "surrogateescape"), 0x2 | 0x4 | 0x8 | 0x400 | 0x800)

    def wait(t: float) -> None:
        if ifd is None:
            out.wait(min(t, 0.05))
            return
        if out.wait(t, [ifd]):
            try:
                os.read(ifd, 65536)
            except OSError:
                pass

    said_missing = False
    last_out = time.time()
    while True:
        try:
            fd, st = open_regular(path)
            break
        except (FileNotFoundError, NotADirectoryError):
            if once:
                ctl("ERR", b64("no such file: " + path))
                out.flush()
                sys.exit(1)
            if not said_missing:
                ctl("MISSING")
                out.flush()
                said_missing = True
            if poll:
                ctl("END", -1, "-", 0)
                out.flush()
                return
            if time.time() - last_out > 5:
                ctl("HB", -1)
                out.flush()
                last_out = time.time()
            out.wait(0.1)
    ino = st.st_ino
    watch(path)

    def chk(p: int) -> str:
        k = min(TAILK, p)
        return "%08x" % (zlib.crc32(os.pread(fd, k, p - k)) & 0xFFFFFFFF) if k else "-"

    if want and want != ino:
        ctl("ROTATED", ino)
        pos = 0
    elif said_missing:
        pos = 0
    elif off < 0:
        pos = st.st_size
        if pos:
            back = min(pos, 65536)
            tail = os.pread(fd, back, pos - back)
            nl = tail.rfind(b"\n")
            pos = pos - back + nl + 1 if nl >= 0 else (0 if back == pos else pos)
    elif off > st.st_size:
        ctl("TRUNCATED", ino, st.st_size, "shrank")
        pos = 0
    elif off and check != "-" and chk(off) != check:
        ctl("TRUNCATED", ino, st.st_size, "rewritten")
        pos = 0
    else:
        pos = off
    ctl("OPEN", ino, pos, st.st_size, b64(os.path.abspath(path)), chk(pos))
    out.flush()
    S: dict[str, Any] = {
        "pos": pos,
        "rpos": pos,
        "buf": b"",
        "over": 0,
        "tail": os.pread(fd, min(TAILK, pos), pos - min(TAILK, pos)),
    }

    def reset() -> None:
        S["pos"] = S["rpos"] = S["over"] = 0
        S["buf"] = S["tail"] = b""

    def read_some() -> bytes | None:
        # None: the bytes before the read position changed (truncated and grown again)
        rpos = S["rpos"]
        data = os.pread(fd, LIMIT, rpos)
        if data and S["tail"] and os.pread(fd, len(S["tail"]), rpos - len(S["tail"])) != S["tail"]:
            return None
        if data:
            S["rpos"] = rpos + len(data)
            S["tail"] = data[-TAILK:] if len(data) >= TAILK else (S["tail"] + data)[-TAILK:]
        return data

    def scan(p: re.Pattern[bytes], block: bytes, hits: dict[int, int]) -> None:
        n = len(block)
        at = 0
        find = block.find
        rfind = block.rfind
        while at < n:
            m = p.search(block, at)
            if m is None or m.start() >= n:
                break  # an empty match at the very end is not a line: stop, never loop
            s = rfind(b"\n", 0, m.start()) + 1
            e = find(b"\n", m.start())
            if m.end() > e and p.search(block, s, e) is None:
                at = e + 1
                continue  # the match ran into the next line: this line alone does not match
            hits[s] = e
            at = e + 1

    def regex_hits(block: bytes, hits: dict[int, int], base: int) -> None:
        i = 0
        while i < len(rxs):
            idx, p = rxs[i]
            signal.setitimer(signal.ITIMER_REAL, RX_S)
            try:
                scan(p, block, hits)
                signal.setitimer(signal.ITIMER_REAL, 0)
            except Slow:
                signal.setitimer(signal.ITIMER_REAL, 0)
                if idx < 0:
                    rxs[i : i + 1] = singles  # the combined pattern overran: find which one it is
                else:
                    ctl("CUT", idx, base)
                    del rxs[i]
                continue
            i += 1

    def select_block(block: bytes, base: int) -> dict[int, int]:
        hits: dict[int, int] = {}
        find = block.find
        rfind = block.rfind
        for lit in lits:  # literals: bytes.find runs at memory speed
            at = find(lit)
            while at >= 0:
                s = rfind(b"\n", 0, at) + 1
                e = find(b"\n", at)
                hits[s] = e
                at = find(lit, e + 1)
        if rxs:
            regex_hits(block, hits, base)
        return hits

    def lines(block: bytes) -> None:
        # block: complete lines, each at most LIMIT bytes
        base = S["pos"]
        S["pos"] = base + len(block)
        if every:
            out.write(b"!RUN\t%d\t%d\n" % (base, block.count(b"\n")))
            out.write(block)
            return
        hits = select_block(block, base)
        run_s = run_e = -2
        n = 0
        for s in sorted(hits):  # consecutive selected lines go out as one run: no per-line framing
            if s == run_e + 1:
                run_e = hits[s]
                n += 1
                continue
            if n:
                emit_run(base, block, run_s, run_e, n)
            run_s, run_e, n = s, hits[s], 1
        if n:
            emit_run(base, block, run_s, run_e, n)

    def emit_run(base: int, block: bytes, s: int, e: int, n: int) -> None:
        if n == 1:
            out.write(b"%d\t%s\n" % (base + s, block[s:e]))
        else:
            out.write(b"!RUN\t%d\t%d\n" % (base + s, n))
            out.write(block[s : e + 1])

    def long_line() -> None:
        kept = S["buf"]
        full = len(kept) + S["over"]
        base = S["pos"]
        if every or select_block(kept + b"\n", base):
            out.write(b"T%d %d\t%s\n" % (base, full, kept))
        S["pos"] = base + full + 1
        S["buf"] = b""
        S["over"] = 0

    def feed(data: bytes) -> None:
        while data:
            buf = S["buf"]
            if S["over"] or len(buf) + len(data) > LIMIT:
                nl = data.find(b"\n")
                if nl < 0:
                    room = max(0, LIMIT - len(buf))
                    S["buf"] = buf + data[:room]
                    S["over"] += len(data) - min(room, len(data))
                    return
                if S["over"] or len(buf) + nl > LIMIT:
                    room = max(0, LIMIT - len(buf))
                    S["buf"] = buf + data[: min(room, nl)]
                    S["over"] += nl - min(room, nl)
                    long_line()
                    data = data[nl + 1 :]
                    continue
            block = buf + data
            cut = block.rfind(b"\n") + 1
            if not cut:
                S["buf"] = block
                return
            S["buf"] = block[cut:]
            lines(block[:cut])
            return

    def finish() -> None:
        if S["over"]:
            long_line()
        elif S["buf"]:
            lines(S["buf"] + b"\n")
            S["buf"] = b""

    def truncated(size: int, why: str) -> None:
        ctl("TRUNCATED", ino, size, why)
        reset()

    reported = S["pos"]
    last_out = time.time()
    got = 0
    deadline = time.time() + poll_wait
    pending = dense = False
    last_flush = last_data = 0.0
    while True:
        if poll and got >= poll_max:
            ctl("END", S["pos"], chk(S["pos"]), 0)
            out.flush()
            return
        out.hold()
        data = read_some()
        if data is None:
            truncated(os.fstat(fd).st_size, "rewritten")
            reported = 0
            out.flush()
            continue
        if data:
            feed(data)
            got += len(data)
            pending = True
            t = time.time()
            dense = t - last_data < DENSE_S
            last_data = t
            continue
        now = time.time()
        if pending and not once and not poll:
            # caught up: a line that came alone is sent at once (latency); while lines keep coming
            # close together, at most every FLUSH_S (one SSH packet per many lines, not per line)
            if dense and now - last_flush < FLUSH_S:
                # sleep to the flush time (acks still taken), not woken by each write: at 10k
                # lines/s that is one read per flush instead of one per line (box CPU, issue 43)
                out.wait(FLUSH_S - (now - last_flush))
                continue
            if S["pos"] != reported:
                ctl("POS", S["pos"], chk(S["pos"]))
                reported = S["pos"]
            out.flush()
            last_flush = last_out = now
            pending = False
            continue
        if once:
            finish()
            ctl("END", S["pos"], "-", 1)
            out.flush()
            return
        if poll and (got or now >= deadline):
            ctl("END", S["pos"], chk(S["pos"]), 1)
            out.flush()
            return
        if not poll and (S["pos"] != reported or now - last_out > 5):
            ctl("POS" if S["pos"] != reported else "HB", S["pos"], chk(S["pos"]))
            out.flush()
            reported = S["pos"]
            last_out = now
        try:
            pst: os.stat_result | None = os.stat(path)
        except OSError:
            pst = None
        size = os.fstat(fd).st_size
        if size < S["rpos"]:
            truncated(size, "shrank")
            reported = 0
            out.flush()
            continue
        if pst is not None and pst.st_ino != ino:
            if not poll:
                # writers still finish lines in the old file after the rename: drain it until it
                # is quiet for 0.2 s (at most 2 s) before moving to the new one
                quiet = time.time()
                limit = quiet + 2.0
                while time.time() - quiet < 0.2 and time.time() < limit:
                    data = read_some()
                    if data:
                        feed(data)
                        quiet = time.time()
                    else:
                        time.sleep(0.02)
                finish()
            os.close(fd)
            while True:
                try:
                    fd, st = open_regular(path)
                    break
                except FileNotFoundError:  # renamed away a moment ago; the new file follows
                    time.sleep(0.05)
            ino = st.st_ino
            watch(path)
            reset()
            reported = 0
            ctl("ROTATED", ino)
            out.flush()
            continue
        wait(0.1 if not poll else min(0.1, max(0.0, deadline - now)))


def run(limit: int, rx_s: float, flow: Any) -> None:
    """The agent's entry point (the client's trailer calls it; see the module docstring)."""
    global out, LIMIT, RX_S
    out = flow(open(1, "wb", buffering=1 << 16, closefd=False))
    LIMIT, RX_S = limit, rx_s
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    except NotRegular as e:
        ctl("ERR", b64(str(e)))
        out.flush()
        sys.exit(2)
    except Exception as e:
        try:
            ctl("ERR", b64(repr(e)))
            out.flush()
        except OSError:  # the client is gone (closed pipe): nobody left to tell
            pass
        sys.exit(2)
