"""The fast log path gives exactly what the general path gives (issue 16's metric extraction).

Two fast parts are checked against their plain counterparts:
- the shape cache (core/logs/shapes.py): a LogParser with it and one with `shapes=False` are fed
  the same lines, and every LogMatch must be equal with the same types, dict order and set fields;
  on every real-format line in the log tests and tests/fixtures/logs, and on hypothesis variants
  (numbers, missing, extra, repeated and reordered keys, units, odd values, garbage endings);
- the batched Series/MetricStore (core/logs/stats.py) against a one-by-one reference with the
  same reservoir (same seeds, same random draws).
"""

from __future__ import annotations

import ast
import math
import random
import re
from array import array
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.follow import RawLine
from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.shapelearn import same
from specdebug.core.logs.stats import PLAN, MetricStore, Series
from tests.pyparse import parse_file

HERE = Path(__file__).resolve().parent
SOURCES = ["test_log_patterns.py", "test_format_gaps.py", "test_log_stats_scan.py"]
FIXTURE = HERE.parent / "fixtures" / "logs" / "format_lines.log"
PACKS = ("sglang", "vllm", "auto")
HEADS = (
    "Decode batch",
    "Prefill batch",
    "SpecDecoding metrics",
    "Speculative metrics",
    "Avg prompt throughput",
)


