"""Turn raw log lines into LogMatch events: pack parsing, profile patterns, grep patterns, warmup tags.

One LogParser per file being read. It is stateful for two reasons only: `auto` settles on a pack
after a few lines, and warmup tagging needs to know whether the ready/warmup-done marker has
passed. Both the headless `scan`/`grep` verbs and the Logs pane feed lines through this class, so
they agree on every number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from typing import Any, Protocol

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.shapelearn import learn
from specdebug.core.logs.shapes import Shape, ShapeCache
from specdebug.core.logs.userrx import UserPattern
from specdebug.core.secrets import Scrubber
from specdebug.engines import PACKS, get_pack
from specdebug.engines.detect import PackDetector
from specdebug.engines.pack import TIMING_NAMES, Pack, without_timings
from specdebug.engines.primitives import (
    ANSI_RE,
    NCCL_ENV_RE,
    Parsed,
    as_float,
    parse_nccl_env_line,
    parse_value,
    split_prefix,
)
from specdebug.errors import SpecdebugError

_NAMED_GROUP_RE = re.compile(r"\(\?P<[A-Za-z_]\w*>")
_META = re.compile(r"[.^$*+?{}\[\]\\|()]")


_NO_FIELDS: dict[str, Any] = {}
_STAT_EVENTS = frozenset(ev for pk in PACKS.values() for ev, _ in pk.heads)


def _known_to_another(pack: Pack, msg: str) -> bool:
    """Another pack reads this message as one of its own startup milestones."""
    return any(rx.search(msg) for other in PACKS.values() if other is not pack for _, rx in other.milestones)


class PlainMatch:
    """A grep match without a pack (LogParser("none")): LogMatch's attributes at a fraction of the
    cost of a pydantic model (tens of thousands per second while following). Read-only by
    convention; `fields` may be a shared empty dict."""

    __slots__ = ("offset", "line", "fields", "lineno", "inode", "truncated")
    event = "match"
    also: tuple[str, ...] = ()
    metrics: dict[str, Any] = _NO_FIELDS
    spans: tuple[tuple[int, int, str], ...] = ()
    warmup = False
    ts = None
    phase = None

    def __init__(
        self,
        offset: int | None,
        line: str,
        fields: dict[str, Any],
        lineno: int | None = None,
        inode: int | None = None,
        truncated: int | None = None,
    ) -> None:
        self.offset, self.line, self.fields = offset, line, fields
        self.lineno, self.inode, self.truncated = lineno, inode, truncated

    def samples(self) -> list[Any]:
        return []


class PlainRun:
    """Consecutive lines of a plain grep, selected on the box, as one item: what `grep` prints as
    one block, with no match object per line (tens of thousands of lines a second). Each line is
    what `parse` would give for it (LogParser.parse_batch makes one only then): its text as a
    PlainMatch's `line`, no fields, not truncated; `raw` are the lines as read (their sizes give
    the offsets)."""

    __slots__ = ("offset", "lines", "raw", "inode")

    def __init__(self, offset: int, lines: list[str], raw: list[bytes], inode: int | None) -> None:
        self.offset, self.lines, self.raw, self.inode = offset, lines, raw, inode

    def offsets(self) -> list[int]:
        """Each line's offset in the file."""
        starts = list(accumulate(map((1).__add__, map(len, self.raw)), initial=self.offset))
        starts.pop()
        return starts


class RawLike(Protocol):
    """A followed line as parse_batch reads it (follow.RawLine)."""

    offset: int
    data: bytes
    inode: int | None
    truncated: int | None


class RunLike(Protocol):
    """A run of followed lines as parse_batch reads it (follow.RawRun)."""

    offset: int
    lines: list[bytes]
    inode: int | None


class PatternError(ValueError, SpecdebugError):
    """A user or profile pattern does not compile (message names it): a usage error."""

    exit_code = 2


def compile_patterns(patterns: Mapping[str, str]) -> dict[str, UserPattern]:
    """User patterns, each bounded in time per search (see userrx)."""
    out: dict[str, UserPattern] = {}
    for name, src in patterns.items():
        try:
            out[name] = UserPattern(name, src)
        except re.error as exc:
            raise PatternError(f"pattern {name!r} ({src!r}) does not compile: {exc}") from None
    return out


