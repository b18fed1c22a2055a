"""After-the-fact analysis of a whole log (local file or a file on the box): counts and stats.

The same LogParser + MetricStore the live pane uses, fed from a file instead of a follow stream.
Remote files are read in 1 MiB chunks through `remote.read_file` (one probe round trip each), so
a scan needs no extra SSH channel and no tool on the box beyond the probe helper.
Bounded on any input: only regular files are read (a FIFO or /dev/zero is refused, saying what it
is), lines are cut at MAX_LINE (a 1 GB line or a sparse file streams in fixed memory), and user
patterns that overrun their time bound are cut off and named in the result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import Field

from specdebug.core.limits import MAX_LINE, open_regular_file
from specdebug.core.logs.acceptrate import OWN, AcceptRates
from specdebug.core.logs.blockscan import Runs, flush_runs
from specdebug.core.logs.events import LogMatch
from specdebug.core.logs.parser import LogParser, PlainMatch
from specdebug.core.logs.stats import MetricStore
from specdebug.core.model import Model
from specdebug.remote.api import Remote, RemoteError

CHUNK = 1 << 20
Progress = Callable[[int, int | None], None]  # (bytes read, total bytes or None)


class ScanResult(Model):
    """What `specdebug scan --json` prints."""

    pack: str | None
    lines: int
    metrics: dict[str, dict[str, Any]]
    events: dict[str, int]
    warmup_marker: bool = False  # a ready/warmup-done marker was seen (warmup samples excluded)
    bytes: int = 0  # bytes read
    truncated_lines: int = 0  # lines longer than MAX_LINE: only their head was parsed
    cut_patterns: dict[str, str] = Field(default_factory=dict)  # user patterns cut off (name -> why)
    # which definition each accept-rate metric uses (acceptrate: SGLang changed it in 0.5.23)
    rate_definitions: dict[str, str] = Field(default_factory=dict)


class Analyzer:
    """Parser + store + line count: feed lines, read stats at any time (scan, grep, pane)."""

    def __init__(
        self,
        parser: LogParser,
        store: MetricStore | None = None,
        *,
        last_run: bool = False,
        draft_tokens: int | None = None,
    ) -> None:
        self.parser = parser
        # draft_tokens: the profile's, for a log without a server_args line (acceptrate)
        self.rates = AcceptRates(draft_tokens)
        self.store = store or MetricStore()
        self.lines = 0
        self.bytes = 0
        self.truncated_lines = 0
        # launches append to the same log: with last_run, a server start line starts the count over
        self.last_run = last_run
        self.runs = Runs()  # batch/stat lines feed_block took in bulk, not in the store yet

    def feed(
        self,
        line: bytes | str,
        offset: int | None = None,
        lineno: int | None = None,
        inode: int | None = None,
        truncated: int | None = None,
    ) -> LogMatch | PlainMatch | None:
        self.lines += 1
        if truncated is not None:
            self.truncated_lines += 1
        m = self.parser.parse(line, offset=offset, lineno=lineno, inode=inode, truncated=truncated)
        if m is not None:
            if self.runs:  # lines before this one, taken in bulk (blockscan), are accounted first
                flush_runs(self)
            if self.last_run and m.phase == "args":  # server_args= / vLLM API server version
                self.store = MetricStore()
                self.lines = 1
            self.add(m)
        return m

    def add(self, match: LogMatch | PlainMatch) -> None:
        """Account for a match (also one parsed elsewhere, e.g. by follow_matches); batch lines get
        specdebug's own accept rate (acceptrate) next to the printed one."""
        if match.phase == "args":
            self.rates.new_run(match.line)
        elif match.metrics:
            rate = self.rates.derive(match.event, match.metrics)
            if rate is not None:
                match.metrics[OWN] = rate
        self.store.add_match(match)

    def feed_block(self, block: bytes, offset: int, lineno: int) -> int:
        """Complete lines (joined by newlines, the last without one) as if fed one by one with
        `feed`, the batch/stat lines in bulk (blockscan.py); returns the last line number."""
        from specdebug.core.logs.blockscan import feed_block

        return feed_block(self, block, offset, lineno)

    def result(self, *, include_warmup: bool = False) -> ScanResult:
        return ScanResult(
            pack=self.parser.pack_name,
            lines=self.lines,
            metrics=self.store.summary(include_warmup=include_warmup),
            events=dict(self.store.events),
            warmup_marker=self.store.marker_seen,
            bytes=self.bytes,
            truncated_lines=self.truncated_lines,
            cut_patterns=self.parser.cut_patterns,
            rate_definitions=self.rates.definitions(),
        )


