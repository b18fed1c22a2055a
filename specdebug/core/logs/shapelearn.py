"""Learning a Shape from one batch/stat line the general parser just parsed.

Why a separate module: the rules that make a template safe live here, next to each other, and
they mirror `parse_kv_tail`, `parse_value` and `Pack.parse_message` step by step:
- prefix: the line's own text with each ASCII digit free (split_prefix treats every digit alike,
  so a line differing only in digits splits at the same place); the timestamp is a group;
- head: must start the message; its literal text is kept, its digit groups are free;
- tail: split on ", " like parse_kv_tail; a key is literal, a value is matched by its class; a
  value that is any text is matched as "no ', ' inside", so the template splits where the general
  path splits; the stripped ending (",", ".", spaces) is literal, and the last value may not end in
  a character that stripping would eat;
- a head other than the pack's first: no free-text values (one could hold an earlier head, which
  the general path would pick);
- metrics: decided from the classes (a number is a number on every line of the shape); a metric
  fed by free text or by a key present twice makes the line unlearnable.
The template is then run on the line itself and must give exactly the general result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from specdebug.core.logs.shapes import MetricStep, Shape, getter, grabber, prefix_ts_span
from specdebug.core.secrets import may_hold_secrets
from specdebug.engines.pack import Pack
from specdebug.engines.primitives import Prefix, norm_key, parse_value

_INT = re.compile(r"[0-9]{1,300}")
_FLOAT = re.compile(r"[0-9]{1,300}\.[0-9]{1,300}")
_UNIT = re.compile(
    r"(?P<num>[0-9]{1,300}(?P<dec>\.[0-9]{1,300})?)(?P<sep> *)(?P<unit>[A-Za-z%/]+(?: [A-Za-z%/]+)*)"
)
_BOOLS = {"True": True, "False": False}
_ANY_TEXT = r"(?:[^,]|,(?! ))*"  # a value never holds ", " (the tail is split there)
_NOT_STRIPPED = r"(?<![\s,.])"


def _any_value(text: str) -> Any:
    return parse_value(text)[0]


def _digits_free(text: str) -> str:
    return "".join("[0-9]" if "0" <= c <= "9" else re.escape(c) for c in text)


class _Builder:
    """The template as it grows: regex source, field conversions, literal text (for the prefilter
    check), and per field key: its group numbers, class and unit."""

    def __init__(self) -> None:
        self.src: list[str] = []
        self.groups = 0
        self.literal: list[str] = []
        self.keys: list[str] = []  # field order
        self.conv: dict[str, Callable[[str], Any]] = {}  # key -> converter of its (inner) group
        self.inner: dict[str, int] = {}  # key -> group holding the number/text to convert
        self.outer: dict[str, int] = {}  # key -> group spanning the whole value (its span)
        self.rest: dict[str, list[int]] = {}  # list values: groups of the continuation items
        self.num: dict[str, bool] = {}
        self.units: dict[str, str] = {}

    def lit(self, text: str) -> None:
        self.src.append(re.escape(text))
        self.literal.append(text)

    def group(self, pattern: str, literal: str | None = None) -> int:
        """A group; `literal`: the exact text it always holds (a head word), kept for the check."""
        self.groups += 1
        self.src.append(f"({pattern})")
        self.literal.append("\0" if literal is None else literal)  # literal runs are cut at groups
        return self.groups

    def value(self, key: str, text: str, last: bool) -> None:
        """A `key: value` value by class (the key text itself was added by the caller)."""
        self.keys.append(key)
        um = _UNIT.fullmatch(text)
        if _INT.fullmatch(text):
            g = self.group(_INT.pattern)
            self.conv[key], self.num[key] = int, True
        elif _FLOAT.fullmatch(text):
            g = self.group(_FLOAT.pattern)
            self.conv[key], self.num[key] = float, True
        elif text in _BOOLS:
            g = self.group("True|False")
            self.conv[key], self.num[key] = _BOOLS.__getitem__, False
        elif um is not None:
            num = _FLOAT if um.group("dec") else _INT
            self.groups += 2
            g = self.groups - 1
            self.src.append(f"(({num.pattern}){re.escape(um.group('sep') + um.group('unit'))})")
            self.literal.append("\0")
            self.inner[key], self.outer[key] = g + 1, g
            self.conv[key] = float if um.group("dec") else int
            self.num[key], self.units[key] = True, um.group("unit")
            return
        else:
            g = self.group(_ANY_TEXT)
            if last:
                self.src.append(_NOT_STRIPPED)
            self.conv[key], self.num[key] = _any_value, False
        self.inner[key] = self.outer[key] = g


def _tail(b: _Builder, tail: str) -> bool:
    """The `k: v, k: v` part (parse_kv_tail's rules); False when it is not regular enough."""
    end = len(tail.rstrip())
    while end and tail[end - 1] in ",.":
        end -= 1
        while end and tail[end - 1] == " ":
            end -= 1
    segs = tail[:end].split(", ")
    last_key: str | None = None
    for i, seg in enumerate(segs):
        if i:
            b.lit(", ")
        if not seg.strip():
            return False
        k, sep, v = seg.partition(": ")
        is_last = i == len(segs) - 1
        if not sep:  # continuation of a list value: plain numbers only
            if last_key is None or not (_INT.fullmatch(seg) or _FLOAT.fullmatch(seg)):
                return False
            pattern = _INT.pattern if _INT.fullmatch(seg) else _FLOAT.pattern
            b.rest.setdefault(last_key, []).append(b.group(pattern))
            b.num[last_key] = False
            continue
        key = norm_key(k)
        if not key or key in b.conv:
            return False
        b.lit(k + ": ")
        b.value(key, v, is_last)
        last_key = key
    b.lit(tail[end:])
    return True


def _metric_steps(pack: Pack, event: str, b: _Builder) -> list[MetricStep] | None:
    """Pack.parse_message's metric rules, decided on the classes; None when a value's class leaves
    the outcome to the text (free text feeding a metric)."""
    steps: list[MetricStep] = []
    names: set[str] = set()
    for name, keys in pack.max_of.get(event, {}).items():
        if any(k in b.conv and b.conv[k] is _any_value for k in keys):
            return None
        present = tuple(k for k in keys if b.num.get(k))
        if len(present) > 1:
            steps.append(("max", name, present, tuple(b.outer[k] for k in present)))
            names.add(name)
    for key, name in pack.metric_map.get(event, {}).items():
        if name in names or key not in b.conv:
            continue
        conv = b.conv[key]
        if conv is _any_value:
            return None
        if key in b.rest or name in pack.list_metrics:
            if conv not in (int, float):  # a bool or head text leads the list: never all numbers
                continue
            groups = (b.outer[key], *b.rest.get(key, ()))
            steps.append(("list", name, (key,), groups))
        elif b.num[key]:
            pct = key in pack.percent_fields and b.units.get(key) != "%"
            steps.append(("pct" if pct else "num", name, (key,), (b.outer[key],)))
        else:
            continue
        names.add(name)
    return steps


def _first_head(pack: Pack, msg: str) -> tuple[str, re.Pattern[str], re.Match[str]] | None:
    """The head Pack.parse_message would pick: the first in order found anywhere in the message."""
    for ev, head in pack.heads:
        hm = head.search(msg)
        if hm is not None:
            return ev, head, hm
    return None


def learn(
    pack: Pack,
    line: str,
    prefix: Prefix,
    literals: Sequence[str],
    expect: tuple[str, dict[str, Any], dict[str, Any], list[tuple[int, int, str]]],
) -> Shape | None:
    """A Shape for `line` (cleaned, with its general-path prefix and (event, fields, metrics, spans)),
    or None. `literals`: the parser's plain-text prefilter; a shape must contain one of them in its
    literal text, so every line it matches would pass the prefilter too."""
    msg = line[prefix.start :]
    event = expect[0]
    found = _first_head(pack, msg)
    if found is None or found[0] != event or found[2].start() != 0:
        return None
    _, head, hm = found
    b = _Builder()
    ts_span = prefix_ts_span(prefix)
    ts_group = 0
    if ts_span is not None:
        b.src.append(_digits_free(line[: ts_span[0]]))
        ts_group = b.group(_digits_free(line[ts_span[0] : ts_span[1]]))
        b.src.append(_digits_free(line[ts_span[1] : prefix.start]))
    else:
        b.src.append(_digits_free(line[: prefix.start]))
    b.literal.append("\0")
    head_keys: list[tuple[str, int, Callable[[str], Any]]] = []
    pos = 0
    for name, _ in sorted(head.groupindex.items(), key=lambda kv: hm.start(kv[1])):
        text = hm.group(name)
        if text is None:
            continue
        b.lit(msg[pos : hm.start(name)])
        ascii_digits = bool(_INT.fullmatch(text))
        g = b.group(_INT.pattern) if ascii_digits else b.group(re.escape(text), text)
        head_keys.append((name, g, int if ascii_digits else str))
        pos = hm.end(name)
    b.lit(msg[pos : hm.end()])
    if not _tail(b, msg[hm.end() :]):
        return None
    head_keys.sort(key=lambda h: head.groupindex[h[0]])  # groupdict order
    for name, g, conv in head_keys:  # head fields come after the tail's (parse_message's order)
        if name in b.conv:
            return None
        b.keys.append(name)
        b.conv[name], b.num[name] = conv, conv is int
        b.inner[name] = b.outer[name] = g
    if event != pack.heads[0][0] and _any_value in b.conv.values():
        return None  # free text could hold an earlier head ("Decode batch. " in a Prefill line's value)
    steps = _metric_steps(pack, event, b)
    chunks = "".join(b.literal).split("\0")
    if steps is None or not any(lit in chunk for chunk in chunks for lit in literals):
        return None
    shape = _shape(b, event, ts_group, steps)
    m = shape.rx.match(line)
    if m is None:
        return None
    fields, metrics, spans, ts = shape.extract(m)
    if not same((event, fields, metrics, spans, ts), (*expect, prefix.ts)):
        return None
    return replace(shape, block_safe=_block_safe(shape, b, line, m))


def _block_safe(shape: Shape, b: _Builder, line: str, m: re.Match[str]) -> bool:
    """Whether every line `shape` matches is one the scrubber leaves as it is (no trigger of its
    shape rules in it), so a block of such lines needs no scrubbing line by line (Analyzer.feed_block).

    Why the learned line decides for all: a shape without free text matches lines that differ from
    it only in digit runs (the prefix's digits, integers, decimals) and in its True/False values.
    No trigger holds a digit or a dot, so the text between digits is the same in every such line;
    a True/False between non-letters cannot join letters into one either ("earer", "asic")."""
    if not shape.plain or _any_value in b.conv.values() or may_hold_secrets(line):
        return False
    for key, conv in b.conv.items():
        if conv is _BOOLS.__getitem__:
            s, e = m.span(b.inner[key])
            if (s and line[s - 1].isalpha()) or (e < len(line) and line[e].isalpha()):
                return False
    return True


def _shape(b: _Builder, event: str, ts_group: int, steps: list[MetricStep]) -> Shape:
    grabbed = [b.inner[k] for k in b.keys] + ([ts_group] if ts_group else [])
    metric_keys = [keys[0] for _, _, keys, _ in steps]
    return Shape(
        rx=re.compile("".join(b.src) + r"\Z"),
        event=event,
        keys=tuple(b.keys),
        convs=tuple(b.conv[k] for k in b.keys),
        grab=grabber(grabbed),
        has_ts=bool(ts_group),
        lists=tuple((k, tuple(b.rest[k])) for k in b.keys if k in b.rest),
        metric_steps=tuple(steps),
        plain=all(kind == "num" for kind, *_ in steps),
        metric_names=tuple(name for _, name, _, _ in steps),
        metric_get=getter([keys[0] for _, _, keys, _ in steps]),
        span_get=getter([groups[0] for *_, groups in steps]),
        span_names=tuple((name,) for _, name, _, _ in steps),
        metric_texts=grabber([b.inner[k] for k in metric_keys]),
        metric_groups=tuple(b.inner[k] for k in metric_keys),
        metric_convs=tuple(b.conv[k] for k in metric_keys),
    )


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down and dicts in the same order (1 == 1.0 == True
    in Python, but not in JSON output)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return bool(b != b)
    return bool(a == b)
