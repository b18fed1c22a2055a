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

import operator
import re
from collections.abc import Sequence
from functools import lru_cache, partial, reduce
from itertools import accumulate, compress, groupby
from itertools import count as count_from
from typing import TYPE_CHECKING, overload

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.acceptrate import OWN
from specdebug.core.logs.shapes import Shape
from specdebug.core.secrets import Scrubber

if TYPE_CHECKING:
    from specdebug.core.logs.scan import Analyzer

_DERIVING = ("decode_batch", "spec_decode")  # events AcceptRates counts (in line order)


MEMO_MAX = 4096  # distinct texts a column's float memo holds before it converts each text again


class Runs(list[tuple["_Block", int, int]]):
    """Lines matched in bulk, in line order, all read under one warmup flag: (block, first line,
    end) per stretch of a block's lines (lines no layout matched between them, fed one by one,
    gave no match: they have no metric text and are left out when accounting)."""

    warmup = False


def feed_block(an: Analyzer, block: bytes, offset: int, lineno: int) -> int:
    """Analyzer.feed_block (see the module docstring)."""
    from specdebug.core.logs.scan import LineSplitter

    text = block.decode("utf-8", "replace")
    lines = text.split("\n")  # a newline is never part of a sequence the decoder replaces
    # ASCII (a server's log, nearly always): each text line is its bytes, same length, same count
    lines_b: list[bytes] | list[str] = lines if block.isascii() else block.split(b"\n")
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
                i, lineno = _shaped(an, shapes, lines, text, feeder, lineno, i)
    flush_runs(an)
    return lineno


class _Slow:
    """`Analyzer.feed` of a block's lines by index, each at its offset in the file (the lines as
    bytes, or the text lines of an ASCII block: fed as their bytes)."""

    def __init__(self, an: Analyzer, lines_b: list[bytes] | list[str], offset: int) -> None:
        self.an, self.lines_b, self.offset = an, lines_b, offset
        self._starts: list[int] | None = None

    def feed(self, lineno: int, start: int, end: int) -> int:
        if self._starts is None:
            self._starts = list(accumulate(map((1).__add__, map(len, self.lines_b)), initial=self.offset))
        feed, starts, lines_b = self.an.feed, self._starts, self.lines_b
        for i in range(start, end):
            lineno += 1
            line = lines_b[i]
            feed(line.encode() if isinstance(line, str) else line, offset=starts[i], lineno=lineno)
        return lineno


def _shaped(
    an: Analyzer, shapes: list[Shape], lines: list[str], text: str, slow: _Slow, lineno: int, i: int
) -> tuple[int, int]:
    """Lines from `i` on: the lines a layout matches in bulk, the rest through `feed`, up to the
    end or up to a line fed that changed the parser; returns (next line, last line number)."""
    parser = an.parser
    epoch = parser.shape_epoch()
    rest = lines[i:] if i else lines
    both = _combined(tuple(shapes))
    found = both.rx.findall("\n".join(rest) if i else text) if both is not None else []
    if both is None or len(found) != len(rest):  # (one tuple per line: never seen otherwise)
        return i + len(rest), slow.feed(lineno, i, i + len(rest))
    block = _Block(both, found)
    anyone = block.matched()
    n, start = len(rest), 0
    while True:
        try:
            other = anyone.index("", start)  # the next line no layout matched
        except ValueError:
            other = n
        if other > start:
            _take(an, block, start, other)
            lineno += other - start
        if other == n:
            return i + n, lineno
        lineno = slow.feed(lineno, i + other, i + other + 1)
        start = other + 1
        if parser.shape_epoch() != epoch:
            return i + start, lineno


