"""The session journal: one folder per session, one append-only ``events.jsonl`` inside.

Every conclusion of a debugging session hangs on events recorded here (launches, verdicts,
marks, benchmark results), so the file is written the crash-safe way: one JSON object per
line, each line written with a single ``write`` on an ``O_APPEND`` descriptor and flushed at
once; results are also fsync'd so a kill -9 or power loss cannot take back a reported number.
A reader tolerates a torn last line (the process died mid-write) and a writer that finds one
starts on a fresh line, so later events are never glued onto the fragment. A write that fails
(full disk, quota, file size limit) is undone (the file is cut back to its previous size) and
raised as JournalError with one clear line: a record is in the file whole or not at all. Strings
longer than MAX_LINE (a 10 MB log line in an excerpt) are cut with a visible note.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, overload

import platformdirs
from pydantic import ValidationError

from specdebug.capability import require_write
from specdebug.core.limits import MAX_LINE, cap_text
from specdebug.core.records import JournalRecord, parse_record, problem_of, shown
from specdebug.errors import SpecdebugError

EVENTS_FILE = "events.jsonl"
BOX_PREFIX = "box:"  # `--session box:NAME`: the journal kept on the box (core.boxjournal)


class EventJournal(Protocol):
    """What the services need of a session journal: Journal (this machine) or core.boxjournal.BoxJournal
    (kept on the box). Typed here so launch, stop, bench, bisection and env take either. Records are
    the models of core.records, written and read back through them."""

    def append(self, record: JournalRecord, *, sync: bool = False) -> JournalRecord: ...

    def records(self, kinds: set[str] | None = None) -> list[JournalRecord]: ...


class JournalError(OSError, SpecdebugError):
    """The journal could not be written (the message names the file and the reason)."""


def sessions_root() -> Path:
    """Folder holding all sessions under the user data dir (``.../specdebug/sessions``)."""
    return Path(platformdirs.user_data_dir("specdebug")) / "sessions"


@overload
def resolve_session(
    arg: str | os.PathLike[str] | None, *, for_writing: Literal[True], target: str | None = None
) -> Path: ...


@overload
def resolve_session(
    arg: str | os.PathLike[str] | None, *, for_writing: bool, target: str | None = None
) -> Path | None: ...


def resolve_session(
    arg: str | os.PathLike[str] | None, *, for_writing: bool, target: str | None = None
) -> Path | None:
    """Which session a headless verb uses: --session DIR, else $SPECDEBUG_SESSION, else the latest one.

    Writers with no session at all get a new folder; readers get None. Reusing the latest
    session lets `specdebug bench` twice and then `specdebug history` show both runs. `box:...`
    is refused (ValueError): it names a journal on a box (verbs.common.session_journal opens it).
    A session is per target: with `target` (the host a verb acts on) the latest session is the
    latest one of that host, so a real box's results never land beside the demo's (issue 26);
    naming the session (--session, $SPECDEBUG_SESSION) joins hosts in one on purpose.
    """
    for given in (arg, os.environ.get("SPECDEBUG_SESSION")):
        if given:
            if str(given).startswith(BOX_PREFIX):  # never a local folder literally named box:...
                raise ValueError(f"{given}: a journal kept on the box: --session {given} with a host")
            return Path(given).expanduser()
    latest = Journal.latest_dir(target)
    if latest is not None:
        return latest
    return Journal.default_dir() if for_writing else None


SCANNED_EVENTS = 2000  # a session's hosts show in its first events (launches, results)


def session_hosts(session_dir: Path) -> set[str]:
    """The hosts a session's events were recorded against (launches, results, marks)."""
    hosts: set[str] = set()
    try:
        with open(session_dir / EVENTS_FILE, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh):
                if n >= SCANNED_EVENTS:
                    break
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                host = ev.get("host") if isinstance(ev, dict) else None
                if isinstance(host, str) and host:
                    hosts.add(host)
    except OSError:
        pass
    return hosts


