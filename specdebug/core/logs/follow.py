"""Follow a remote log file by byte offset, prefiltered on the box, resuming exactly after a drop.

The box side is a small python3 agent (specdebug.core.logs.agent: why, its record format and its
bounds). Here: the client state machine. Offsets are exact, so "resume after reconnect, no line lost
or repeated" holds; truncation (also truncated-and-grown-again, by a check of the bytes before the
offset), rotation and a missing file become LogEvents. Patterns travel as argv data (the remote
layer quotes with shlex.join), never as shell text. Without python3 on the box we fall back to
plain `tail -c +N -F` (filtering happens here) and say so with a "fallback" event; without a free
SSH session (MaxSessions used up) the agent runs through the probe channel by polling.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specdebug.core.limits import BOX_REGEX_TIMEOUT_S, cap_bytes
from specdebug.core.logs.agent import (
    ACK_WINDOW,
    POLL_MAX_BYTES,
    POLL_WAIT_S,
    agent_argv,
    split_prefilter,
    tail_argv,
)
from specdebug.core.logs.events import FollowEventKind, LogEvent
from specdebug.remote.api import ConnectionDropped, ConnState, NotConnected, Remote
from specdebug.remote.reconnect import link_of

__all__ = [
    "Follower",
    "RawLine",
    "RawRun",
    "agent_argv",
    "expand_remote_path",
    "tail_argv",
]

MAX_RESTARTS = 5  # consecutive agent restarts without any output before giving up
RESTART_DELAY_S = 0.5
OPEN_WAIT_S = 5.0  # an open queued this long for an SSH session slot: follow through the probe channel
OPEN_SLOW_S = 60.0  # an open not queued but not done after this long: the same
MISSING_POLL_S = 0.5


@dataclass(slots=True)
class RawLine:
    """One selected line: its exact start offset in the file (per inode) and its bytes (no newline).

    `truncated` is the line's full length when it was longer than MAX_LINE (data is its head)."""

    offset: int
    data: bytes
    inode: int | None = None
    truncated: int | None = None


@dataclass(slots=True)
class RawRun:
    """Consecutive selected lines of the file as one item (the agent's `!RUN` records): `lines`
    without newlines, the first at `offset`. A follower made with `runs=True` yields these instead
    of one RawLine per line (a plain grep prints them as a block: LogParser.parse_batch)."""

    offset: int
    lines: list[bytes]
    inode: int | None = None