class _Combined:
    """One regex for every line of a block: `^(?:A|B|...|.*)$`, each layout an alternative whose
    only groups are its metric values (a layout without metrics: its whole text, one group), so
    one findall gives one tuple per line, with no match object; "" in every group: no layout.
    A layout's first group is never "" on its lines (a number, or its whole text)."""

    def __init__(self, shapes: tuple[Shape, ...]) -> None:
        alts: list[str] = []
        self.shapes = shapes
        self.firsts: list[int] = []  # per layout: its first group (0-based, in a findall tuple)
        self.metrics: list[list[int]] = []  # per layout, per metric name: its group
        at = 0
        for shape in shapes:
            if any(conv is not int and conv is not float for conv in shape.metric_convs):
                raise ValueError("a metric whose text is not a number")
            kept = sorted(set(shape.metric_groups))
            body = _only_groups(shape.rx.pattern.removesuffix(r"\Z"), set(kept))
            if not kept:
                body, kept = f"({body})", [0]
            alts.append(f"(?:{body})")
            self.firsts.append(at)
            self.metrics.append([at + kept.index(g) for g in shape.metric_groups])
            at += len(kept)
        pattern = "(?m)^(?:" + "|".join(alts) + "|.*)$" + ("()" if at == 1 else "")
        self.rx = re.compile(pattern)
        if self.rx.groups != max(at, 2):
            raise ValueError("a layout's groups were miscounted")
        self.floats: dict[str, _Floats] = {}  # per metric name


