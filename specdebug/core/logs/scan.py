"""After-the-fact analysis of a whole log (local file or a file on the box): counts and stats.

The same LogParser + MetricStore the live pane uses, fed from a file instead of a follow stream.
Remote files are read in 1 MiB chunks through `remote.read_file` (one probe round trip each), so
a scan needs no extra SSH channel and no tool on the box beyond the probe helper.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from specdebug.core.logs.events import LogMatch
from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.stats import MetricStore
from specdebug.remote.api import Remote

CHUNK = 1 << 20


class ScanResult(BaseModel):
    """What `specdebug scan --json` prints."""

    pack: str | None
    lines: int
    metrics: dict[str, dict[str, Any]]
    events: dict[str, int]
    warmup_marker: bool = False  # a ready/warmup-done marker was seen (warmup samples excluded)


class Analyzer:
    """Parser + store + line count: feed lines, read stats at any time (scan, grep, pane)."""

    def __init__(
        self, parser: LogParser, store: MetricStore | None = None, *, last_run: bool = False
    ) -> None:
        self.parser = parser
        self.store = store or MetricStore()
        self.lines = 0
        # launches append to the same log: with last_run, a server start line starts the count over
        self.last_run = last_run

    def feed(
        self,
        line: bytes | str,
        offset: int | None = None,
        lineno: int | None = None,
        inode: int | None = None,
    ) -> LogMatch | None:
        self.lines += 1
        m = self.parser.parse(line, offset=offset, lineno=lineno, inode=inode)
        if m is not None:
            if self.last_run and m.phase == "args":  # server_args= / vLLM API server version
                self.store = MetricStore()
                self.lines = 1
            self.store.add_match(m)
        return m

    def add(self, match: LogMatch) -> None:
        """Account for a match parsed elsewhere (e.g. by follow_matches)."""
        self.store.add_match(match)

    def result(self, *, include_warmup: bool = False) -> ScanResult:
        return ScanResult(
            pack=self.parser.pack_name,
            lines=self.lines,
            metrics=self.store.summary(include_warmup=include_warmup),
            events=dict(self.store.events),
            warmup_marker=self.store.marker_seen,
        )


def iter_lines_with_offsets(chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(offset, line-without-newline) from byte chunks; a last line without newline counts too."""
    offset = 0
    buf = b""
    for chunk in chunks:
        buf += chunk
        parts = buf.split(b"\n")
        buf = parts.pop()
        for p in parts:
            yield offset, p
            offset += len(p) + 1
    if buf:
        yield offset, buf


def _file_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def scan_chunks(
    chunks: Iterable[bytes],
    *,
    pack: str = "auto",
    patterns: Mapping[str, str] | None = None,
    include_warmup: bool = False,
    last_run: bool = False,
    on_match: Callable[[LogMatch], None] | None = None,
) -> ScanResult:
    an = Analyzer(LogParser(pack, patterns=patterns, from_start=True), last_run=last_run)
    for lineno, (offset, line) in enumerate(iter_lines_with_offsets(chunks), 1):
        m = an.feed(line, offset=offset, lineno=lineno)
        if m is not None and on_match is not None:
            on_match(m)
    return an.result(include_warmup=include_warmup)


def scan_file(path: str | Path, **kwargs: Any) -> ScanResult:
    """Scan a local file (raises OSError when it cannot be read)."""
    return scan_chunks(_file_chunks(Path(path)), **kwargs)


def scan_lines(lines: Iterable[str], **kwargs: Any) -> ScanResult:
    """Scan text lines (tests, excerpts pasted by users)."""
    return scan_chunks((line.rstrip("\n").encode() + b"\n" for line in lines), **kwargs)


async def remote_chunks(remote: Remote, path: str, chunk: int = CHUNK) -> AsyncIterator[bytes]:
    """A remote file in chunks, up to its size when the first chunk was read (a growing log ends)."""
    offset = 0
    while True:
        data = await remote.read_file(path, offset=offset, max_bytes=chunk)
        if data:
            yield data
            offset += len(data)
        if len(data) < chunk:
            return


async def scan_remote(
    remote: Remote,
    path: str,
    *,
    pack: str = "auto",
    patterns: Mapping[str, str] | None = None,
    include_warmup: bool = False,
    last_run: bool = False,
    on_match: Callable[[LogMatch], None] | None = None,
) -> ScanResult:
    """Scan a file on the box (raises RemoteError when it cannot be read)."""
    an = Analyzer(LogParser(pack, patterns=patterns, from_start=True), last_run=last_run)
    offset = 0
    lineno = 0
    buf = b""
    async for data in remote_chunks(remote, path):
        buf += data
        parts = buf.split(b"\n")
        buf = parts.pop()
        for p in parts:
            lineno += 1
            m = an.feed(p, offset=offset, lineno=lineno)
            offset += len(p) + 1
            if m is not None and on_match is not None:
                on_match(m)
    if buf:
        lineno += 1
        m = an.feed(buf, offset=offset, lineno=lineno)
        if m is not None and on_match is not None:
            on_match(m)
    return an.result(include_warmup=include_warmup)
