"""The pack engine: a `Pack` is plain data (heads, milestones, ready and error patterns, metric
maps) plus the pure helpers that apply it to a line (phase_of, is_ready, error_kind, parse_message).

Separate from the packs so adding a server (a TensorRT-LLM pack, say) is a new data module plus its
engine module (engines/base.py), never a change here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specdebug.engines.primitives import (
    ANSI_RE,
    Parsed,
    as_float,
    is_num,
    norm_key,
    parse_kv_tail,
    parse_value,
    split_prefix,
)

GENERIC_EXC = r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception)(?::|$)"
_TRACE_CONT = re.compile(r"^(?:\s|Traceback \(most recent call last\)|File \")")
_MILESTONE_NUM_RE = re.compile(
    r"(#?[A-Za-z_][\w-]*(?: [A-Za-z_][\w-]*)*)\s*[=:] ?(-?\d+(?:\.\d+)?)(?=[\s,.)]|$)"
)


@dataclass(frozen=True)
class Pack:
    """One server's log vocabulary. Everything a caller may reuse is data or a pure method."""

    name: str
    heads: tuple[tuple[str, re.Pattern[str]], ...]  # (event, regex whose end is where the k/v tail starts)
    metric_map: dict[str, dict[str, str]]  # event -> {field key: metric name} (first present field wins)
    milestones: tuple[tuple[str, re.Pattern[str]], ...]  # (phase, regex) in startup order
    errors: tuple[tuple[str, re.Pattern[str]], ...]  # (kind, regex), specific before generic
    ready_re: re.Pattern[str]
    warmup_done_re: re.Pattern[str]  # end of warmup (includes the ready line)
    restart_re: re.Pattern[str]  # a new server start in the same file: warmup begins again
    # plain literals (no regex metacharacters) selecting a superset of the lines the pack reports; the
    # on-box agent finds literals with bytes.find, far faster than one big regex alternation
    prefilter: tuple[str, ...]
    percent_fields: frozenset[str] = frozenset()  # fields printed as fractions in old versions -> x100
    error_levels: frozenset[str] = frozenset()  # logger levels that make a line an error
    list_metrics: frozenset[str] = frozenset()  # metrics that are always lists (one value per position)
    # event -> {metric: field keys}: when two or more are present the metric is their max (SGLang's
    # hybrid sliding-window models: token usage = max of the full and the SWA pool)
    max_of: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    # error lines that only wrap another one ("EngineCore failed to start", "See root cause above"):
    # a failure's reason is the first error line that is not one of these (core.control.cause)
    wrappers: re.Pattern[str] | None = None
    # (metric, regex with a `value` group): figures read off any line the pack sees, whatever else it is
    # (the user-instrumentation timings, TIMINGS_COMMON); a line with nothing else is event "timing"
    timings: tuple[tuple[str, re.Pattern[str]], ...] = ()

    def is_wrapper(self, msg: str) -> bool:
        """Does this message only announce or wrap an error told elsewhere (or a shutdown after it)?"""
        return bool(WRAPPER_COMMON.search(msg) or (self.wrappers is not None and self.wrappers.search(msg)))

    def message(self, line: str) -> str:
        line = ANSI_RE.sub("", line) if "\x1b" in line else line
        return line[split_prefix(line).start :]

    def phase_of(self, line: str) -> str | None:
        """Startup phase a milestone line enters (e.g. 'load_weights', 'cuda_graph', 'ready'), else None."""
        msg = self.message(line)
        for phase, rx in self.milestones:
            if rx.search(msg):
                return phase
        return None

    def error_kind(self, line: str) -> str | None:
        """Kind of error ('oom', 'nccl', 'watchdog', 'exception', ...) or None for a normal line."""
        clean = ANSI_RE.sub("", line) if "\x1b" in line else line
        prefix = split_prefix(clean)
        return self.message_error_kind(clean[prefix.start :], prefix.level)

    def message_error_kind(self, msg: str, level: str | None) -> str | None:
        """error_kind of a line's message after its prefix (the prefix's log level given apart)."""
        if _TRACE_CONT.match(msg):
            return None
        for kind, rx in self.errors:
            if rx.search(msg):
                return kind
        if level in self.error_levels:
            return "error_log"
        return None

    def is_error(self, line: str) -> bool:
        return self.error_kind(line) is not None

    def is_ready(self, line: str) -> bool:
        return bool(self.ready_re.search(line))

    def is_warmup_done(self, line: str) -> bool:
        return bool(self.warmup_done_re.search(line))

    def parse_message(self, msg: str, base: int = 0, level: str | None = None) -> Parsed | None:
        """Parse one message (prefix already removed; `base` = its position in the line)."""
        parsed = self._parse_message(msg, base, level)
        if self.timings and _may_time(msg):
            parsed = self._add_timings(parsed, msg, base)
        return parsed

    def _add_timings(self, parsed: Parsed | None, msg: str, base: int) -> Parsed | None:
        """The timing figures on the line, added to what else it is (never replacing a figure)."""
        for name, rx in self.timings:
            m = rx.search(msg)
            if m is None or (parsed is not None and name in parsed.metrics):
                continue
            try:
                number = as_float(float(m.group("value")))
            except ValueError:  # `1.2.3`: digits and dots, not a number
                continue
            if number is None:
                continue
            if parsed is None:
                parsed = Parsed("timing")
            parsed.metrics[name] = number
            parsed.spans.append((base + m.start("value"), base + m.end("value"), name))
        return parsed

    def _parse_message(self, msg: str, base: int, level: str | None) -> Parsed | None:
        for event, rx in self.heads:
            m = rx.search(msg)
            if not m:
                continue
            fields, units, spans = parse_kv_tail(msg[m.end() :], base + m.end())
            for k, v in m.groupdict().items():
                if v is not None:
                    fields[k] = int(v) if v.isdigit() else v
                    spans[k] = (base + m.start(k), base + m.end(k))
            metrics: dict[str, float | list[float]] = {}
            out_spans: list[tuple[int, int, str]] = []
            for name, keys in self.max_of.get(event, {}).items():
                present = [k for k in keys if is_num(fields.get(k))]
                if len(present) > 1:
                    top = max(present, key=lambda k: fields[k])
                    number = as_float(fields[top])
                    if number is not None:
                        metrics[name] = number
                        out_spans.append((*spans[top], name))
            for key, name in self.metric_map.get(event, {}).items():
                if name in metrics or key not in fields:
                    continue
                value = fields[key]
                if isinstance(value, list) or name in self.list_metrics:
                    values = value if isinstance(value, list) else [value]
                    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in values):
                        continue
                    floats = [f for f in map(as_float, values) if f is not None]
                    if len(floats) != len(values):
                        continue
                    metrics[name] = floats
                elif isinstance(value, int | float) and not isinstance(value, bool):
                    number = as_float(value)
                    if number is None:
                        continue
                    if key in self.percent_fields and units.get(key) != "%":
                        number = round(number * 100.0, 9)
                    metrics[name] = number
                else:
                    continue
                s, e = spans[key]
                out_spans.append((s, e, name))
            return Parsed(event, fields, metrics, out_spans)
        if self.ready_re.search(msg):
            return Parsed("ready", phase="ready")
        if self.warmup_done_re.search(msg):
            return Parsed("warmup_done", phase=self._phase(msg))
        kind = self.message_error_kind(msg, level)
        if kind:
            return Parsed("error", {"error_kind": kind})
        phase = self._phase(msg)
        if phase:
            fields = {}
            for mm in _MILESTONE_NUM_RE.finditer(msg):
                key = norm_key(mm.group(1))
                if key and key not in fields:
                    fields[key] = parse_value(mm.group(2))[0]
            fields["phase"] = phase
            return Parsed("startup", fields, phase=phase)
        return None

    def _phase(self, msg: str) -> str | None:
        for phase, rx in self.milestones:
            if rx.search(msg):
                return phase
        return None


