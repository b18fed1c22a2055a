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
from collections.abc import Callable
from functools import lru_cache
from itertools import accumulate, chain, groupby
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.acceptrate import OWN
from specdebug.core.logs.shapes import Getter, Shape, getter
from specdebug.core.secrets import Scrubber

if TYPE_CHECKING:
    from specdebug.core.logs.scan import Analyzer

_DERIVING = ("decode_batch", "spec_decode")  # events AcceptRates counts (in line order)


Texts = list[tuple[str, ...]]  # a run's metric texts: one column per metric (shape.metric_names order)
MEMO_MAX = 4096  # distinct texts a column's float memo holds before it converts each text again


class Runs(list[tuple[Shape, int, Texts]]):
    """Runs of lines matched in bulk, in line order, all read under one warmup flag: (layout, how
    many lines, their metric texts)."""

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
                i, lineno = _shaped(an, shapes, lines, text, feeder, lineno, i)
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
    an: Analyzer, shapes: list[Shape], lines: list[str], text: str, slow: _Slow, lineno: int, i: int
) -> tuple[int, int]:
    """Lines from `i` on: runs of lines a shape matches in bulk, the rest through `feed`, up to the
    end or up to a line fed that changed the parser; returns (next line, last line number)."""
    parser = an.parser
    epoch = parser.shape_epoch()
    rest = lines[i:] if i else lines
    both = _combined(tuple(shapes))
    found = both.rx.findall("\n".join(rest) if i else text) if both is not None else []
    if both is None or len(found) != len(rest):  # (one tuple per line: never seen otherwise)
        return i + len(rest), slow.feed(lineno, i, i + len(rest))
    kinds = list(map(both.kind, found))
    picks = both.picks
    at = 0
    for kind, group in groupby(kinds):
        count = len(list(group))
        if kind >= 0:
            texts = picks[kind](list(zip(*found[at : at + count], strict=True)))
            _take(an, shapes[kind], count, texts)
            lineno += count
            at += count
            continue
        for _ in range(count):
            lineno = slow.feed(lineno, i + at, i + at + 1)
            at += 1
            if parser.shape_epoch() != epoch:
                return i + at, lineno
    return i + at, lineno


class _Combined:
    """One regex for every line of a block: `^(?:A|B|...|.*)$`, each layout an alternative whose
    only groups are its metric values (a layout without metrics: its whole text, one group), so
    one findall gives one tuple per line, with no match object; "" in every group: no layout."""

    def __init__(self, shapes: tuple[Shape, ...]) -> None:
        alts: list[str] = []
        self.picks: list[Callable[[list[tuple[str, ...]]], Texts]] = []  # a run's metric columns
        firsts: list[int] = []
        at = 0
        for shape in shapes:
            kept = sorted(set(shape.metric_groups))
            body = _only_groups(shape.rx.pattern.removesuffix(r"\Z"), set(kept))
            if not kept:
                body, kept = f"({body})", [0]
            alts.append(f"(?:{body})")
            firsts.append(at)
            self.picks.append(_picker(getter([at + kept.index(g) for g in shape.metric_groups])))
            at += len(kept)
        pattern = "(?m)^(?:" + "|".join(alts) + "|.*)$" + ("()" if at == 1 else "")
        self.rx = re.compile(pattern)
        if self.rx.groups != max(at, 2):
            raise ValueError("a layout's groups were miscounted")
        pairs = [(f, k) for k, f in enumerate(firsts)]

        def kind(row: tuple[str, ...]) -> int:
            for first, k in pairs:
                if row[first]:
                    return k
            return -1

        self.kind = kind


def _picker(pick: Getter) -> Callable[[list[tuple[str, ...]]], Texts]:
    """A run's metric columns out of all its group columns."""
    return lambda cols: list(pick(cols))


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