def latest_by_host() -> list[tuple[str, Path]]:
    """Each host's latest session, oldest first, labelled: what plain `history` shows (issue 41: the
    latest session of any host was an empty one after a verb touched another host).

    A session's label is the host its events name, `", "`-joined hosts for a session joined on purpose
    (--session), or "" when they name none; only the newest session of each label is kept."""
    root = sessions_root()
    if not root.is_dir():
        return []
    latest: dict[str, Path] = {}
    for d in sorted(p for p in root.iterdir() if (p / EVENTS_FILE).is_file()):
        latest[", ".join(sorted(session_hosts(d)))] = d  # sorted by name: the start time
    return sorted(((label, d) for label, d in latest.items()), key=lambda item: item[1].name)


class Journal:
    """Append-only event log of one session folder (created on first use)."""

    def __init__(self, session_dir: str | os.PathLike[str]) -> None:
        self.session_dir = Path(session_dir)
        self.label = str(self.session_dir)  # as BoxJournal.label: what a verb prints as "the session"
        self.path = self.session_dir / EVENTS_FILE
        self._lock = threading.Lock()  # panes append from workers and the event loop alike
        self.seat: Callable[[], str | None] | None = None  # pairing: who typed (tui/widgets/seats.py)

    @staticmethod
    def default_dir() -> Path:
        """A new session folder path named by the local time it starts (not created yet)."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        base = sessions_root() / stamp
        path, n = base, 1
        while path.exists():  # two sessions started in the same second
            n += 1
            path = base.with_name(f"{stamp}-{n}")
        return path

    @staticmethod
    def latest_dir(target: str | None = None) -> Path | None:
        """Most recent existing session folder, to reopen it (None when there is none); with
        `target`, the most recent one whose events name no host but that one."""
        root = sessions_root()
        if not root.is_dir():
            return None
        dirs = sorted(p for p in root.iterdir() if (p / EVENTS_FILE).is_file())
        if target is None:
            return dirs[-1] if dirs else None
        return next((d for d in reversed(dirs) if session_hosts(d) <= {target}), None)

    def append(self, record: JournalRecord, *, sync: bool = False) -> JournalRecord:
        """Record one event; returns it stamped with ``ts`` (unix seconds, now) and the seat.

        ``sync=True`` fsyncs the file (results): the event survives a crash of the machine too.
        """
        require_write(f"journal {record.kind}", self)
        seat = self.seat() if self.seat is not None else None
        record = record.model_copy(update={"ts": time.time(), **({"seat": seat} if seat else {})})
        line = (json.dumps(_capped(record.to_json()), default=_jsonable, ensure_ascii=False) + "\n").encode()
        with self._lock:
            try:
                self.session_dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as exc:
                raise JournalError(
                    exc.errno, f"cannot write the session journal {self.path}: {_why(exc)}"
                ) from None
            try:
                if _ends_torn(self.path):
                    line = b"\n" + line
                _write_whole(fd, line, self.path)
                if sync:
                    os.fsync(fd)
            except JournalError:
                raise
            except OSError as exc:
                raise JournalError(
                    exc.errno, f"cannot write the session journal {self.path}: {_why(exc)}"
                ) from None
            finally:
                os.close(fd)
        return record

    def records(self, kinds: set[str] | None = None) -> list[JournalRecord]:
        """All readable records in order, optionally only those of ``kinds``.

        A line that does not decode (the torn tail of a killed writer) is skipped, never raised;
        so is a record that cannot be used (read_record): each such line is said in `skipped`.
        """
        self.skipped: list[str] = []
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 (closed below; read one line at a time)
        except FileNotFoundError:
            return []
        out: list[JournalRecord] = []
        with fh:
            for n, chunk, whole in _lines(fh):
                if not chunk.strip():
                    continue
                if chunk is _TOO_LONG:
                    self.skipped.append(
                        f"{self.path} line {n}: over {RECORD_LINE_MAX} bytes, not read (skipped)"
                    )
                    continue
                if kinds is not None and not _may_be(chunk, kinds):
                    continue  # not asked for: not decoded either (history over a 1 GB journal)
                try:
                    event = json.loads(chunk)
                except ValueError:
                    if whole:  # not the torn tail of a killed writer: say it
                        self.skipped.append(f"{self.path} line {n}: not a JSON record (skipped)")
                    continue
                if isinstance(event, dict) and kinds is not None and event.get("kind") not in kinds:
                    continue  # not asked for: not validated either (the bench pane reads results only)
                got = read_record(event)
                if isinstance(got, str):
                    self.skipped.append(f"{self.path} line {n}: {got} (skipped)")
                    continue
                out.append(got)
        return out

    def events(self, kinds: set[str] | None = None) -> list[dict[str, Any]]:
        """The readable records as their JSON objects (read through the models, as `records`)."""
        return [r.to_json() for r in self.records(kinds)]


RECORD_LINE_MAX = 16 << 20  # one journal line read at most (a record's strings are cut at MAX_LINE)
_TOO_LONG = b"\0too long"  # sentinel: a line over RECORD_LINE_MAX, skipped without being held


def _lines(fh: Any) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line, ended by a newline) of a journal file, one at a time: memory is one
    line (at most RECORD_LINE_MAX; a longer one is passed over in chunks and given as _TOO_LONG)."""
    n = 0
    while True:
        line = fh.readline(RECORD_LINE_MAX + 1)
        if not line:
            return
        n += 1
        if len(line) > RECORD_LINE_MAX and not line.endswith(b"\n"):
            while True:  # the rest of the long line, never held whole
                more = fh.readline(1 << 20)
                if not more or more.endswith(b"\n"):
                    break
            yield n, _TOO_LONG, True
            continue
        whole = line.endswith(b"\n")
        yield n, line.rstrip(b"\n") if whole else line, whole


