"""The block path of scan: a server's log is mostly batch/stat lines of a few layouts, and the
parser's shape cache (shapes.py) already knows each layout as one regex. Here such lines are
matched over a whole block with one C loop per shape and go to the store as columns, with no
match object, dict or scrub call per line; every other line takes `Analyzer.feed`. Why a path of
its own: per line, the general path costs about 10x what awk does; the per-line work left here is
the regex match and the float conversions.

Same results as feeding each line (tests/unit/test_scan_block.py): a line goes in bulk only when
`parse` would turn it into exactly its shape's event and metrics (LogParser.block_shapes: a known
pack, no user patterns, a shape the scrubber cannot touch, no known secret value in the block, no
ESC, CR or overlong line); the bulk lines are accounted in their order before any later line that
`feed` turns into a match (Runs), with the warmup flag they were read under; a line `feed` took
that changed the parser (a new shape, a secret learned) makes the rest of the block be read again.
"""

from __future__ import annotations

import re
from itertools import accumulate, groupby
from typing import TYPE_CHECKING

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.acceptrate import OWN
from specdebug.core.logs.shapes import Shape, metric_columns
from specdebug.core.secrets import Scrubber

if TYPE_CHECKING:
    from specdebug.core.logs.scan import Analyzer

_DERIVING = ("decode_batch", "spec_decode")  # events AcceptRates counts (in line order)


class Runs(list[tuple[Shape, list[re.Match[str]]]]):
    """Runs of lines matched in bulk, in line order, all read under one warmup flag."""

    warmup = False


def feed_block(an: Analyzer, block: bytes, offset: int, lineno: int) -> int:
    """Analyzer.feed_block (see the module docstring)."""
    from specdebug.core.logs.scan import LineSplitter

    lines_b = block.split(b"\n")
    text = block.decode("utf-8", "replace")
    lines = text.split("\n")  # a newline is never part of a sequence the decoder replaces
    feeder = _Slow(an, lines_b, offset)
    n = len(lines)
    if max(map(len, lines_b)) > MAX_LINE:
        for at, line, full in LineSplitter(MAX_LINE).block_lines(offset, block):
            lineno += 1
            an.feed(line, offset=at, lineno=lineno, truncated=full)
    elif b"\x1b" in block or b"\r" in block or n != len(lines_b):
        lineno = feeder.feed(lineno, 0, n)
    else:
        parser = an.parser
        i = 0
        while i < n:
            shapes = parser.block_shapes()
            if not shapes:  # (no pack decided, no shape learned yet)
                lineno = feeder.feed(lineno, i, i + 1)
                i += 1
            elif isinstance(parser.scrub, Scrubber) and not parser.scrub.knows_none_of(text):
                lineno = feeder.feed(lineno, i, n)  # (what it knows only grows)
                i = n
            else:
                i, lineno = _shaped(an, shapes, lines, feeder, lineno, i)
    flush_runs(an)
    return lineno


class _Slow:
    """`Analyzer.feed` of a block's lines by index, each at its offset in the file."""

    def __init__(self, an: Analyzer, lines_b: list[bytes], offset: int) -> None:
        self.an, self.lines_b, self.offset = an, lines_b, offset
        self._starts: list[int] | None = None

    def feed(self, lineno: int, start: int, end: int) -> int:
        if self._starts is None:
            self._starts = list(accumulate(map((1).__add__, map(len, self.lines_b)), initial=self.offset))
        feed, starts, lines_b = self.an.feed, self._starts, self.lines_b
        for i in range(start, end):
            lineno += 1
            feed(lines_b[i], offset=starts[i], lineno=lineno)
        return lineno


def _shaped(
    an: Analyzer, shapes: list[Shape], lines: list[str], slow: _Slow, lineno: int, i: int
) -> tuple[int, int]:
    """Lines from `i` on: runs of lines a shape matches in bulk, the rest through `feed`, up to the
    end or up to a line fed that changed the parser; returns (next line, last line number)."""
    parser = an.parser
    epoch = parser.shape_epoch()
    rest = lines[i:] if i else lines
    found: list[re.Match[str] | None] = list(map(shapes[0].rx.match, rest))
    kinds = [0 if m is not None else -1 for m in found]
    for k, shape in enumerate(shapes[1:], 1):
        for j in [j for j, kind in enumerate(kinds) if kind < 0]:
            m = shape.rx.match(rest[j])
            if m is not None:
                found[j], kinds[j] = m, k
    at = 0
    for kind, group in groupby(kinds):
        count = sum(1 for _ in group)
        if kind >= 0:
            _take(an, shapes[kind], found[at : at + count])  # type: ignore[arg-type]
            lineno += count
            at += count
            continue
        for _ in range(count):
            lineno = slow.feed(lineno, i + at, i + at + 1)
            at += 1
            if parser.shape_epoch() != epoch:
                return i + at, lineno
    return i + at, lineno


def _take(an: Analyzer, shape: Shape, found: list[re.Match[str]]) -> None:
    """Lines `shape` matched: counted now, accounted (store, rates) in line order by flush_runs."""
    warmup = an.parser.in_warmup
    if an.runs and an.runs.warmup != warmup:
        flush_runs(an)
    an.runs.warmup = warmup
    an.runs.append((shape, found))
    an.lines += len(found)
    an.parser.count_block_hits(len(found))


def flush_runs(an: Analyzer) -> None:
    """The buffered runs into the rates and the store, as feeding their lines would have put them:
    per metric in line order, series created in the order their names first come, events counted
    in the order they first come. One column per metric for all runs (a metric two layouts share,
    like running_req of Decode and Prefill lines, put together run by run in line order)."""
    runs = an.runs
    if not runs:
        return
    an.runs = Runs()
    if len({shape for shape, _ in runs if shape.event in _DERIVING}) > 1:
        # two layouts of lines whose accept rates are judged: keep that in line order, run by run
        for run in runs:
            _account(an, [run], runs.warmup)
        return
    _account(an, runs, runs.warmup)


def _account(an: Analyzer, runs: list[tuple[Shape, list[re.Match[str]]]], warmup: bool) -> None:
    groups: dict[Shape, list[re.Match[str]]] = {}
    for shape, found in runs:
        groups.setdefault(shape, []).extend(found)
    names: list[str] = []
    owners: dict[str, list[Shape]] = {}
    by_shape: dict[Shape, dict[str, list[float]]] = {}
    events: list[tuple[str, int]] = []
    for shape, found in groups.items():
        shape_names = list(shape.metric_names)
        cols = metric_columns(shape, found)
        own = an.rates.derive_columns(shape.event, shape_names, cols)
        if own is not None:
            shape_names.append(OWN)
            cols.append(own)
        events.append((shape.event, len(found)))
        by_shape[shape] = dict(zip(shape_names, cols, strict=True))
        for name in shape_names:
            if name not in owners:
                names.append(name)
                owners[name] = []
            owners[name].append(shape)
    shared = {name for name in names if len(owners[name]) > 1}
    merged: dict[str, list[float]] = {name: [] for name in shared}
    if shared:
        cursor = dict.fromkeys(groups, 0)
        for shape, found in runs:
            at, count = cursor[shape], len(found)
            cursor[shape] = at + count
            for name, col in by_shape[shape].items():
                if name in shared:
                    merged[name] += col[at : at + count]
    columns = [merged[name] if name in shared else by_shape[owners[name][0]][name] for name in names]
    an.store.add_columns(events, names, columns, warmup)