def _corpus() -> list[str]:
    """Every string constant of the log tests (their real-format lines among them) + the fixture."""
    lines: list[str] = []
    for name in SOURCES:
        tree = parse_file(HERE / name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                lines.extend(node.value.splitlines())
    lines.extend(FIXTURE.read_text().splitlines())
    return list(dict.fromkeys(line for line in lines if line.strip()))


CORPUS = _corpus()
STAT_LINES = [line for line in CORPUS if any(h in line for h in HEADS)]


def dump(m: Any) -> Any:
    if m is None:
        return None
    assert isinstance(m, LogMatch)
    return (m.model_dump(), sorted(m.model_fields_set))


def feed_both(pack: str, lines: list[str], **kw: Any) -> tuple[LogParser, MetricStore, MetricStore]:
    """Feed `lines` to a fast and a general parser of `pack`; every result must be the same."""
    fast, slow = LogParser(pack, **kw), LogParser(pack, shapes=False, **kw)
    s_fast, s_slow = MetricStore(), MetricStore()
    for i, line in enumerate(lines):
        a = fast.parse(line, offset=i * 100, lineno=i + 1, inode=7)
        b = slow.parse(line, offset=i * 100, lineno=i + 1, inode=7)
        assert same(dump(a), dump(b)), (pack, line, dump(a), dump(b))
        for store, m in ((s_fast, a), (s_slow, b)):
            if m is not None:
                store.add_match(m)
    assert (fast.in_warmup, fast.marker_seen, fast.pack_name) == (
        slow.in_warmup,
        slow.marker_seen,
        slow.pack_name,
    )
    assert same_store(s_fast, s_slow)
    return fast, s_fast, s_slow


def same_store(a: MetricStore, b: MetricStore) -> bool:
    return (
        a.names() == b.names()
        and a.events == b.events
        and a.marker_seen == b.marker_seen
        and all(same(a.summary(include_warmup=w), b.summary(include_warmup=w)) for w in (True, False))
        and all(
            list(sa.recent) == list(sb.recent)
            for name in a.names()
            for sa, sb in [(a.series(name, include_warmup=True), b.series(name, include_warmup=True))]
            if sa is not None and sb is not None
        )
    )


@pytest.mark.parametrize("pack", PACKS)
def test_every_format_line_parses_the_same(pack: str) -> None:
    # each line three times: the first teaches the cache, the next ones go through it
    lines = [line for line in CORPUS for _ in range(3)]
    fast, _, _ = feed_both(pack, lines)
    if pack != "auto":
        assert fast._shapes is not None and fast._shapes.hits > 0


def test_the_cache_serves_the_real_stat_lines() -> None:
    """Not vacuous: each batch/stat line shape of the fixture is learned and then served."""
    for line in FIXTURE.read_text().splitlines():
        if not any(h in line for h in HEADS) or "nan" in line or "#running-req: 4" in line or "-1" in line:
            continue
        pack = "vllm" if "metrics:" in line or "Avg prompt" in line else "sglang"
        p = LogParser(pack)
        p.parse(line)
        assert p._shapes is not None and p._shapes.shapes, line
        again = p.parse(line.replace("1", "2"))
        assert p._shapes.hits == 1, line
        assert same(dump(again), dump(LogParser(pack, shapes=False).parse(line.replace("1", "2"))))


def test_markers_warmup_and_interleaving_stay_the_same() -> None:
    decode = STAT_LINES[0]
    lines = [
        "server_args=ServerArgs(model_path='m', api_key='sk-secret-123456')",
        decode,
        decode,
        "[2026-01-15 12:00:02] The server is fired up and ready to roll!",
        decode,
        "random noise line",
        decode.replace("Decode", "\x1b[32mDecode\x1b[0m"),
        decode + " api_key=sk-secret-123456",
        decode,
        "x" * 70_000,
    ]
    for pack in PACKS:
        feed_both(pack, lines)
        feed_both(pack, lines, from_start=False)


def test_grep_and_profile_patterns_use_the_general_path() -> None:
    p = LogParser("sglang", patterns={"al": r"accept len: (?P<value>[\d.]+)"})
    assert p._shapes is None
    assert LogParser("sglang", grep=["Decode"])._shapes is None
    feed_both("sglang", STAT_LINES * 2, patterns={"al": r"accept len: (?P<value>[\d.]+)"})


def test_an_earlier_head_inside_a_value_is_not_missed() -> None:
    base = "[2026-01-15 12:00:12 TP0] Prefill batch, #new-seq: 1, note: abc, token usage: 0.00, #queue-req: 0"
    _, store, _ = feed_both("sglang", [base, base.replace("abc", "Decode batch. x"), base])
    assert store.events["decode_batch"] == 1


def test_parse_batch_equals_parse_line_by_line() -> None:
    """What follow_match_batches calls: LogEvents pass through, long/ANSI/truncated lines too."""
    lines = [*CORPUS, "\x1b[31m" + STAT_LINES[0], STAT_LINES[0] + "x" * 70_000, *STAT_LINES]
    items: list[Any] = [RawLine(i * 10, line.encode(), 5) for i, line in enumerate(lines)]
    items.insert(3, LogEvent(kind="rotated", path="p"))
    items.append(RawLine(99, STAT_LINES[1].encode(), 5, truncated=123456))
    for pack in PACKS:
        for pre in (True, False):
            one, batch = LogParser(pack), LogParser(pack)
            want = [it if isinstance(it, LogEvent) else one.parse(it.data, it.offset, None, it.inode, it.truncated, pre)
                    for it in items]  # fmt: skip
            got = [*batch.parse_batch(items[:40], pre), *batch.parse_batch(items[40:], pre)]
            assert [dump(m) if isinstance(m, LogMatch) else m for m in got] == [
                dump(m) if isinstance(m, LogMatch) else m for m in want if m is not None
            ]


def test_stat_constructor_equals_fast() -> None:
    values: dict[str, Any] = dict(
        offset=3, lineno=None, line="l", event="decode_batch", fields={"a": 1}, metrics={"m": 1.0},
        spans=[(0, 1, "m")], warmup=True, ts="t", inode=9,
    )  # fmt: skip
    a = LogMatch.stat(**values)
    b = LogMatch.fast(**values, also=[], phase=None)
    assert a == b and a.model_fields_set == b.model_fields_set and list(a.__dict__) == list(b.__dict__)
    assert a.model_dump_json() == b.model_dump_json()
    assert a.also is not LogMatch.stat(**values).also


# -- hypothesis: variants of real stat lines ---------------------------------------------------------------

VALUES = st.one_of(
    st.integers(0, 10**7).map(str),
    st.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.2f}"),
    st.sampled_from(
        [
            "True",
            "False",
            "nan",
            "inf",
            "-3",
            "007",
            "1.",
            "1e5",
            ".5",
            "5 tokens/s",
            "41.0%",
            "12 reqs",
            "abc",
            "",
            " 5",
            "5 ",
            "a, b",
            "x: y",
            "0.700, 0.450",
            "1,000",
            "٣",
            "²",
            "3.5 %",
            "7e",
            "9" * 320,
            "1.5.",
            "True.",
            "4 ,",
            "2\t",
            "0.41,",
        ]
    ),  # fmt: skip
    st.text(alphabet=" ,.:%0123456789abeE-+", max_size=6),
)
KEYS = st.sampled_from(
    ["#token", "token usage", "accept len", "extra key", "#new", "Running", "mamba usage", "x"]
)
SUFFIXES = st.sampled_from(
    ["", ",", ".", ", ", " ", "  ", "\t", ",.", ". ,", "x", ", , ", "..", " .", "%", ":", "\r"]
)