def strip_named_groups(src: str) -> str:
    """`(?P<value>x)` -> `(?:x)`: lets many patterns be OR-ed into one prefilter (group names clash)."""
    return _NAMED_GROUP_RE.sub("(?:", src)


class _AnyOf:
    """search() over several regexes when they cannot be OR-ed into one (e.g. named backreferences)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self._compiled = [re.compile(p) for p in patterns]

    def search(self, text: str) -> bool:
        return any(c.search(text) for c in self._compiled)


class _Literals:
    """search() for plain substrings, in the given order (the commonest first: a Decode batch line
    is recognised by its first `in` test, far cheaper than one regex alternation of 30 literals)."""

    def __init__(self, literals: Sequence[str]) -> None:
        self.literals = tuple(dict.fromkeys(literals))

    def search(self, text: str) -> bool | None:
        for lit in self.literals:
            if lit in text:
                return True
        return None


def combine(patterns: Sequence[str]) -> re.Pattern[str] | _AnyOf | _Literals | None:
    """One matcher for any of `patterns` (named groups dropped); None for no patterns.

    Built-in sources only: `re` has no time bound (user patterns go through UserPattern)."""
    if not patterns:
        return None
    if not any(_META.search(p) for p in patterns):
        return _Literals(patterns)
    try:
        return re.compile("|".join(f"(?:{strip_named_groups(p)})" for p in patterns))
    except re.error:
        return _AnyOf(patterns)


class LogParser:
    """Parse lines of one file.

    pack: "sglang", "vllm", "auto" (decided from the lines; until then both packs are tried), or
      "none": no pack at all (plain grep: only the user's patterns, no fields parsed beyond their
      named groups, no warmup tagging; the cheap path for following at high line rates).
    patterns: named profile patterns; a named capture `value` becomes metric NAME, other named
      captures become fields; every match counts as event NAME.
    grep: user regexes; when given, only lines matching one of them are reported (event "match"
      unless the pack recognises the line too), and their named captures become fields.
    from_start: True when the first line fed is the file's first line. Warmup tagging only starts
      "pending" then; following from the end of a running server's log assumes warmup is over.
    scrub: masks secrets in every reported line before anything sees it (default: the shape
      rules, learning values as it goes; `Scrubber.for_profile` adds the profile's known values).
    shapes: learn the layouts of batch/stat lines and parse repeats with one regex match (shapes.py;
      same results). Used when the pack is known and there are no grep or profile patterns; False
      forces the general path (tests compare the two).
    """

    def __init__(
        self,
        pack: str | Pack = "auto",
        *,
        patterns: Mapping[str, str] | None = None,
        grep: Sequence[str] = (),
        from_start: bool = True,
        scrub: Callable[[str], str] | None = None,
        shapes: bool = True,
    ) -> None:
        self.scrub = scrub if scrub is not None else Scrubber()
        self._detector: PackDetector | None = None
        self.no_pack = pack == "none"
        if isinstance(pack, Pack):
            self.pack: Pack | None = pack
        elif pack == "none":
            self.pack = None
        elif pack == "auto":
            self.pack = None
            self._detector = PackDetector()
        else:
            self.pack = get_pack(pack)
        self.patterns = compile_patterns(patterns or {})
        self.grep = list(compile_patterns({f"-e {i + 1}": p for i, p in enumerate(grep)}).values())
        self.in_warmup = from_start
        self.marker_seen = False
        self._user = [*self.grep, *self.patterns.values()]
        self._shadowed = TIMING_NAMES & self.patterns.keys()  # the user's own reading wins on every line
        self._candidate = combine(self._builtin_sources())
        # plain grep: nothing to parse but the grep patterns' named groups (none: nothing at all)
        self._plain = self.no_pack and not self.patterns and bool(self.grep)
        self._grep_groups = any(re.compile(p.pattern).groupindex for p in self.grep)
        literals = self._candidate.literals if isinstance(self._candidate, _Literals) else None
        self._literals = literals if shapes and not self._user and not self.no_pack else None
        self._shapes = ShapeCache() if self._literals and self.pack is not None else None

    @property
    def pack_name(self) -> str | None:
        if self.pack:
            return self.pack.name
        return self._detector.best() if self._detector else None

    def _builtin_sources(self) -> list[str]:
        if self.no_pack:
            return []
        packs = [self.pack] if self.pack else list(PACKS.values())
        if self.grep:
            # grep patterns select; marker lines still pass so warmup tagging stays right
            return [rx.pattern for pk in packs for rx in (pk.warmup_done_re, pk.restart_re)]
        return [src for pk in packs for src in pk.prefilter]

    def candidate_patterns(self) -> list[str]:
        """Regexes selecting every line this parser could report: the on-box prefilter."""
        out: list[str] = [p.pattern for p in self.grep]
        for src in self._builtin_sources():
            if src not in out:
                out.append(src)
        out.extend(p.pattern for p in self.patterns.values())
        return out

    def pattern_names(self) -> dict[str, str]:
        """User pattern source -> the name a report uses (profile name, or `-e N`)."""
        return {p.pattern: p.name for p in self._user}

    @property
    def cut_patterns(self) -> dict[str, str]:
        """User patterns cut off for overrunning their time bound: name -> what happened."""
        return {p.name: p.cut for p in self._user if p.cut is not None}

    def parse(
        self,
        line: str | bytes,
        offset: int | None = None,
        lineno: int | None = None,
        inode: int | None = None,
        truncated: int | None = None,
        preselected: bool = False,
    ) -> LogMatch | PlainMatch | None:
        """A LogMatch for a line this parser reports, else None. `truncated`: the full length of a
        line whose head only is given (longer lines given whole are cut here to MAX_LINE).
        `preselected`: the line was selected on the box by exactly `candidate_patterns()` (the
        follow agent's selection is exact per line), so a plain grep need not search it again."""
        if isinstance(line, bytes):
            if len(line) > MAX_LINE:
                line, truncated = line[:MAX_LINE], truncated or len(line)
            line = line.decode("utf-8", "replace")
        elif len(line) > MAX_LINE:
            line, truncated = line[:MAX_LINE], truncated or len(line.encode("utf-8", "replace"))
        line = line.rstrip("\r\n")
        if self._plain:
            return self._parse_plain(line, offset, lineno, inode, truncated, preselected)
        if self._detector is not None and self.pack is None:
            decided = self._detector.feed(line)
            if decided:
                self.pack = PACKS[decided]
                self._shapes = ShapeCache() if self._literals else None
        if "\x1b" in line:
            line = ANSI_RE.sub("", line)
        raw, line = line, self.scrub(line)
        builtin = (
            self._candidate.search(line) is not None if self._candidate is not None else not self.no_pack
        )
        shapes = self._shapes if builtin and truncated is None else None
        if shapes is not None:
            hit = shapes.match(line, offset, lineno, inode, self.in_warmup)
            if hit is not None:
                return hit
        return self._general(raw, line, builtin, offset, lineno, inode, truncated)

    def block_shapes(self) -> list[Shape] | None:
        """The shapes whose lines a caller may take in bulk (Analyzer.feed_block), or None while
        every line must come through `parse` (no pack yet, user or grep patterns, a scrubber of
        another kind). `parse` turns a line one of them matches into exactly that shape's event and
        metrics, with the current warmup flag, provided the caller checked that the block holds no
        value the scrubber knows (`Scrubber.knows_none_of`), no ESC, no CR and no overlong line."""
        if self._shapes is None or self.pack is None or type(self.scrub) is not Scrubber:
            return None
        return self._shapes.block_shapes()

    def count_block_hits(self, n: int) -> None:
        """Lines matched in bulk count as shape hits (they pay for later learning, as in `parse`)."""
        if self._shapes is not None:
            self._shapes.hits += n

    def shape_epoch(self) -> tuple[object, ...]:
        """Changes when the shapes or what the scrubber knows changed (the caller holds the shapes
        it compares against, so their ids are not reused meanwhile)."""
        shapes = self._shapes
        known = len(self.scrub.values) if isinstance(self.scrub, Scrubber) else -1
        return (id(shapes), frozenset(map(id, shapes.shapes)) if shapes else None, known)

    def takes_runs(self) -> bool:
        """Whether lines selected on the box may come as runs (follow.RawRun) to become PlainRun
        items: a plain grep without named groups, scrubbing with a Scrubber (it can say of a
        whole block that it leaves every line as it is)."""
        return self._plain and not self._grep_groups and type(self.scrub) is Scrubber

    def _plain_run(self, offset: int, raw: list[bytes], inode: int | None) -> PlainRun | None:
        """A run's lines as one PlainRun when `parse` would give each as it is (preselected, no
        groups): none over MAX_LINE, no CR (stripped) or ESC (ANSI removed), nothing the scrubber
        would change or learn from. Else None: the caller parses line by line."""
        scrub = self.scrub
        if not self.takes_runs() or not isinstance(scrub, Scrubber) or max(map(len, raw)) > MAX_LINE:
            return None
        text = b"\n".join(raw).decode("utf-8", "replace")
        if "\r" in text or "\x1b" in text or not scrub.passes(text):
            return None
        lines = text.split("\n")  # a newline is never part of a sequence the decoder replaces
        return PlainRun(offset, lines, raw, inode) if len(lines) == len(raw) else None

    def parse_batch(
        self, batch: Sequence[RawLike | RunLike | LogEvent], preselected: bool = False
    ) -> list[LogMatch | PlainMatch | PlainRun | LogEvent]:
        """`parse` over a follower's batch, in order (LogEvents pass through): the same results,
        with the repeats of known batch lines going straight to the shape cache (no per-line call
        of parse and its checks: at tens of thousands of lines a second they add up). A run of
        lines (follow.RawRun) becomes one PlainRun where `_plain_run` allows, else its lines."""
        out: list[LogMatch | PlainMatch | PlainRun | LogEvent] = []
        append, scrub, parse = out.append, self.scrub, self.parse
        lits = self._candidate if isinstance(self._candidate, _Literals) else None
        for item in batch:
            if isinstance(item, LogEvent):
                append(item)
                continue
            run_lines: list[bytes] | None = getattr(item, "lines", None)  # a follow.RawRun
            if run_lines is not None:
                run = self._plain_run(item.offset, run_lines, item.inode) if preselected else None
                if run is not None:
                    append(run)
                    continue
                at = item.offset
                for data in run_lines:
                    m = parse(data, at, None, item.inode, None, preselected)
                    at += len(data) + 1
                    if m is not None:
                        append(m)
                continue
            line_item: RawLike = item  # type: ignore[assignment]  # (not a run: a line)
            data, shapes = line_item.data, self._shapes
            if shapes is None or lits is None or line_item.truncated is not None or len(data) > MAX_LINE:
                m = parse(data, line_item.offset, None, line_item.inode, line_item.truncated, preselected)
            else:  # parse() with what `shapes` implies: a known pack, no user patterns, literal prefilter
                raw = data.decode("utf-8", "replace").rstrip("\r\n")
                if "\x1b" in raw:
                    m = parse(raw, line_item.offset, None, line_item.inode, None, preselected)
                elif not lits.search(line := scrub(raw)):
                    continue
                else:
                    m = shapes.match(line, line_item.offset, None, line_item.inode, self.in_warmup)
                    if m is None:
                        m = self._general(raw, line, True, line_item.offset, None, line_item.inode, None)
            if m is not None:
                append(m)
        return out

    def _general(
        self,
        raw: str,
        line: str,
        builtin: bool,
        offset: int | None,
        lineno: int | None,
        inode: int | None,
        truncated: int | None,
    ) -> LogMatch | PlainMatch | None:
        """parse() past the shape cache: user patterns, prefix, pack, fields, warmup markers."""
        shapes = self._shapes if builtin and truncated is None else None
        grep_m = None
        for rx in self.grep:
            # a pattern that matched only the secret still selects the line, shown masked
            grep_m = rx.search(line) or (rx.search(raw) if raw is not line else None)
            if grep_m is not None:
                break
        prof = []
        for name, rx in self.patterns.items():
            m = rx.search(line)
            if m is not None:
                prof.append((name, m))
        if not builtin and grep_m is None and not prof:
            return None
        prefix = split_prefix(line)
        msg = line[prefix.start :]
        grep_fields: dict[str, Any] | None = None
        if self.grep:
            if grep_m is None:
                if builtin:
                    self._markers(msg)
                return None
            else:
                grep_fields = {k: _num(self.scrub(v)) for k, v in grep_m.groupdict().items() if v is not None}
        run_pack = grep_m is not None if self.grep else builtin
        parsed = self._parse_pack(msg, prefix.start, prefix.level) if run_pack else None
        if parsed is not None and self._shadowed:
            parsed = without_timings(parsed, self._shadowed)
        if parsed is None and run_pack and "set by environment to" in line and NCCL_ENV_RE.search(line):
            parsed = Parsed("nccl_env", parse_nccl_env_line(line) or {})
        if parsed is not None and parsed.event not in _STAT_EVENTS:
            # before tagging, so the marker line itself is not warmup (batch/stat lines never are)
            self._markers(msg)
        elif parsed is not None and shapes is not None and self.pack is not None and shapes.wants():
            expect = (parsed.event, parsed.fields, parsed.metrics, parsed.spans)
            shapes.add(learn(self.pack, line, prefix, self._literals or (), expect))
        events: list[str] = [parsed.event] if parsed else []
        # a Parsed is made fresh for each line: its containers become the match's own
        fields = parsed.fields if parsed else {}
        metrics = parsed.metrics if parsed else {}
        spans = parsed.spans if parsed else []
        for name, m in prof:
            events.append(name)
            gd = m.groupdict()
            for k, v in gd.items():
                if v is None:
                    continue
                if k == "value":
                    num = _num(v)
                    number = as_float(num) if isinstance(num, int | float) else None
                    if number is not None:
                        metrics[name] = number
                        spans.append((m.start("value"), m.end("value"), name))
                else:
                    fields[k] = _num(v)
        if grep_fields is not None:
            fields.update(grep_fields)
            if not events:
                events.append("match")
        if not events:
            return None
        extra = {"truncated": truncated} if truncated is not None else {}
        return LogMatch.fast(
            offset=offset,
            lineno=lineno,
            line=line,
            event=events[0],
            also=events[1:],
            fields=fields,
            metrics=metrics,
            spans=spans,
            warmup=self.in_warmup,
            ts=prefix.ts,
            phase=parsed.phase if parsed else None,
            inode=inode,
            **extra,
        )

    def _parse_plain(
        self,
        line: str,
        offset: int | None,
        lineno: int | None,
        inode: int | None,
        truncated: int | None,
        preselected: bool,
    ) -> PlainMatch | None:
        if "\x1b" in line:
            line = ANSI_RE.sub("", line)
        raw, line = line, self.scrub(line)
        fields: dict[str, Any] = _NO_FIELDS
        if not preselected or self._grep_groups:
            for rx in self.grep:
                # a pattern that matched only the secret still selects the line, shown masked
                m = rx.search(line) or (rx.search(raw) if raw is not line else None)
                if m is not None:
                    fields = {k: _num(self.scrub(v)) for k, v in m.groupdict().items() if v is not None}
                    break
            else:
                if not preselected:  # (selected on the box: trust it, e.g. a pattern cut off here)
                    return None
        return PlainMatch(offset, line, fields, lineno, inode, truncated)

    def _markers(self, msg: str) -> None:
        """Warmup bookkeeping: a server (re)start opens warmup, a ready/warmup-done line closes it."""
        if self.no_pack:
            return
        packs = [self.pack] if self.pack else list(PACKS.values())
        for pk in packs:
            if pk.restart_re.search(msg):
                self.in_warmup = True
                return
            # undecided: a warmup-done line another pack also knows (a uvicorn banner every engine
            # prints, before its own warmup) proves nothing yet
            if pk.warmup_done_re.search(msg) and (self.pack or not _known_to_another(pk, msg)):
                self.in_warmup = False
                self.marker_seen = True
                return

    def _parse_pack(self, msg: str, base: int, level: str | None) -> Parsed | None:
        if self.no_pack:
            return None
        if self.pack is not None:
            return self.pack.parse_message(msg, base, level)
        # undecided: batch/stat lines are unique to one pack, so the first that parses wins
        for pk in PACKS.values():
            parsed = pk.parse_message(msg, base, level)
            if parsed is not None:
                return parsed
        return None


def _num(text: str) -> Any:
    value, _ = parse_value(text)
    return value if not isinstance(value, bool) else text