def _only_groups(src: str, keep: set[int]) -> str:
    """Regex source with every capturing group not in `keep` made non-capturing (the learned
    sources: escapes, classes without parentheses, groups `(` and `(?...)`)."""
    out: list[str] = []
    group = 0
    in_class = False
    i = 0
    while i < len(src):
        c = src[i]
        if c == "\\":
            out.append(src[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(" and not src.startswith("?", i + 1):
            group += 1
            if group not in keep:
                c = "(?:"
        out.append(c)
        i += 1
    return "".join(out)


@lru_cache(maxsize=16)
def _combined(shapes: tuple[Shape, ...]) -> _Combined | None:
    """The combined regex of these layouts (None: one of them would not fit in it)."""
    try:
        return _Combined(shapes)
    except (ValueError, re.error):
        return None


class _Block:
    """A block's lines as the combined regex read them: one column of texts per group."""

    def __init__(self, both: _Combined, found: list[tuple[str, ...]]) -> None:
        self.both = both
        self.found = found
        self.cols: list[tuple[str, ...]] = list(zip(*found, strict=True)) if found else []

    def matched(self) -> list[str]:
        """Per line: "" when no layout matched it (the layouts' first groups joined)."""
        firsts = [self.cols[f] for f in self.both.firsts]
        if len(firsts) == 1:
            return list(firsts[0])
        return list(reduce(partial(map, operator.add), firsts))  # type: ignore[arg-type]

    def kinds(self, start: int, end: int) -> list[int]:
        """Per line: which layout matched it (-1: none); for the rare path only."""
        firsts = list(enumerate(self.both.firsts))
        return [next((k for k, f in firsts if row[f]), -1) for row in self.found[start:end]]


class _Floats:
    """Texts to floats through a memo: a server's metrics repeat few texts (running requests,
    queue lengths, rates with two decimals), and a dict look-up costs a third of float(text).
    float(text) of an int or float class's text is what `extract` gives: float(int(t)) and
    float(float(t)) round the same decimal the same way (correctly rounded, half to even)."""

    def __init__(self) -> None:
        self.memo: dict[str, float] = {}
        self.many = False  # too many distinct texts: float() each

    def __call__(self, texts: Sequence[str]) -> list[float]:
        """The floats of the texts that are not "" (lines of other layouts), in order."""
        if self.many:
            return list(map(float, filter(None, texts)))
        memo = self.memo
        try:
            return list(map(memo.__getitem__, filter(None, texts)))
        except KeyError:
            pass
        new = set(texts).difference(memo)
        new.discard("")
        for text in new:
            memo[text] = float(text)
        if len(memo) > MEMO_MAX:
            self.many = True
            memo.clear()
            return list(map(float, filter(None, texts)))
        return list(map(memo.__getitem__, filter(None, texts)))


def _take(an: Analyzer, block: _Block, start: int, end: int) -> None:
    """Lines a layout matched: counted now, accounted (store, rates) in line order by flush_runs."""
    warmup = an.parser.in_warmup
    runs = an.runs
    if runs and runs.warmup != warmup:
        flush_runs(an)
        runs = an.runs
    runs.warmup = warmup
    if runs and runs[-1][0] is block:  # (the lines between gave no match: one stretch)
        runs[-1] = (block, runs[-1][1], end)
    else:
        runs.append((block, start, end))
    an.lines += end - start
    an.parser.count_block_hits(end - start)


def flush_runs(an: Analyzer) -> None:
    """The buffered lines into the rates and the store, as feeding them would have put them: per
    metric in line order, series created in the order their names first come, events counted in
    the order they first come."""
    runs = an.runs
    if not runs:
        return
    an.runs = Runs()
    for block, start, end in runs:
        _account(an, block, start, end, runs.warmup)


def _account(an: Analyzer, block: _Block, start: int, end: int, warmup: bool) -> None:
    both, cols = block.both, block.cols
    present: list[tuple[int, int, int]] = []  # (first line, layout, lines)
    for k, f in enumerate(both.firsts):
        col = cols[f][start:end]
        count = len(col) - col.count("")
        if count:
            present.append((next(compress(count_from(start), col)), k, count))
    present.sort()
    deriving = [k for _, k, _ in present if both.shapes[k].event in _DERIVING]
    if len(deriving) > 1:
        # two layouts of lines whose accept rates are judged: keep that in line order, run by run
        at = start
        for kind, same in groupby(block.kinds(start, end)):
            count = len(list(same))
            if kind >= 0:
                _account(an, block, at, at + count, warmup)
            at += count
        return
    names: list[str] = []
    owners: dict[str, list[int]] = {}  # name -> its groups, one per layout that has it
    for _, k, _ in present:
        for name, group in zip(both.shapes[k].metric_names, both.metrics[k], strict=True):
            if name not in owners:
                names.append(name)
                owners[name] = []
            owners[name].append(group)
        if k in deriving:
            names.append(OWN)  # (its place if the rates derive one: after the layout's own names)
    columns: dict[str, list[float]] = {}
    for name in names:
        if name == OWN:
            continue
        groups = owners[name]
        texts = (
            cols[groups[0]][start:end]
            if len(groups) == 1
            else list(reduce(partial(map, operator.add), (cols[g][start:end] for g in groups)))  # type: ignore[arg-type]
        )
        columns[name] = _floats(both, name)(texts)
    if deriving:
        k = deriving[0]
        shape = both.shapes[k]
        own = an.rates.derive_columns(
            shape.event, shape.metric_names, _OwnColumns(block, k, start, end, columns, owners)
        )
        if own is None:
            names.remove(OWN)
        else:
            columns[OWN] = own
    an.store.add_columns(
        [(both.shapes[k].event, count) for _, k, count in present], names, [columns[n] for n in names], warmup
    )


def _floats(both: _Combined, name: str) -> _Floats:
    floats = both.floats.get(name)
    if floats is None:
        floats = both.floats[name] = _Floats()
    return floats


class _OwnColumns(Sequence[list[float]]):
    """One layout's metric columns (its metric_names order), made when read: a metric other
    layouts share is its own lines' values only (AcceptRates reads two or three of them)."""

    def __init__(
        self,
        block: _Block,
        k: int,
        start: int,
        end: int,
        columns: dict[str, list[float]],
        owners: dict[str, list[int]],
    ) -> None:
        self.block, self.k, self.start, self.end = block, k, start, end
        self.columns, self.owners = columns, owners
        self.names = block.both.shapes[k].metric_names

    def __len__(self) -> int:
        return len(self.names)

    @overload
    def __getitem__(self, i: int) -> list[float]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[list[float]]: ...
    def __getitem__(self, i: int | slice) -> list[float] | Sequence[list[float]]:
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        name = self.names[i]
        if len(self.owners[name]) == 1:
            return self.columns[name]
        group = self.block.both.metrics[self.k][i]
        texts = self.block.cols[group][self.start : self.end]
        return _floats(self.block.both, name)(texts)