@st.composite
def variant(draw: st.DrawFn, base: str) -> str:
    head, *segs = base.rstrip(", .").split(", ")
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["value", "value", "drop", "dup", "extra", "swap", "bare"]))
        i = draw(st.integers(0, max(len(segs) - 1, 0)))
        if op == "value" and segs:
            k, _, _ = segs[i].partition(": ")
            segs[i] = f"{k}: {draw(VALUES)}"
        elif op == "drop" and segs:
            segs.pop(i)
        elif op == "dup" and segs:
            segs.insert(i, segs[i])
        elif op == "extra":
            segs.insert(i, f"{draw(KEYS)}: {draw(VALUES)}")
        elif op == "swap" and len(segs) > 1:
            j = draw(st.integers(0, len(segs) - 1))
            segs[i], segs[j] = segs[j], segs[i]
        elif op == "bare":
            segs.insert(i, draw(VALUES))
    if draw(st.booleans()):  # same digit count (the prefix timestamp keeps its shape)
        head = "".join(draw(st.sampled_from("0123456789")) if c.isdigit() else c for c in head)
    elif draw(st.booleans()):  # any digit count (ranks, iteration numbers, pids; or a broken timestamp)
        runs = re.split(r"(\d+)", head)
        head = "".join(
            draw(st.sampled_from(["0", "12", "007", "9" * 320])) if r.isdigit() else r for r in runs
        )
    return ", ".join([head, *segs]) + draw(SUFFIXES)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_variants_parse_the_same(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(STAT_LINES))
    lines = [base, *data.draw(st.lists(variant(base), min_size=1, max_size=5)), base]
    pack = data.draw(st.sampled_from(PACKS))
    feed_both(pack, lines)


# -- the batched Series against one-by-one adds ----------------------------------------------------------------


class RefSeries:
    """Series as it was before batching: one sample at a time; the reservoir by Algorithm L step by
    step (scalar arithmetic), drawing its random numbers in Series' order: PLAN gap draws, PLAN
    shrink draws, PLAN slots, again each time PLAN replacements were used up."""

    def __init__(self, reservoir: int, recent: int, seed: int = 0) -> None:
        self.n, self.total, self.lo, self.hi, self.last = 0, 0.0, float("inf"), float("-inf"), None
        self.res: array[float] = array("d")
        self.cap, self.rng = reservoir, random.Random(seed)
        self.recent: deque[float] = deque(maxlen=recent)
        self.w, self.next_at = 0.0, 0
        self.draws: list[tuple[float, float, int]] = []

    def _step(self) -> None:
        if not self.draws:
            rnd = self.rng.random
            gaps = [1.0 - rnd() for _ in range(PLAN)]
            shrink = [1.0 - rnd() for _ in range(PLAN)]
            if self.cap & (self.cap - 1) == 0:
                slots = [self.rng.getrandbits(self.cap.bit_length() - 1) for _ in range(PLAN)]
            else:
                slots = [self.rng.randrange(self.cap) for _ in range(PLAN)]
            self.draws = list(zip(gaps, shrink, slots, strict=True))[::-1]
        gap, shrink, self.slot = self.draws.pop()
        w = min(max(self.w, 1e-300), 1.0 - 2.0**-53)
        self.next_at += int(math.log(gap) / math.log1p(-w)) + 1
        self.w = self.w * shrink ** (1.0 / self.cap)

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        if value < self.lo:
            self.lo = value
        if value > self.hi:
            self.hi = value
        self.last = value
        self.recent.append(value)
        if len(self.res) < self.cap:
            self.res.append(value)
            if len(self.res) == self.cap:
                self.w = (1.0 - self.rng.random()) ** (1.0 / self.cap)
                self.next_at = self.cap
                self._step()
        elif self.n == self.next_at:
            self.res[self.slot] = value
            self._step()


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=300),
    cap=st.integers(1, 40),
    cuts=st.lists(st.integers(0, 300), max_size=6),
)
def test_series_batches_equal_one_by_one(values: list[float], cap: int, cuts: list[int]) -> None:
    ref, s = RefSeries(cap, 16, seed=3), Series(cap, 16, seed=3)
    for i, v in enumerate(values):
        ref.add(v)
        s.add(v)
        if i in cuts:  # reads in between flush part of the pending samples
            assert s.n == ref.n
    got = (s.n, s.total, s.lo, s.hi, s.last, list(s.recent), list(s._res))
    want = (ref.n, ref.total, ref.lo, ref.hi, ref.last, list(ref.recent), list(ref.res))
    assert repr(got) == repr(want)  # repr: NaN == NaN, and -0.0 differs from 0.0