class Follower:
    """Follow `path` on `remote`; iterate `lines()` for RawLine and LogEvent items.

    State (`offset` = where the next unread line starts, `inode`, `check` = crc of the bytes before
    offset) survives ConnectionDropped: the follower waits for the connection and restarts the agent
    from exactly there. `names` maps prefilter sources to the names shown when one is cut off.
    When no SSH session becomes free (MaxSessions used up), it follows by polling the agent through
    the probe channel instead (`remote.run`), and says so with a "fallback" event.
    """

    def __init__(
        self,
        remote: Remote,
        path: str,
        *,
        prefilter: Sequence[str] = (),
        offset: int | None = None,
        inode: int | None = None,
        check: str | None = None,
        reconnect: bool = True,
        once: bool = False,
        names: Mapping[str, str] | None = None,
        runs: bool = False,
    ) -> None:
        for p in prefilter:
            re.compile(p)  # fail here, with a Python traceback, not on the box
        self.remote = remote
        self.path = path
        self.resolved_path: str | None = None
        self.prefilter = list(prefilter)
        self._regex_sources = split_prefilter(self.prefilter)[1]
        self.names = dict(names or {})
        self.offset = offset
        self.inode = inode
        self.check = check
        self.reconnect = reconnect
        self.once = once
        self.fallback = False
        self.polling = False
        self.reconnects = 0
        self._eof = False
        self._run_left = self._run_at = 0  # inside a !RUN record: lines still to come, next offset
        self.runs = runs  # a !RUN record's lines as RawRun items

    async def lines(self) -> AsyncIterator[RawLine | RawRun | LogEvent]:
        batches = self.batches()
        try:
            async for batch in batches:
                for item in batch:
                    yield item
        finally:
            await batches.aclose()  # closing us ends the remote agent now, not at garbage collection

    async def batches(self) -> AsyncGenerator[list[RawLine | RawRun | LogEvent], None]:
        """The same items as `lines()`, in lists of what arrived together (one SSH read): the cheap
        way to keep up with tens of thousands of lines per second."""
        restarts = 0
        while True:
            try:
                if self.fallback:
                    async for item in self._tail_once():
                        yield [item]
                    yield [self._event("ended", "tail ended")]
                    return
                if self.polling:
                    async for batch in self._poll():
                        yield batch
                    return
                got_any = False
                status = None
                self._run_left = 0  # a new agent: no run from the last one continues
                # acknowledged flow control where the remote can send to the agent's stdin: a slow
                # reader then leaves the rest in the file, not in SSH buffers (box/follow.py)
                opener = getattr(self.remote, "stream_with_input", None)
                ack = ACK_WINDOW if callable(opener) else 0
                argv = agent_argv(
                    self.path, self.offset, self.inode, self.prefilter, self.once, self.check, ack=ack
                )
                stream = (
                    opener(argv, binary=True) if callable(opener) else self.remote.stream(argv, binary=True)
                )
                why = await _open_stream(self.remote, stream)
                if why == "down":
                    continue  # the link went while opening: opening waits for it, so just try again
                if why is not None:
                    self.polling = True
                    yield [
                        self._event(
                            "fallback", why + "; following through the probe channel instead, polling"
                        )
                    ]
                    continue
                try:
                    buf = b""
                    read = acked = 0
                    send: Callable[[bytes], None] | None = getattr(stream, "send", None) if ack else None
                    async for data in stream.chunks():
                        got_any = True
                        recs = (buf + data).split(b"\n") if buf else data.split(b"\n")
                        buf = recs.pop()
                        batch = self._records(recs)
                        if batch:
                            yield batch
                        read += len(data)  # taken by our reader (it came back for more): ack it
                        if send is not None and read - acked >= ack // 4:
                            send(b"A%d\n" % read)
                            acked = read
                    status = stream.exit_status
                finally:
                    await stream.__aexit__(None, None, None)
                if status == 127 and not got_any:
                    self.fallback = True
                    yield [self._event("fallback", "no python3 on the box")]
                    continue
                if not self.once and status not in (0, 2) and restarts < MAX_RESTARTS:
                    # the agent never ends by itself while following: it was killed on the box
                    # (OOM killer, a stray kill); start it again from our exact offset
                    restarts = 0 if got_any else restarts + 1
                    detail = f"follower on the box exited ({status}); restarting"
                    yield [self._event("reconnecting", detail, inode=self.inode)]
                    await asyncio.sleep(RESTART_DELAY_S)
                    continue
                yield [self._event("ended", f"exit {status}", inode=self.inode)]
                return
            except (ConnectionDropped, NotConnected) as exc:
                # NotConnected: the channel could not open while the link was down; a permanent
                # failure (host key, auth) makes wait_connected raise it again, ending the follow
                if not self.reconnect:
                    raise
                self.reconnects += 1
                yield [self._event("reconnecting", str(exc), inode=self.inode)]
                await self.remote.wait_connected()
                yield [self._event("resumed", inode=self.inode)]

    def _event(
        self, kind: FollowEventKind, detail: str = "", *, offset: int | None = None, inode: int | None = None
    ) -> LogEvent:
        """An event about this follow, at `offset` (default: where the next unread line starts)."""
        at = self.offset if offset is None else offset
        return LogEvent(kind=kind, path=self.path, offset=at, inode=inode, detail=detail)

    def _records(self, recs: list[bytes]) -> list[RawLine | RawRun | LogEvent]:
        """Decode complete records (no newline); data records and runs (the hot path) inline, the
        rest via `_record`. A run's lines are taken as they are, whatever they contain: as one
        RawRun per read with `runs`, else one RawLine each."""
        out: list[RawLine | RawRun | LogEvent] = []
        inode = self.inode
        left, at = self._run_left, self._run_at
        end = None
        i, n = 0, len(recs)
        while i < n:
            if left:
                take = min(left, n - i)
                part = recs[i : i + take]
                if self.runs:
                    out.append(RawRun(at, part, inode))
                    at += sum(map(len, part)) + take
                else:
                    for rec in part:
                        out.append(RawLine(at, rec, inode))
                        at += len(rec) + 1
                i += take
                left -= take
                end = at
                continue
            rec = recs[i]
            i += 1
            if rec[:1].isdigit():
                tab = rec.find(b"\t")
                off = int(rec[:tab])
                data = rec[tab + 1 :]
                out.append(RawLine(off, data, inode))
                end = off + len(data) + 1
                continue
            if rec.startswith(b"!RUN\t"):
                _, first, count = rec.split(b"\t")
                at, left = int(first), int(count)
                continue
            if end is not None:
                self.offset, self.check, end = end, None, None
            item = self._record(rec)
            inode = self.inode
            if item is not None:
                out.append(item)
        self._run_left, self._run_at = left, at
        if end is not None:
            self.offset, self.check = end, None
        return out

    async def _poll(self) -> AsyncIterator[list[RawLine | RawRun | LogEvent]]:
        """Follow (or read once) without an exec channel: the agent runs through `remote.run` (the
        probe channel), each run reading at most POLL_MAX_BYTES and waiting up to POLL_WAIT_S."""
        opened = missing = False
        while True:
            wait = 0.0 if self.once else POLL_WAIT_S
            argv = agent_argv(
                self.path, self.offset, self.inode, self.prefilter, False, self.check, (wait, POLL_MAX_BYTES)
            )
            res = await self.remote.run(argv, timeout=wait + 60.0)
            self._eof = False
            self._run_left = 0
            if res.exit_status == 127 and not res.stdout:
                yield [self._event("error", "no python3 on the box")]
                return
            batch: list[RawLine | RawRun | LogEvent] = []
            recs = res.stdout.split(b"\n")
            recs.pop()  # after the last newline
            for item in self._records(recs):
                if isinstance(item, LogEvent):
                    if item.kind == "opened":
                        if opened:
                            continue
                        opened = True
                    elif item.kind == "missing":
                        self.offset = 0  # when it appears, read it from the start
                        if missing:
                            continue
                        missing = True
                batch.append(item)
            if batch:
                yield batch
            if res.exit_status != 0 or (self.once and self._eof):
                detail = "timed out" if res.timed_out else f"exit {res.exit_status}"
                yield [self._event("ended", detail, inode=self.inode)]
                return
            if missing and not opened:
                await asyncio.sleep(MISSING_POLL_S)

    def _record(self, rec: bytes | str) -> RawLine | LogEvent | None:
        if isinstance(rec, str):
            rec = rec.encode("utf-8", "surrogateescape")
        if rec.endswith(b"\n"):
            rec = rec[:-1]
        head, _, data = rec.partition(b"\t")
        if head[:1].isdigit():
            off = int(head)
            self.offset = off + len(data) + 1
            self.check = None  # known again at the next POS record
            return RawLine(off, data, self.inode)
        if head[:1] == b"T":
            off_s, _, full_s = head[1:].partition(b" ")
            off, full = int(off_s), int(full_s)
            self.offset = off + full + 1
            self.check = None
            return RawLine(off, data, self.inode, truncated=full)
        if not rec.startswith(b"!"):
            return None  # not a record of ours (a stray line on stdout): never guess
        parts = rec[1:].split(b"\t")
        kind = parts[0]
        if kind in (b"POS", b"HB", b"END"):
            pos = int(parts[1])
            if pos >= 0:
                self.offset = pos
                self.check = _check_field(parts, 2)
            if kind == b"END":
                self._eof = len(parts) > 3 and parts[3] == b"1"
            return None
        if kind == b"OPEN":
            self.inode, self.offset = int(parts[1]), int(parts[2])
            if len(parts) > 4:
                self.resolved_path = _unb64(parts[4])
            self.check = _check_field(parts, 5)
            return self._event("opened", f"size {int(parts[3])}", inode=self.inode)
        if kind == b"MISSING":
            return self._event("missing", "no such file (waiting for it)")
        if kind == b"TRUNCATED":
            old = self.offset
            self.inode, self.offset, self.check = int(parts[1]), 0, None
            why = parts[3] if len(parts) > 3 else b"shrank"
            detail = (
                f"file shrank to {int(parts[2])} bytes (was at {old}); reading from the start"
                if why == b"shrank"
                else f"the bytes before offset {old} changed (truncated and written again, now "
                f"{int(parts[2])} bytes); reading from the start"
            )
            return self._event("truncated", detail, offset=0, inode=self.inode)
        if kind == b"ROTATED":
            old = self.inode
            self.inode, self.offset, self.check = int(parts[1]), 0, None
            detail = f"a new file is at the path (inode {old} -> {self.inode}); reading it from the start"
            return self._event("rotated", detail, offset=0, inode=self.inode)
        if kind == b"CUT":
            idx, at = int(parts[1]), int(parts[2])
            src = self._regex_sources[idx] if 0 <= idx < len(self._regex_sources) else f"#{idx}"
            name = self.names.get(src, src)
            shown = f"{name!r}" if name == src else f"{name!r} ({src!r})"
            return self._event(
                "pattern_cut",
                f"pattern {shown} ran longer than {BOX_REGEX_TIMEOUT_S:g} s over one block at "
                f"offset {at} on the box (catastrophic backtracking?); it no longer selects lines",
                offset=at,
            )
        if kind == b"ERR":
            return self._event("error", _unb64(parts[1]) if len(parts) > 1 else "error")
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
                        yield self._event("truncated", text, offset=0)
                    elif "has been replaced" in text or "has appeared" in text:
                        self.offset = 0
                        yield self._event("rotated", text, offset=0)
                    continue
                off = self.offset
                self.offset = off + len(rec) if rec.endswith(b"\n") else off + len(rec) + 1
                kept, full = cap_bytes(data)
                yield RawLine(off, kept, self.inode, truncated=full)