class _Floats:
    """Texts to floats through a memo: a server's metrics repeat few texts (running requests,
    queue lengths, rates with two decimals), and a dict look-up costs a third of float(text)."""

    def __init__(self) -> None:
        self.memo: dict[str, float] = {}
        self.many = False  # too many distinct texts: float() each

    def __call__(self, texts: tuple[str, ...]) -> list[float]:
        if self.many:
            return list(map(float, texts))
        memo = self.memo
        try:
            return list(map(memo.__getitem__, texts))
        except KeyError:
            pass
        for text in set(texts).difference(memo):
            memo[text] = float(text)
        if len(memo) > MEMO_MAX:
            self.many = True
            memo.clear()
            return list(map(float, texts))
        return list(map(memo.__getitem__, texts))


_FLOATS: WeakKeyDictionary[Shape, list[_Floats]] = WeakKeyDictionary()


def metric_columns(shape: Shape, cols: list[Texts]) -> list[list[float]]:
    """The plain metrics of runs of lines (their metric texts), one float column per metric, as `extract` gives them:
    float(conv(text)); an int or float class's text straight to float (float(int(t)) and
    float(float(t)) round the same decimal the same way as float(t))."""
    floats = _FLOATS.get(shape)
    if floats is None:
        floats = _FLOATS[shape] = [_Floats() for _ in shape.metric_names]
    return [
        to_float(col) if conv is int or conv is float else list(map(float, map(conv, col)))
        for conv, to_float, col in zip(shape.metric_convs, floats, _joined(cols), strict=True)
    ]


def _joined(runs: list[Texts]) -> list[tuple[str, ...]]:
    """The runs' columns, metric by metric, end to end."""
    if len(runs) == 1:
        return runs[0]
    return [tuple(chain.from_iterable(parts)) for parts in zip(*runs, strict=True)]


def _take(an: Analyzer, shape: Shape, count: int, texts: Texts) -> None:
    """Lines `shape` matched: counted now, accounted (store, rates) in line order by flush_runs."""
    warmup = an.parser.in_warmup
    if an.runs and an.runs.warmup != warmup:
        flush_runs(an)
    an.runs.warmup = warmup
    an.runs.append((shape, count, texts))
    an.lines += count
    an.parser.count_block_hits(count)


def flush_runs(an: Analyzer) -> None:
    """The buffered runs into the rates and the store, as feeding their lines would have put them:
    per metric in line order, series created in the order their names first come, events counted
    in the order they first come. One column per metric for all runs (a metric two layouts share,
    like running_req of Decode and Prefill lines, put together run by run in line order)."""
    runs = an.runs
    if not runs:
        return
    an.runs = Runs()
    if len({shape for shape, _, _ in runs if shape.event in _DERIVING}) > 1:
        # two layouts of lines whose accept rates are judged: keep that in line order, run by run
        for run in runs:
            _account(an, [run], runs.warmup)
        return
    _account(an, runs, runs.warmup)


def _account(an: Analyzer, runs: list[tuple[Shape, int, Texts]], warmup: bool) -> None:
    groups: dict[Shape, list[Texts]] = {}
    lines: dict[Shape, int] = {}
    for shape, count, texts in runs:
        groups.setdefault(shape, []).append(texts)
        lines[shape] = lines.get(shape, 0) + count
    names: list[str] = []
    owners: dict[str, list[Shape]] = {}
    by_shape: dict[Shape, dict[str, list[float]]] = {}
    events: list[tuple[str, int]] = []
    for shape, parts in groups.items():
        shape_names = list(shape.metric_names)
        cols = metric_columns(shape, parts)
        own = an.rates.derive_columns(shape.event, shape_names, cols)
        if own is not None:
            shape_names.append(OWN)
            cols.append(own)
        events.append((shape.event, lines[shape]))
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
        for shape, count, _ in runs:
            at = cursor[shape]
            cursor[shape] = at + count
            for name, col in by_shape[shape].items():
                if name in shared:
                    merged[name] += col[at : at + count]
    columns = [merged[name] if name in shared else by_shape[owners[name][0]][name] for name in names]
    an.store.add_columns(events, names, columns, warmup)
