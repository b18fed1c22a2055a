"""The shape cache: batch/stat lines of one kind repeat the same keys in the same order, so a regex
learned from one such line extracts every value of the next ones with a single match.

Why: the general path (prefix split, head search, `key: value` split, one `parse_value` per field,
the metric map) costs tens of microseconds a line in Python; a server logs a Decode batch line per
step. A `Shape` is a compiled template of one line's layout (prefix with its digits free, the head,
each key literally, each value by class: integer, decimal, bool, number with a fixed unit, or any
text) plus a plan that turns the groups into the same fields, metrics and spans as the general
path. A line the template does not match falls back to the general parser, which may teach the
cache a new shape (shapelearn.py). Learning checks the template against the general result on the
line it came from and gives up on anything irregular (duplicate keys, blank segments, metrics from
free text), so a shape either reproduces the general output or does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import call, itemgetter, methodcaller
from typing import Any

from specdebug.core.logs.events import LogMatch
from specdebug.engines.primitives import Prefix

Getter = Callable[[Any], tuple[Any, ...]]  # over groups, regs or a fields dict
# (kind, metric name, field keys, group numbers): kinds "num", "pct" (x100 unless printed with %),
# "list" (groups: first and last of the value), "max" (keys/groups: the candidates, in pack order)
MetricStep = tuple[str, str, tuple[str, ...], tuple[int, ...]]

MAX_SHAPES = 8  # per parser: a log has a handful of batch-line layouts
LEARN_FREE = 16  # learning attempts always allowed; later ones only while hits repay them
LEARN_RATIO = 256


def getter(indices: Sequence[Any]) -> Getter:
    """itemgetter that always returns a tuple (itemgetter of one index returns the item)."""
    if len(indices) == 1:
        i = indices[0]
        return lambda seq: (seq[i],)
    if not indices:
        return lambda seq: ()
    get: Getter = itemgetter(*indices)
    return get


@dataclass(frozen=True, eq=False)
class Shape:
    """One learned line layout (see the module docstring); `extract` is the hot path."""

    rx: re.Pattern[str]
    event: str
    keys: tuple[str, ...]  # every field key in the general path's order
    convs: tuple[Callable[[str], Any], ...]  # per key: int, float, bool or text (list: its first item)
    grab: Callable[[re.Match[str]], tuple[str | Any, ...]]  # the keys' groups, then the timestamp's
    has_ts: bool
    lists: tuple[tuple[str, tuple[int, ...]], ...]  # list fields: key, groups of the items after the first
    metric_steps: tuple[MetricStep, ...]
    plain: bool  # every metric is "num": built with one zip, spans with one map
    metric_names: tuple[str, ...]
    metric_get: Getter  # over fields: the plain metrics' values
    span_get: Getter  # over m.regs: the plain metrics' value spans
    span_names: tuple[tuple[str], ...]
    # the block path (scan): a plain shape's metric texts (their groups) and conversions, and
    # whether every line it can match is one the scrubber leaves as it is (`block_safe`)
    metric_texts: Callable[[re.Match[str]], tuple[str, ...]] = lambda m: ()
    metric_convs: tuple[Callable[[str], Any], ...] = ()
    metric_groups: tuple[int, ...] = ()  # the groups metric_texts reads
    block_safe: bool = False

    def extract(
        self, m: re.Match[str]
    ) -> tuple[dict[str, Any], dict[str, float | list[float]], list[tuple[int, int, str]], str | None]:
        """(fields, metrics, spans, ts) of a line this shape matched: a few C-level calls."""
        texts = self.grab(m)
        fields = dict(zip(self.keys, map(call, self.convs, texts), strict=False))  # (ts comes last)
        for key, rest in self.lists:
            fields[key] = [fields[key], *[float(m.group(g)) for g in rest]]
        ts = texts[-1] if self.has_ts else None
        if self.plain:
            metrics: dict[str, float | list[float]] = dict(
                zip(self.metric_names, map(float, self.metric_get(fields)), strict=True)
            )
            spans: list[tuple[int, int, str]] = list(
                map(tuple.__add__, self.span_get(m.regs), self.span_names)
            )
            return fields, metrics, spans, ts
        metrics, spans = run_steps(self.metric_steps, fields, m.regs)
        return fields, metrics, spans, ts


def run_steps(
    steps: Sequence[MetricStep], fields: dict[str, Any], regs: Sequence[tuple[int, int]]
) -> tuple[dict[str, float | list[float]], list[tuple[int, int, str]]]:
    """Metrics and spans of a shape whose metrics are not all plain numbers (Pack.parse_message's
    rules, decided per shape at learning; only the values are read here)."""
    metrics: dict[str, float | list[float]] = {}
    spans: list[tuple[int, int, str]] = []
    for kind, name, keys, groups in steps:
        if kind == "max":
            top = max(range(len(keys)), key=lambda i: fields[keys[i]])
            metrics[name] = float(fields[keys[top]])
            s, e = regs[groups[top]]
        elif kind == "list":
            value = fields[keys[0]]
            metrics[name] = [float(x) for x in (value if isinstance(value, list) else [value])]
            s, e = regs[groups[0]][0], regs[groups[-1]][1]
        else:
            number = fields[keys[0]]
            metrics[name] = float(round(number * 100.0, 9) if kind == "pct" else number)
            s, e = regs[groups[0]]
        spans.append((s, e, name))
    return metrics, spans


class ShapeCache:
    """The shapes of one parser's batch/stat lines, tried in order (the last hit moves forward)."""

    def __init__(self) -> None:
        self.shapes: list[Shape] = []
        self.hits = 0
        self.tries = 0  # learning attempts, successful or not

    def match(
        self, line: str, offset: int | None, lineno: int | None, inode: int | None, warmup: bool
    ) -> LogMatch | None:
        """The LogMatch of a cleaned line a known shape matches (as the general path makes it), else None."""
        shapes = self.shapes
        for i, shape in enumerate(shapes):
            m = shape.rx.match(line)
            if m is not None:
                self.hits += 1
                if i:
                    shapes[i - 1], shapes[i] = shape, shapes[i - 1]
                fields, metrics, spans, ts = shape.extract(m)
                return LogMatch.stat(
                    offset, lineno, line, shape.event, fields, metrics, spans, warmup, ts, inode
                )
        return None

    def block_shapes(self) -> list[Shape]:
        """The shapes a block of lines may be matched with in bulk (Analyzer.feed_block)."""
        return [s for s in self.shapes if s.block_safe]

    def wants(self) -> bool:
        """Whether a line the shapes missed should be learned from (bounded: a log whose batch lines
        never repeat a layout must not pay for learning on every line)."""
        return self.tries < LEARN_FREE or self.tries * LEARN_RATIO < self.hits

    def add(self, shape: Shape | None) -> None:
        self.tries += 1
        if shape is None:
            return
        if len(self.shapes) >= MAX_SHAPES:
            self.shapes.pop()
        self.shapes.append(shape)


def grabber(groups: Sequence[int]) -> Callable[[re.Match[str]], tuple[Any, ...]]:
    """m.group(*groups) as one C call, always a tuple."""
    if not groups:
        return lambda m: ()
    if len(groups) == 1:
        g = groups[0]
        return lambda m: (m.group(g),)
    grab: Callable[[re.Match[str]], tuple[Any, ...]] = methodcaller("group", *groups)
    return grab


def prefix_ts_span(prefix: Prefix) -> tuple[int, int] | None:
    """Where the prefix timestamp lies in the line (None: no timestamp)."""
    if prefix.ts is None or prefix.ts_at < 0:
        return None
    return prefix.ts_at, prefix.ts_at + len(prefix.ts)