def _connected(remote: Remote) -> bool:
    return remote.status.state is ConnState.CONNECTED


def _sessions_full(remote: Remote) -> bool:
    full = getattr(remote, "sessions_full", None)
    return bool(full()) if callable(full) else False


async def _open_stream(remote: Remote, stream: Any) -> str | None:
    """Open the agent's stream: None once open, "down" when the link is down, or why the follow
    should go through the probe channel instead.  A slow open is waited for (a loaded box, a Slurm
    step that takes seconds): only one queued for a session slot (MaxSessions used up) turns to
    polling after OPEN_WAIT_S, any other after OPEN_SLOW_S.  Until stop 33 any open slower than
    5 s fell back, saying MaxSessions was used up where it was not.  An open still pending after a
    reconnect is "down" too: it is made again on the new link."""
    link = link_of(remote)  # the link this open starts on
    opening = asyncio.ensure_future(stream.__aenter__())
    waited = 0.0
    why: str | None = None
    used = False
    try:
        while why is None:
            done, _ = await asyncio.wait({opening}, timeout=OPEN_WAIT_S)
            if done:
                opening.result()  # a drop or a refusal raises here, as before
                used = True
                return None
            waited += OPEN_WAIT_S
            # a reconnect since it started: its link is gone, so open again on the new one instead of
            # waiting up to OPEN_SLOW_S on an open the drop may have left unanswered
            if not _connected(remote) or link_of(remote) != link:
                why = "down"
            elif _sessions_full(remote):
                why = (
                    f"no SSH session became free within {waited:g} s (the server's MaxSessions is used "
                    "up; `MaxSessions 1` in sshd_config leaves none beside the probe channel: set it to "
                    "4 or more)"
                )
            elif waited >= OPEN_SLOW_S:
                why = f"the box started no process for the follower within {waited:g} s"
    finally:
        if not used:
            opening.cancel()
            await asyncio.wait({opening})
            if not opening.cancelled() and opening.exception() is None:
                await stream.__aexit__(None, None, None)  # it opened all the same: close it
    return why


def _check_field(parts: list[bytes], i: int) -> str | None:
    if len(parts) > i and parts[i] and parts[i] != b"-":
        return parts[i].decode("ascii", "replace")
    return None


def _unb64(field: bytes) -> str:
    try:
        return base64.b64decode(field, validate=True).decode("utf-8", "surrogateescape")
    except ValueError:
        return field.decode("utf-8", "replace")


async def expand_remote_path(remote: Remote, path: str) -> str:
    """Resolve a leading ~ on the box (read_file takes plain paths): core.profiles.paths.box_path."""
    from specdebug.core.profiles.paths import box_path

    return await box_path(remote, path)
