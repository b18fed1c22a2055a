"""Line primitives shared by every pattern pack: prefixes (SGLang, vLLM, wrappers, ANSI), numbers
with units, `key: value` tails, NCCL env lines.

Pure string work with no knowledge of any one server's lines; a new pack builds on these.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# docker compose "svc  | " and Ray / vLLM process tags "(Worker_TP0 pid=12) " (possibly nested)
WRAPPER_RE = re.compile(r"^(?:[\w.\-]+\s+\|\s)?(?:\([^()]*pid=\d+\)\s+)*")
# SGLang: "[2025-10-22 10:27:57 DP0 TP0] " ; very old "[gpu_id=0] "
SGLANG_PREFIX_RE = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z]+\d+)*)\] |^\[gpu_id=(?P<gpu>\d+)\] "
)
# SGLang dictConfig: "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] "
SGLANG_DICT_PREFIX_RE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?P<level>[A-Z]+) \d+ \[(?P<ranks>(?:[A-Z]+\d+ )*)[^\]\s]+:\d+\] "
)
# vLLM: "INFO 05-04 01:06:43 [metrics.py:101] " ; 2024: "INFO 11-03 15:47:45 model_runner.py:1671] "
VLLM_PREFIX_RE = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?[^\]\s]+:\d+\] "
)
NCCL_ENV_RE = re.compile(
    r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<rank>\d+)\] NCCL INFO "
    r"(?P<name>[A-Z][A-Z0-9_]*) set by environment to (?P<value>.*?)\s*$"
)
NUM_RE = re.compile(
    r"^(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)\s*(?P<unit>\S.*)?$"
)


@dataclass
class Parsed:
    """What a pack made of one message (positions relative to the cleaned line)."""

    event: str
    fields: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float | list[float]] = field(default_factory=dict)
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    phase: str | None = None
    also: list[str] = field(default_factory=list)


@lru_cache(maxsize=1024)
def norm_key(key: str) -> str:
    """'#running-req' -> running_req, 'gen throughput (token/s)' -> gen_throughput."""
    key = re.sub(r"\([^)]*\)", "", key).strip().lstrip("#").lower()
    return re.sub(r"[^a-z0-9]+", "_", key).strip("_")


def parse_value(text: str) -> tuple[Any, str | None]:
    """'41.10 tokens/s' -> (41.1, 'tokens/s'); '34.2%' -> (34.2, '%'); 'True' -> (True, None).

    NaN (vLLM prints it when nothing was drafted) becomes None so JSON stays valid."""
    text = text.strip()
    # fast paths: most values are plain integers or decimals (isdecimal, not isdigit: int("²") raises)
    if text.isdecimal():
        return int(text), None
    if text[:1].isdecimal() and text.replace(".", "", 1).isdecimal():
        return float(text), None
    if text in ("True", "False"):
        return text == "True", None
    m = NUM_RE.match(text)
    if not m:
        return text, None
    num = m.group("num")
    value: Any = float(num)
    if math.isnan(value) or math.isinf(value):
        value = None
    elif re.fullmatch(r"[-+]?\d+", num):
        value = int(num)
    return value, m.group("unit")


def as_float(value: float) -> float | None:
    """float(value), or None for an integer too large for a float (a garbled log line must not
    stop a scan with OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        return None


def parse_kv_tail(
    tail: str, base: int = 0
) -> tuple[dict[str, Any], dict[str, str], dict[str, tuple[int, int]]]:
    """Split 'k: v, k: v, ...' into (fields, units, value spans).

    A segment without ': ' continues the previous value as a list (vLLM's per-position rates
    '0.700, 0.450, 0.250'). Trailing ', ' (SGLang 0.5.x) and a final '.' (vLLM V0) are ignored."""
    fields: dict[str, Any] = {}
    units: dict[str, str] = {}
    spans: dict[str, tuple[int, int]] = {}
    end = len(tail.rstrip())
    while end and tail[end - 1] in ",.":
        end -= 1
        while end and tail[end - 1] == " ":
            end -= 1
    tail = tail[:end]
    last: str | None = None
    pos = 0
    for seg in tail.split(", "):
        start = pos
        pos += len(seg) + 2
        if not seg.strip():
            continue
        k, sep, v = seg.partition(": ")
        if not sep:
            if last is not None:
                value, _ = parse_value(seg)
                prev = fields[last]
                number = (
                    as_float(value)
                    if isinstance(value, int | float) and not isinstance(value, bool)
                    else None
                )
                if number is not None:
                    prev = prev if isinstance(prev, list) else [prev]
                    prev.append(number)
                    fields[last] = prev
                    s0 = spans[last][0]
                    spans[last] = (s0, base + start + len(seg))
            continue
        key = norm_key(k)
        if not key:
            continue
        value, unit = parse_value(v)
        fields[key] = value
        if unit:
            units[key] = unit
        spans[key] = (base + start + len(k) + 2, base + start + len(seg))
        last = key
    return fields, units, spans


def parse_nccl_env_line(line: str) -> dict[str, Any] | None:
    """`host:pid:tid [dev] NCCL INFO NAME set by environment to VALUE[.]` -> fields, else None.

    NCCL prints integer params as '%lld.' (trailing dot) and strings as '%s' (no dot)."""
    if "set by environment to" not in line:
        return None
    m = NCCL_ENV_RE.search(ANSI_RE.sub("", line.rstrip("\r\n")))
    if not m:
        return None
    value = m.group("value")
    if re.fullmatch(r"-?\d+\.", value):
        value = value[:-1]
    return {
        "host": m.group("host"),
        "pid": int(m.group("pid")),
        "tid": int(m.group("tid")),
        "rank": int(m.group("rank")),
        "name": m.group("name"),
        "value": value,
    }


@dataclass
class Prefix:
    """What the line prefix told us; `start` is where the message begins in the cleaned line."""

    start: int = 0
    ts: str | None = None
    ranks: str | None = None
    level: str | None = None
    ts_at: int = -1  # where `ts` starts in the line (-1: no ts); the shape cache learns from it


def split_prefix(line: str) -> Prefix:
    """Find the message start past wrappers (docker, Ray, vLLM process tags) and the logger prefix."""
    p = Prefix()
    m = WRAPPER_RE.match(line)
    start = m.end() if m else 0
    rest = line[start:]
    for rx in (SGLANG_PREFIX_RE, SGLANG_DICT_PREFIX_RE, VLLM_PREFIX_RE):
        pm = rx.match(rest)
        if pm:
            gd = pm.groupdict()
            p.ts = gd.get("ts")
            ranks = (gd.get("ranks") or "").strip()
            if gd.get("gpu") is not None:
                ranks = f"GPU{gd['gpu']}"
            p.ranks = ranks or None
            p.level = gd.get("level")
            if p.ts is not None:
                p.ts_at = start + pm.start("ts")
            start += pm.end()
            break
    p.start = start
    return p


def is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _rx(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives))
