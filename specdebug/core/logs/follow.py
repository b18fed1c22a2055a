"""Follow a remote log file by byte offset, prefiltered on the box, resuming exactly after a drop.

Why a small python3 agent on the box instead of `tail -c +N -F PATH | grep -E --line-buffered`:
- exact offsets: with a prefilter in between, `tail | grep` cannot say where a line started, and
  after `tail -F` reopens a rotated/truncated file its byte count restarts silently. Exact offsets
  are what makes "resume after reconnect, no line lost or repeated" true. The agent prints
  `OFFSET<TAB>LINE` for every selected line and `!POS` for progress over filtered-out lines.
- one regex dialect: profile patterns use Python syntax (`(?P<value>...)`), which grep -E rejects;
  the agent filters with Python's `re`, the same engine the client parses with.
- truncation (size < offset) and rotation (the path's inode changed) are reported as records
  (`!TRUNCATED`, `!ROTATED`) instead of tail's stderr chatter, and the agent verifies on resume that
  the inode it is asked to continue is still the one at the path.
- latency: it sleeps on inotify (ctypes, no dependency) with a 0.1 s poll fallback.
Patterns travel as argv data (the remote layer quotes with shlex.join), never as shell text.
GPU boxes have python3 (the probe helper needs it too); without it we fall back to plain
`tail -c +N -F` (no prefilter: filtering happens here) and say so with a "fallback" event.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.parser import LogParser, combine, strip_named_groups
from specdebug.remote.api import ConnectionDropped, NotConnected, Remote

# The agent runs with python3 -I -S on the box; keep it Python 3.6 compatible.
AGENT = r"""
import os, re, select, sys, time
out = sys.stdout.buffer
def ctl(*parts):
    out.write(b"!" + b"\t".join(p if isinstance(p, bytes) else str(p).encode() for p in parts) + b"\n")