# User instrumentation: no engine prints a per-step draft or verify time (current-sources.md: SGLang
# has no `Target verify` line), but users add one (`[EAGLE3 profile] step=10 draft: 4.01 ms, Target
# verify: 17.20 ms`, the sim's --profile-verify) and the story greps it.  Every pack reads it here, so
# bench, the verify gate, spec, scan and the Logs pane get one number from one line.  A profile
# pattern of the same name replaces it (core.logs.parser).  Case-insensitive, but the prefilter
# (TIMINGS_PREFILTER) selects only the lower, Capitalised and UPPER spellings.
TIMINGS_COMMON = (
    ("verify_ms", re.compile(r"verify[^,\n]*?[:=]\s*(?P<value>[\d.]+)\s*ms", re.IGNORECASE)),
    ("draft_ms", re.compile(r"\bdraft[^,\n]*?[:=]\s*(?P<value>[\d.]+)\s*ms", re.IGNORECASE)),
)
TIMINGS_PREFILTER = ("verify", "Verify", "VERIFY", "draft", "Draft", "DRAFT")
TIMING_NAMES = frozenset(name for name, _ in TIMINGS_COMMON)


def without_timings(parsed: Parsed, names: frozenset[str]) -> Parsed | None:
    """A reading without the timing figures `names` (a profile pattern of the same name owns them);
    None when it was only those timings."""
    if not names & parsed.metrics.keys():
        return parsed
    for name in names:
        parsed.metrics.pop(name, None)
    parsed.spans = [s for s in parsed.spans if s[2] not in names]
    return None if parsed.event == "timing" and not parsed.metrics else parsed


def _may_time(msg: str) -> bool:
    """Cheap test before the case-insensitive regexes: could the line hold a timing at all?"""
    low = msg.lower()
    return "ms" in low and ("verify" in low or "draft" in low)


ERR_COMMON = (
    ("oom", r"CUDA out of memory|OutOfMemoryError"),
    ("nccl", r"NCCL error"),
    # uvicorn's own level prefix, behind the engine's process tag: `ERROR:    [Errno 98] error while
    # attempting to bind on address (...): address already in use` (a WARNING line that merely names
    # an errno, vLLM's ulimit warning, is not one)
    ("error_log", r"^(?:ERROR|CRITICAL):\s"),
)
# what follows or wraps an error in every server's log: the traceback's own lines, uvicorn's and
# the launcher's shutdown
WRAPPER_COMMON = re.compile(
    r"Traceback \(most recent call last\)|During handling of the above exception|"
    r"The above exception was the direct cause|Application shutdown complete|"
    r"Waiting for application shutdown|Finished server process|^Shutting down"
)