class LineSplitter:
    """Bytes in, (offset, line, full length if cut) out: lines longer than `limit` keep their head
    and the rest is skipped as it streams by, so memory stays bounded by one chunk plus `limit`."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self.offset = 0  # where the pending line starts
        self._buf = b""  # head of the pending line (at most `limit` bytes)
        self._over = 0  # bytes of the pending line beyond the head

    def feed(self, chunk: bytes) -> Iterator[tuple[int, bytes, int | None]]:
        head, at, block = self.split(chunk)
        if head is not None:
            yield head
        if block is not None:
            yield from self.block_lines(at, block)

    def block_lines(self, offset: int, block: bytes) -> Iterator[tuple[int, bytes, int | None]]:
        """The lines of a block `split` returned, cut at the limit."""
        limit = self.limit
        for line in block.split(b"\n"):
            n = len(line)
            yield (offset, line, None) if n <= limit else (offset, line[:limit], n)
            offset += n + 1

    def split(self, chunk: bytes) -> tuple[tuple[int, bytes, int | None] | None, int, bytes | None]:
        """(the pending line this chunk ends, if any; the offset of the block; the block: the
        chunk's further complete lines joined by newlines, the last one's left off, or None when
        there are none). The rest waits for the next chunk."""
        limit = self.limit
        start = 0
        head = None
        if self._buf or self._over:
            nl = chunk.find(b"\n")
            if nl < 0:
                room = max(0, limit - len(self._buf))
                self._buf += chunk[:room]
                self._over += len(chunk) - min(room, len(chunk))
                return None, self.offset, None
            head = self._pending(chunk[:nl])
            start = nl + 1
        end = chunk.rfind(b"\n") + 1
        at = self.offset
        block = None
        if end > start:
            block = chunk[start : end - 1]
            self.offset = at + end - start
        rest = chunk[max(end, start) :]
        self._buf, self._over = rest[:limit], max(0, len(rest) - limit)
        return head, at, block

    def end(self) -> Iterator[tuple[int, bytes, int | None]]:
        """The last line when the data does not end with a newline."""
        if self._buf or self._over:
            yield self._pending(b"")

    def _pending(self, head: bytes) -> tuple[int, bytes, int | None]:
        full = len(self._buf) + self._over + len(head)
        room = max(0, self.limit - len(self._buf))
        line = self._buf + head[:room]
        item = (self.offset, line, full if full > self.limit else None)
        self.offset += full + 1
        self._buf, self._over = b"", 0
        return item


def iter_capped_lines(chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes, int | None]]:
    """(offset, line head, full length when cut) from byte chunks; a last line without newline counts."""
    split = LineSplitter()
    for chunk in chunks:
        yield from split.feed(chunk)
    yield from split.end()


def iter_lines_with_offsets(chunks: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(offset, line-without-newline) from byte chunks; lines are cut at MAX_LINE."""
    for offset, line, _ in iter_capped_lines(chunks):
        yield offset, line


def _file_chunks(f: BinaryIO) -> Iterator[bytes]:
    with f:
        while chunk := f.read(CHUNK):
            yield chunk


class _Counted:
    """Counts bytes of a chunk stream and reports progress."""

    def __init__(self, an: Analyzer, total: int | None, on_progress: Progress | None) -> None:
        self.an, self.total, self.on_progress = an, total, on_progress

    def add(self, chunk: bytes) -> None:
        self.an.bytes += len(chunk)
        if self.on_progress is not None:
            self.on_progress(self.an.bytes, self.total)