def test_series_long_run_equals_one_by_one() -> None:
    """Past the reservoir, over FLUSH-sized batches (the random draws must line up)."""
    rng = random.Random(5)
    values = [rng.random() * 100 for _ in range(30_000)]
    ref, s = RefSeries(1000, 240, seed=1), Series(1000, 240, seed=1)
    for v in values:
        ref.add(v)
    s.extend(values[:7])
    for v in values[7:]:
        s.add(v)
    assert list(s._res) == list(ref.res) and s.total == ref.total and s.n == ref.n
    assert s.stats().p50 == Series.stats(s).p50 and not math.isnan(s.stats().p90 or 0.0)


class RefStore:
    """MetricStore.add_match as it was before rows and batches: every value at once, in order."""

    def __init__(self, reservoir: int, recent: int) -> None:
        self.all: dict[str, RefSeries] = {}
        self.post: dict[str, RefSeries] = {}
        self.cap, self.recent = reservoir, recent

    def _series(self, table: dict[str, RefSeries], name: str) -> RefSeries:
        if name not in table:
            table[name] = RefSeries(self.cap, self.recent, seed=len(table))
        return table[name]

    def add(self, name: str, value: Any, warmup: bool) -> None:
        if isinstance(value, list):
            for i, v in enumerate(value):
                self.add(f"{name}[{i}]", v, warmup)
            return
        self._series(self.all, name).add(value)
        if not warmup:
            self._series(self.post, name).add(value)


def _state(s: Any) -> str:
    res = s._res if isinstance(s, Series) else s.res
    return repr((s.n, s.total, s.lo, s.hi, s.last, list(s.recent), list(res)))


METRIC_VALUES = st.one_of(
    st.floats(-5, 5), st.integers(0, 3), st.lists(st.floats(0, 1), min_size=1, max_size=3)
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(["a", "b", "c", "ppa"]), METRIC_VALUES, max_size=4), st.booleans()
        ),
        max_size=60,
    ),
    reads=st.lists(st.integers(0, 60), max_size=4),
    repeat=st.integers(1, 80),
)
def test_store_rows_equal_one_by_one(
    rows: list[tuple[dict[str, Any], bool]], reads: list[int], repeat: int
) -> None:
    """Rows of metrics folded by runs give the series one-by-one adds give: values, order, seeds."""
    ref, store = RefStore(8, 5), MetricStore(reservoir=8, recent=5)
    for i, (metrics, warmup) in enumerate(rows * (repeat if len(rows) < 3 else 1)):
        m = LogMatch.fast(line="x", event="decode_batch", metrics=metrics, warmup=warmup)
        store.add_match(m)
        for name, value in metrics.items():
            ref.add(name, value, warmup)
        if i in reads:
            store.names()
    assert store.names() == list(ref.all)
    assert list(store._post) == list(ref.post)
    for mine, theirs in ((store._all, ref.all), (store._post, ref.post)):
        assert {k: _state(v) for k, v in mine.items()} == {k: _state(v) for k, v in theirs.items()}


def test_store_long_run_over_flush_equals_one_by_one() -> None:
    rng = random.Random(2)
    ref, store = RefStore(100, 20), MetricStore(reservoir=100, recent=20)
    for i in range(10_000):
        metrics: dict[str, Any] = {"accept_len": rng.random() * 4, "running_req": float(i % 7)}
        if i % 1000 == 999:
            metrics = {"ppa": [0.5, rng.random()], "x": 1.0}
        warmup = i < 1500
        store.add_match(LogMatch.fast(line="x", event="decode_batch", metrics=metrics, warmup=warmup))
        for name, value in metrics.items():
            ref.add(name, value, warmup)
    assert store.names() == list(ref.all)
    for mine, theirs in ((store._all, ref.all), (store._post, ref.post)):
        assert {k: _state(v) for k, v in mine.items()} == {k: _state(v) for k, v in theirs.items()}