def main():
    path = os.path.expanduser(sys.argv[1]); off = int(sys.argv[2]); want = int(sys.argv[3])
    once = sys.argv[4] == "once"
    args = [a.encode("utf-8", "surrogateescape") for a in sys.argv[5:]]
    lits = [a[1:] for a in args if a[:1] == b"="]
    pats = [re.compile(a[1:], re.M) for a in args if a[:1] == b"~"]
    one = pats[0] if len(pats) == 1 else None
    every = not args
    ifd = None; lib = None
    try:
        import ctypes
        lib = ctypes.CDLL(None, use_errno=True)
        ifd = lib.inotify_init1(0o4000 | 0o2000000)
        if ifd < 0:
            ifd = None
    except Exception:
        ifd = None
    def watch(p):
        if ifd is not None:
            lib.inotify_add_watch(ifd, p.encode("utf-8", "surrogateescape"), 0x2 | 0x4 | 0x8 | 0x400 | 0x800)
    def wait(t):
        if ifd is None:
            time.sleep(min(t, 0.05)); return
        r = select.select([ifd], [], [], t)[0]
        if r:
            try:
                os.read(ifd, 65536)
            except OSError:
                pass
    said_missing = False; last_out = time.time()
    while True:
        try:
            f = open(path, "rb"); break
        except (FileNotFoundError, NotADirectoryError):
            if once:
                ctl("ERR", "no such file: " + path); out.flush(); sys.exit(1)
            if not said_missing:
                ctl("MISSING"); out.flush(); said_missing = True
            if time.time() - last_out > 5:
                ctl("HB", -1); out.flush(); last_out = time.time()
            time.sleep(0.1)
    st = os.fstat(f.fileno()); ino = st.st_ino
    watch(path)
    if want and want != ino:
        ctl("ROTATED", ino); pos = 0
    elif said_missing:
        pos = 0
    elif off < 0:
        pos = st.st_size
        if pos:
            back = min(pos, 65536); f.seek(pos - back); tail = f.read(back); nl = tail.rfind(b"\n")
            pos = pos - back + nl + 1 if nl >= 0 else (0 if back == pos else pos)
    elif off > st.st_size:
        ctl("TRUNCATED", ino, st.st_size); pos = 0
    else:
        pos = off
    f.seek(pos)
    ctl("OPEN", ino, pos, st.st_size, os.path.abspath(path).encode("utf-8", "surrogateescape")); out.flush()
    buf = b""; reported = pos; last_out = time.time()
    def emit(data, final=False):
        # complete lines only; with one (combined) pattern the regex runs over the whole chunk in C
        # and we restart at the line after each hit, so no line with a match is skipped
        nonlocal buf, pos
        buf += data
        if final and buf and not buf.endswith(b"\n"):
            buf += b"\n"
        cut = buf.rfind(b"\n") + 1
        if not cut:
            return
        block, buf = buf[:cut], buf[cut:]
        base = pos; pos += len(block)
        if every:
            at = 0
            for ln in block[:-1].split(b"\n"):
                out.write(b"%d\t%s\n" % (base + at, ln)); at += len(ln) + 1
            return
        hits = {}
        find = block.find; rfind = block.rfind
        for lit in lits:  # literals: bytes.find runs at memory speed
            at = find(lit)
            while at >= 0:
                s = rfind(b"\n", 0, at) + 1; e = find(b"\n", at)
                hits[s] = e; at = find(lit, e + 1)
        if one is not None:  # the regexes, combined by the client: one pass in C over the block
            at = 0
            while True:
                m = one.search(block, at)
                if m is None:
                    break
                s = rfind(b"\n", 0, m.start()) + 1; e = find(b"\n", m.start())
                hits[s] = e; at = e + 1
        elif pats:
            at = 0
            for ln in block[:-1].split(b"\n"):
                if any(p.search(ln) for p in pats):
                    hits[at] = at + len(ln)
                at += len(ln) + 1
        for s in sorted(hits):
            out.write(b"%d\t%s\n" % (base + s, block[s:hits[s]]))
    while True:
        data = f.read(1 << 16)
        if data:
            emit(data); out.flush(); last_out = time.time()
            continue
        now = time.time()
        if once:
            emit(b"", final=True); ctl("END", pos); out.flush(); return
        if pos != reported or now - last_out > 5:
            ctl("POS" if pos != reported else "HB", pos); out.flush(); reported = pos; last_out = now
        try:
            pst = os.stat(path)
        except OSError:
            pst = None
        size = os.fstat(f.fileno()).st_size
        if size < pos + len(buf):
            ctl("TRUNCATED", ino, size); f.seek(0); pos = 0; buf = b""; reported = 0; out.flush(); continue
        if pst is not None and pst.st_ino != ino:
            # writers still finish lines in the old file after the rename: drain it until it is
            # quiet for 0.2 s (at most 2 s) before moving to the new one
            quiet = time.time(); limit = quiet + 2.0
            while time.time() - quiet < 0.2 and time.time() < limit:
                data = f.read()
                if data:
                    emit(data); quiet = time.time()
                else:
                    time.sleep(0.02)
            emit(b"", final=True)
            f.close(); f = open(path, "rb"); ino = os.fstat(f.fileno()).st_ino; watch(path)
            ctl("ROTATED", ino); pos = 0; buf = b""; reported = 0; out.flush(); continue
        wait(0.1)
try:
    main()
except (BrokenPipeError, KeyboardInterrupt):
    pass
except Exception as e:
    try:
        ctl("ERR", repr(e)); out.flush()
    except Exception:
        pass
    sys.exit(2)