def _feed_chunk(
    an: Analyzer, split: LineSplitter, chunk: bytes, lineno: int, on_match: Callable[[Any], None] | None
) -> int:
    """One chunk's lines into the analyzer: in blocks (Analyzer.feed_block) unless each match is
    wanted (on_match) or lines are cut at a limit of the splitter's own."""
    if on_match is not None or split.limit != MAX_LINE:
        return _feed_all(an, split.feed(chunk), lineno, on_match)
    head, at, block = split.split(chunk)
    if head is not None:
        lineno = _feed_all(an, (head,), lineno, None)
    if block is not None:
        lineno = an.feed_block(block, at, lineno)
    return lineno


def _feed_all(
    an: Analyzer,
    items: Iterable[tuple[int, bytes, int | None]],
    lineno: int,
    on_match: Callable[[Any], None] | None,
) -> int:
    for offset, line, full in items:
        lineno += 1
        m = an.feed(line, offset=offset, lineno=lineno, truncated=full)
        if m is not None and on_match is not None:
            on_match(m)
    return lineno


def scan_chunks(
    chunks: Iterable[bytes],
    *,
    pack: str = "auto",
    patterns: Mapping[str, str] | None = None,
    include_warmup: bool = False,
    last_run: bool = False,
    on_match: Callable[[LogMatch], None] | None = None,
    on_progress: Progress | None = None,
    total: int | None = None,
    draft_tokens: int | None = None,
) -> ScanResult:
    an = Analyzer(
        LogParser(pack, patterns=patterns, from_start=True), last_run=last_run, draft_tokens=draft_tokens
    )
    count = _Counted(an, total, on_progress)
    split = LineSplitter()
    lineno = 0
    for chunk in chunks:
        count.add(chunk)
        lineno = _feed_chunk(an, split, chunk, lineno, on_match)
    _feed_all(an, split.end(), lineno, on_match)
    return an.result(include_warmup=include_warmup)


def scan_file(path: str | Path, **kwargs: Any) -> ScanResult:
    """Scan a local file (raises OSError when it cannot be read, NotRegularFile for a FIFO, device,
    directory)."""
    f = open_regular_file(path)
    kwargs.setdefault("total", _size(f))
    return scan_chunks(_file_chunks(f), **kwargs)


def _size(f: BinaryIO) -> int | None:
    import os

    try:
        return os.fstat(f.fileno()).st_size
    except OSError:
        return None


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


async def remote_file_info(remote: Remote, path: str) -> tuple[int | None, str | None]:
    """(size, kind) of a file on the box via stat(1), without opening it; (None, None) when unknown."""
    try:
        res = await remote.run(["stat", "-L", "-c", "%s %F", "--", path], timeout=15)
    except RemoteError:
        return None, None
    size, _, kind = res.out.strip().partition(" ")
    if not res.ok or not size.isdigit():
        return None, None
    return int(size), kind


async def scan_remote(
    remote: Remote,
    path: str,
    *,
    pack: str = "auto",
    patterns: Mapping[str, str] | None = None,
    include_warmup: bool = False,
    last_run: bool = False,
    on_match: Callable[[LogMatch], None] | None = None,
    on_progress: Progress | None = None,
    draft_tokens: int | None = None,
) -> ScanResult:
    """Scan a file on the box (raises RemoteError when it cannot be read or is not a regular file)."""
    size, kind = await remote_file_info(remote, path)
    if kind is not None and kind != "regular file" and kind != "regular empty file":
        raise RemoteError(f"{remote.name}: {path} is a {kind}, not a regular file: refusing to read it")
    an = Analyzer(
        LogParser(pack, patterns=patterns, from_start=True), last_run=last_run, draft_tokens=draft_tokens
    )
    count = _Counted(an, size, on_progress)
    split = LineSplitter()
    lineno = 0
    async for data in remote_chunks(remote, path):
        count.add(data)
        lineno = _feed_chunk(an, split, data, lineno, on_match)
    _feed_all(an, split.end(), lineno, on_match)
    return an.result(include_warmup=include_warmup)
