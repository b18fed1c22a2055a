"""A session journal kept on the box (`--session box:NAME`), shared by every instance that opens it.

Two engineers each run their own specdebug against the same box (one may be `--readonly`); with
the journal on the box, each sees the other's benchmark results, bisection trials and marks live.
The file is the same `events.jsonl` as a local session, at `~/.specdebug/sessions/NAME/` on the
box (or `box:/abs/dir`).  Writes go through the remote as one whole line each: a small python3
program on the box (specdebug/box/journal_append.py) appends it with a single `write` on an
O_APPEND descriptor and fsyncs, so two writers never interleave inside a line.  Readers follow the
file by byte offset (`refresh`), keep a torn tail until its newline arrives, and skip the events
they wrote themselves (by `eid`).

Same surface as core.journal.Journal (`append`, `events`) so panes do not care where it lives;
`append` is synchronous for them: the event is visible here at once and written by a background
task (`flush` waits for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from specdebug.capability import require_write
from specdebug.core.journal import BOX_PREFIX, EVENTS_FILE, _jsonable, read_record
from specdebug.core.records import JournalRecord
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote, RemoteError
from specdebug.remote.boxcode import FRAME, python_argv

BOX_SESSIONS = "~/.specdebug/sessions"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
READ_CHUNK = 1 << 20


class BoxJournalError(ValueError, SpecdebugError):
    """`--session box:...` names no usable place."""

    exit_code = 2


GROUP_SUFFIX = ",group="  # box:/abs/dir,group=GROUP: a journal folder shared with GROUP on the box
GROUP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")


def split_group(spec: str) -> tuple[str, str | None]:
    """`/abs/dir,group=G` -> ("/abs/dir", "G"): the user asked for a group-shared folder (only then
    does the box accept a group-writable one); anything else -> (spec, None)."""
    folder, sep, group = spec.rpartition(GROUP_SUFFIX)
    if not sep:
        return spec, None
    if not folder.startswith("/"):
        raise BoxJournalError(
            f"box:{spec}: a group-shared journal needs an absolute folder (box:/abs/dir,group=G)"
        )
    if not GROUP_RE.fullmatch(group):
        raise BoxJournalError(f"box:{spec}: {group!r} is not a group name")
    return folder, group


def box_path(spec: str) -> str:
    """`NAME` -> ~/.specdebug/sessions/NAME/events.jsonl; `/abs/dir` -> /abs/dir/events.jsonl."""
    spec, _group = split_group(spec)
    if spec.startswith("/"):
        if "\n" in spec or "/../" in f"{spec}/":
            raise BoxJournalError(f"box:{spec}: not a plain absolute folder")
        return f"{spec.rstrip('/')}/{EVENTS_FILE}"
    if not NAME_RE.fullmatch(spec) or spec in (".", ".."):
        raise BoxJournalError(f"box:{spec}: a session name is letters, digits, '.', '-' and '_'")
    return f"{BOX_SESSIONS}/{spec}/{EVENTS_FILE}"


def box_spec(session: str | None) -> str | None:
    """`box:NAME` (or `box:/abs/dir`) -> the checked spec; None for a local session (BoxJournalError: bad)."""
    if not session or not session.startswith(BOX_PREFIX):
        return None
    spec = session.removeprefix(BOX_PREFIX)
    box_path(spec)
    return spec


def attribute(ev: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """Name a record by who wrote its file as the box sees it (the owner, `info`), not by what it
    says: one claiming another writer is marked `forged` (what it claimed kept in `by_claimed`); in
    a file others could write too (an old shared `events.jsonl`) the writer cannot be told."""
    if info.get("shared"):
        ev["by_verified"] = False
        return ev
    by, uid = str(info["by"]), int(info["uid"])
    claimed_uid = ev.get("uid")
    if ev.get("by", by) != by or (claimed_uid is not None and claimed_uid != uid):
        ev["forged"] = True
        ev["by_claimed"] = f"{ev.get('by')} (uid {claimed_uid})" if claimed_uid is not None else ev.get("by")
    ev["by"], ev["uid"] = by, uid
    return ev


def _ts(rec: JournalRecord) -> float:
    return rec.ts


class BoxJournal:
    """The journal file on the box behind one Remote (see the module docstring)."""

    def __init__(self, remote: Remote, spec: str) -> None:
        self.remote = remote
        self.spec = spec
        self.path = box_path(spec)  # ~ expanded on first use
        self.group = split_group(spec)[1]  # None: the folder must be ours and private
        self.session_dir = None  # nothing local: reports and `history` read it through the remote
        self.label = f"box:{spec}"
        self._events: list[JournalRecord] = []
        self.skipped: list[str] = []  # lines of the box file that are no record (said by the verbs)
        self._eids: set[str] = set()
        self._offsets: dict[str, int] = {}  # per file of the journal folder (a group's: one per member)
        self._tails: dict[str, bytes] = {}
        self.refused: list[str] = []  # files of a group journal the box would not read (why, each)
        self._outbox: list[bytes] = []
        self._writer: asyncio.Task[None] | None = None
        self._expanded = False
        self.listeners: list[Callable[[list[JournalRecord]], None]] = []
        # who writes, as the box sees it (the SSH login): the box stamps every record with it; until
        # the first append answers, the local name (only ever shown here, never written)
        self.by = getpass.getuser()
        self.seat: Callable[[], str | None] | None = None  # pairing: the seat that typed (core.pair.session)
        self.last_error = ""

    # -- the Journal surface --------------------------------------------------------------------
    def append(self, record: JournalRecord, *, sync: bool = False) -> JournalRecord:
        """Record one event: visible here now, on the box as soon as the writer sends it."""
        require_write(f"journal {record.kind}", self, self.remote)
        stamps: dict[str, Any] = {"ts": time.time(), "eid": uuid.uuid4().hex, "by": self.by}
        seat = self.seat() if self.seat is not None else None
        if seat:
            stamps["seat"] = seat
        record = record.model_copy(update=stamps)
        line = (json.dumps(record.to_json(), default=_jsonable, ensure_ascii=False) + "\n").encode()
        self._add([record])
        self._outbox.append(line)
        self._kick()
        return record

    def records(self, kinds: set[str] | None = None) -> list[JournalRecord]:
        return [e for e in self._events if kinds is None or e.kind in kinds]

    def events(self, kinds: set[str] | None = None) -> list[dict[str, Any]]:
        """The records as their JSON objects (as Journal.events)."""
        return [r.to_json() for r in self.records(kinds)]

    # -- box side -------------------------------------------------------------------------------
    async def _resolve(self) -> str:
        if not self._expanded:
            from specdebug.core.logs.follow import expand_remote_path

            self.path = await expand_remote_path(self.remote, self.path)
            self._expanded = True
        return self.path

    async def refresh(self) -> list[JournalRecord]:
        """Read what was appended on the box since the last look; returns the others' new records
        (a line that is no record is skipped and said in `skipped`).

        Through specdebug/box/journal_append.py `--read`: no symlink followed, the folder ours and
        private (or the group's, when asked for), and each file's owner as the box sees it, which
        names the records in it (`attribute`)."""
        path = await self._resolve()
        new: list[JournalRecord] = []
        while True:
            head, data = await self._read(path)
            got = 0
            for info in head["files"]:
                name, size = str(info["name"]), int(info["len"])
                chunk, data = data[:size], data[size:]
                got += size
                if int(info["offset"]) != self._offsets.get(name, 0):
                    self._tails[name] = b""  # the file shrank (rewritten): read again from its start
                self._offsets[name] = int(info["offset"]) + size
                lines = (self._tails.get(name, b"") + chunk).split(b"\n")
                self._tails[name] = lines.pop()
                for raw in lines:
                    if not raw.strip():
                        continue
                    try:
                        obj = json.loads(raw)
                    except ValueError:
                        obj = None
                    rec = read_record(attribute(obj, info)) if isinstance(obj, dict) else "not a JSON record"
                    if isinstance(rec, str):
                        self.skipped.append(f"{self.label} ({name}): {rec} (skipped)")
                    elif rec.eid is None or rec.eid not in self._eids:
                        new.append(rec)
            self.refused = [str(r) for r in head.get("refused", [])]
            if got < READ_CHUNK:
                break
        if new:
            new.sort(key=_ts)  # a group journal is one file per member: merged in time order
            self._add(new)
            for listener in list(self.listeners):
                listener(new)
        return new

    async def _read(self, path: str) -> tuple[dict[str, Any], bytes]:
        offsets = json.dumps(self._offsets)
        argv = python_argv("journal_append.py", "--read", path, self.group or "", offsets, str(READ_CHUNK))
        res = await self.remote.run(argv, timeout=30)
        if not res.ok:
            why = res.err.strip().splitlines()[-1:] or [f"exit status {res.exit_status}"]
            raise RemoteError(f"box journal: {why[0][:400]}")
        at = res.stdout.find(FRAME.encode())
        end = res.stdout.find(b"\n", at)
        try:
            head = json.loads(res.stdout[at + len(FRAME) : end]) if at >= 0 and end > at else None
        except ValueError:
            head = None
        if not isinstance(head, dict) or not isinstance(head.get("files"), list):
            raise RemoteError(f"box journal {path}: the box answered {res.out.strip()[:200]!r}")
        return head, res.stdout[end + 1 :]

    async def follow(self, interval: float = 0.5, idle_max: float = 1.5) -> None:
        """Refresh forever (the app runs this as a worker); connection trouble just waits.  Each
        read starts a python3 on the box (the checked read), so a quiet journal is asked less
        often: the pause doubles up to `idle_max` and is back to `interval` once events come."""
        pause = interval
        while True:
            new: list[JournalRecord] = []
            with contextlib.suppress(RemoteError, OSError):
                new = await self.refresh()
            pause = interval if new else min(pause * 2, max(interval, idle_max))
            await asyncio.sleep(pause)

    async def flush(self, timeout: float = 30.0) -> None:
        """Wait until every appended event is on the box (raises the writer's last error)."""
        self._kick()
        if self._writer is not None:
            await asyncio.wait_for(asyncio.shield(self._writer), timeout)
        if self._outbox:
            n = len(self._outbox)
            raise RemoteError(
                f"box journal {self.path}: {n} event{'s' if n != 1 else ''} not written: {self.last_error}"
            )

    def _stamped(self, line: bytes, answer: str) -> None:
        """The box named the writer (`by NAME UID`): our copy of the event says the same."""
        parts = answer.strip().split()
        if len(parts) != 3 or parts[0] != "by" or not parts[2].isdigit():
            return
        self.by = parts[1]
        eid = json.loads(line).get("eid")
        for ev in reversed(self._events):
            if ev.eid == eid:
                ev.by, ev.uid = parts[1], int(parts[2])
                break

    def _add(self, events: list[JournalRecord]) -> None:
        for ev in events:
            eid = ev.eid
            if eid:
                self._eids.add(eid)
            self._events.append(ev)

    def _kick(self) -> None:
        if self._writer is not None and not self._writer.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: flush() sends later
        if self._outbox:
            self._writer = loop.create_task(self._send_all())

    async def _send_all(self) -> None:
        """Send queued lines in order; on failure keep them for the next append or flush."""
        try:
            path = await self._resolve()
            while self._outbox:
                # specdebug/box/journal_append.py: whole or nothing under a lock, no symlink followed,
                # the folder checked (ours and private, or the group asked for); answers `by NAME UID`
                res = await self.remote.run(
                    python_argv("journal_append.py", path, self.group or ""),
                    input=self._outbox[0],
                    timeout=30,
                )
                if not res.ok:
                    why = res.err.strip().splitlines()[-1:] or [f"exit status {res.exit_status}"]
                    self.last_error = why[0][:400]
                    return
                self._stamped(self._outbox.pop(0), res.out)
        except (RemoteError, OSError) as exc:
            self.last_error = str(exc)