def _may_be(line: bytes, kinds: set[str]) -> bool:
    """Cheap pre-check: a record of one of `kinds` holds its kind as a JSON string somewhere."""
    return any(f'"{k}"'.encode() in line for k in kinds)


def read_record(event: Any) -> JournalRecord | str:
    """A decoded journal line -> its record, or why it cannot be used: every reader of a journal (this
    file's, a box journal's) skips such a line and says which, never raises on it."""
    if not isinstance(event, dict):
        return f"a JSON {type(event).__name__}, not a record"
    kind = event.get("kind")
    if not isinstance(kind, str):
        return f"kind is {shown(kind)}, not a name"
    ts = event.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts) or ts < 0:
        return f"{kind} record: ts is {shown(ts)}, not a time"
    try:
        return parse_record(event)
    except ValidationError as exc:
        return problem_of(kind, exc)


def record_problem(event: Any) -> str | None:
    """Why a decoded journal record cannot be used (None when it can)."""
    got = read_record(event)
    return got if isinstance(got, str) else None


def _ends_torn(path: Path) -> bool:
    """True when the file is non-empty and its last byte is not a newline."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


def _write_whole(fd: int, data: bytes, path: Path) -> None:
    """Write the record (one os.write unless the kernel takes less); on failure cut the file back to
    where it was, so no half record stays behind (unless another writer appended meanwhile)."""
    before = os.fstat(fd).st_size
    view = memoryview(data)
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, view[written:])  # a short write is retried to learn the errno
    except OSError as exc:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_size == before + written:
                os.ftruncate(fd, before)
        raise JournalError(exc.errno, f"cannot write the session journal {path}: {_why(exc)}") from None


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"{exc.strerror} (make room there, or record elsewhere with --session DIR)"
    return exc.strerror or str(exc)


def _capped(value: Any) -> Any:
    """Strings longer than MAX_LINE cut with a visible note, in nested dicts and lists too."""
    if isinstance(value, str):
        return cap_text(value, MAX_LINE)
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_capped(v) for v in value]
    return value


def _jsonable(obj: Any) -> Any:
    """Fallback encoder: pydantic models, paths, sets and the like become plain JSON."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    return str(obj)