"""


MAX_RESTARTS = 5  # consecutive agent restarts without any output before giving up
RESTART_DELAY_S = 0.5
_META = re.compile(r"[.^$*+?{}\[\]\\|()]")


@dataclass(slots=True)
class RawLine:
    """One selected line: its exact start offset in the file (per inode) and its bytes (no newline)."""

    offset: int
    data: bytes
    inode: int | None = None


def agent_argv(
    path: str, offset: int | None, inode: int | None, prefilter: Sequence[str], once: bool = False
) -> list[str]:
    """argv of the on-box follower. offset None = from the end (start of the last complete line);
    once = read to the end of the file and exit (grep without --follow)."""
    lits = [p for p in prefilter if p and not _META.search(p)]
    regexes = [p for p in prefilter if not p or _META.search(p)]
    pats: list[str] = [f"={p}" for p in dict.fromkeys(lits)]
    if regexes:
        combined = "|".join(f"(?:{strip_named_groups(p)})" for p in regexes)
        try:
            re.compile(combined.encode(), re.M)
            pats.append(f"~{combined}")
        except re.error:
            pats.extend(f"~{p}" for p in regexes)
    mode = "once" if once else "follow"
    return [
        "python3",
        "-I",
        "-S",
        "-c",
        AGENT,
        path,
        str(-1 if offset is None else offset),
        str(inode or 0),
        mode,
        *pats,
    ]


def tail_argv(path: str, offset: int) -> list[str]:
    return ["tail", "-c", f"+{offset + 1}", "-F", path]


class Follower:
    """Follow `path` on `remote`; iterate `lines()` for RawLine and LogEvent items.

    State (`offset` = where the next unread line starts, `inode`) survives ConnectionDropped:
    the follower waits for the connection and restarts the agent from exactly there.
    """

    def __init__(
        self,
        remote: Remote,
        path: str,
        *,
        prefilter: Sequence[str] = (),
        offset: int | None = None,
        inode: int | None = None,
        reconnect: bool = True,
        once: bool = False,
    ) -> None:
        for p in prefilter:
            re.compile(p)  # fail here, with a Python traceback, not on the box
        self.remote = remote
        self.path = path
        self.resolved_path: str | None = None
        self.prefilter = list(prefilter)
        self.offset = offset
        self.inode = inode
        self.reconnect = reconnect
        self.once = once
        self.fallback = False
        self.reconnects = 0

    async def lines(self) -> AsyncIterator[RawLine | LogEvent]:
        restarts = 0
        while True:
            try:
                if self.fallback:
                    async for item in self._tail_once():
                        yield item
                    yield LogEvent(kind="ended", path=self.path, offset=self.offset, detail="tail ended")
                    return
                got_any = False
                status = None
                argv = agent_argv(self.path, self.offset, self.inode, self.prefilter, self.once)
                async with self.remote.stream(argv, binary=True) as stream:
                    async for rec in stream:
                        got_any = True
                        record = self._record(rec)
                        if record is not None:
                            yield record
                    status = stream.exit_status
                if status == 127 and not got_any:
                    self.fallback = True
                    yield LogEvent(
                        kind="fallback", path=self.path, offset=self.offset, detail="no python3 on the box"
                    )
                    continue
                if not self.once and status not in (0, 2) and restarts < MAX_RESTARTS:
                    # the agent never ends by itself while following: it was killed on the box
                    # (OOM killer, a stray kill); start it again from our exact offset
                    restarts = 0 if got_any else restarts + 1
                    yield LogEvent(
                        kind="reconnecting",
                        path=self.path,
                        offset=self.offset,
                        inode=self.inode,
                        detail=f"follower on the box exited ({status}); restarting",
                    )
                    await asyncio.sleep(RESTART_DELAY_S)
                    continue
                yield LogEvent(
                    kind="ended",
                    path=self.path,
                    offset=self.offset,
                    inode=self.inode,
                    detail=f"exit {status}",
                )
                return
            except (ConnectionDropped, NotConnected) as exc:
                # NotConnected: the channel could not open while the link was down; a permanent
                # failure (host key, auth) makes wait_connected raise it again, ending the follow
                if not self.reconnect:
                    raise
                self.reconnects += 1
                yield LogEvent(
                    kind="reconnecting", path=self.path, offset=self.offset, inode=self.inode, detail=str(exc)
                )
                await self.remote.wait_connected()
                yield LogEvent(kind="resumed", path=self.path, offset=self.offset, inode=self.inode)

    def _record(self, rec: bytes | str) -> RawLine | LogEvent | None:
        if isinstance(rec, str):
            rec = rec.encode("utf-8", "surrogateescape")
        if rec.endswith(b"\n"):
            rec = rec[:-1]
        if not rec.startswith(b"!"):
            head, _, data = rec.partition(b"\t")
            off = int(head)
            self.offset = off + len(data) + 1
            return RawLine(off, data, self.inode)
        parts = rec[1:].split(b"\t")
        kind = parts[0]
        if kind in (b"POS", b"HB", b"END"):
            pos = int(parts[1])
            if pos >= 0:
                self.offset = pos
            return None
        if kind == b"OPEN":
            self.inode, self.offset = int(parts[1]), int(parts[2])
            if len(parts) > 4:
                self.resolved_path = parts[4].decode("utf-8", "surrogateescape")
            return LogEvent(
                kind="opened",
                path=self.path,
                offset=self.offset,
                inode=self.inode,
                detail=f"size {int(parts[3])}",
            )
        if kind == b"MISSING":
            return LogEvent(
                kind="missing", path=self.path, offset=self.offset, detail="no such file (waiting for it)"
            )
        if kind == b"TRUNCATED":
            old = self.offset
            self.inode, self.offset = int(parts[1]), 0
            return LogEvent(
                kind="truncated",
                path=self.path,
                offset=0,
                inode=self.inode,
                detail=f"file shrank to {int(parts[2])} bytes (was at {old}); reading from the start",
            )
        if kind == b"ROTATED":
            old = self.inode
            self.inode, self.offset = int(parts[1]), 0
            return LogEvent(
                kind="rotated",
                path=self.path,
                offset=0,
                inode=self.inode,
                detail=f"a new file is at the path (inode {old} -> {self.inode}); reading it from the start",
            )
        if kind == b"ERR":
            return LogEvent(
                kind="error",
                path=self.path,
                offset=self.offset,
                detail=b"\t".join(parts[1:]).decode("utf-8", "replace"),
            )
        return None

    async def _tail_once(self) -> AsyncIterator[RawLine | LogEvent]:
        """Fallback without python3: tail -F with stderr merged; offsets counted here."""
        if self.offset is None:
            res = await self.remote.run(["stat", "-L", "-c", "%s %i", self.path])
            size, ino = (int(x) for x in res.out.split()) if res.ok else (0, 0)
            self.offset, self.inode = size, ino or None
        quoted = (f"'{self.path}'", self.path)
        argv = tail_argv(self.path, self.offset)
        if self.once:
            argv.remove("-F")
        async with self.remote.stream(argv, binary=True, stderr=True) as stream:
            async for rec in stream:
                data = rec[:-1] if rec.endswith(b"\n") else rec
                text = data.decode("utf-8", "replace")
                if text.startswith("tail: ") and any(q in text for q in quoted):
                    if text.endswith("file truncated"):
                        self.offset = 0
                        yield LogEvent(kind="truncated", path=self.path, offset=0, detail=text)
                    elif "has been replaced" in text or "has appeared" in text:
                        self.offset = 0
                        yield LogEvent(kind="rotated", path=self.path, offset=0, detail=text)
                    continue
                off = self.offset
                self.offset = off + len(rec) if rec.endswith(b"\n") else off + len(rec) + 1
                yield RawLine(off, data, self.inode)


async def follow_matches(
    remote: Remote,
    path: str,
    parser: LogParser,
    *,
    from_start: bool = False,
    offset: int | None = None,
    once: bool = False,
    follower: Follower | None = None,
) -> AsyncIterator[LogMatch | LogEvent]:
    """Parsed matches (and follow events) of a remote file: what the pane and `grep` show.

    Pass your own `follower` (built with `parser.candidate_patterns()` as prefilter) to read its
    offset/inode/resolved path while following."""
    if follower is None:
        follower = Follower(
            remote, path, prefilter=parser.candidate_patterns(), offset=0 if from_start else offset, once=once
        )
    local = combine(parser.candidate_patterns())
    async for item in follower.lines():
        if isinstance(item, LogEvent):
            yield item
            continue
        if follower.fallback and local is not None:
            text = item.data.decode("utf-8", "replace")
            if not local.search(text):
                continue
        m = parser.parse(item.data, offset=item.offset, inode=item.inode)
        if m is not None:
            yield m


async def expand_remote_path(remote: Remote, path: str) -> str:
    """Resolve a leading ~ on the box (read_file takes plain paths)."""
    if not path.startswith("~"):
        return path
    res = await remote.run(["sh", "-c", 'printf "%s" "$HOME"'])
    home = res.out.strip() if res.ok else ""
    if path == "~":
        return home or path
    if path.startswith("~/") and home:
        return home.rstrip("/") + path[1:]
    return path
