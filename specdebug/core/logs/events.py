"""Typed events the log service hands to front ends: parsed lines, metric samples, follow notices.

Models are pydantic so verbs can dump them as JSON and panes can trust their shape. The hot path
(one model per matching line, up to tens of thousands per second) builds them with
`model_construct`, because the parser already produced clean values.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from specdebug.core.model import Model

MetricValue = float | list[float]


class MetricSample(Model):
    """One number taken from one log line."""

    name: str
    value: MetricValue
    offset: int | None = None  # byte offset of the line in its file
    ts: str | None = None  # timestamp as printed by the server (no year for vLLM)
    warmup: bool = False  # seen before the ready/warmup-done marker


class LogMatch(Model):
    """A log line that meant something: a batch line, an error, a milestone, a profile pattern."""

    offset: int | None = None  # byte offset of the line start (exact; used for resume and context)
    lineno: int | None = None  # 1-based line number when known (scan of a whole file)
    line: str
    event: str  # decode_batch, prefill_batch, engine_stats, spec_decode, error, ready, warmup_done,
    #            startup, nccl_env, a profile pattern name, or "match" for grep patterns
    also: list[str] = Field(default_factory=list)  # further event names the same line counts for
    fields: dict[str, Any] = Field(default_factory=dict)  # every key/value the line carried, normalised keys
    metrics: dict[str, MetricValue] = Field(default_factory=dict)  # the subset that are named metrics
    spans: list[tuple[int, int, str]] = Field(default_factory=list)  # (start, end, name) of values in `line`
    warmup: bool = False
    ts: str | None = None
    phase: str | None = None  # startup phase the line enters, when it is a milestone
    inode: int | None = None  # file identity when followed (offsets are per inode)
    truncated: int | None = None  # the line's full length in bytes when `line` holds only its head

    @classmethod
    def fast(cls, **values: Any) -> LogMatch:
        """`model_construct` without its per-call overhead (the parser's hot path, ~10x cheaper).

        Values must already have the field types; unset fields get their defaults. Equivalent to
        `model_construct(**values)` (a unit test checks it)."""
        obj = cls.__new__(cls)
        data = {**_MATCH_DEFAULTS, **values}
        for k in ("also", "fields", "metrics", "spans"):
            if k not in values:
                data[k] = type(data[k])()
        object.__setattr__(obj, "__dict__", data)
        object.__setattr__(obj, "__pydantic_fields_set__", set(values))
        object.__setattr__(obj, "__pydantic_extra__", None)
        object.__setattr__(obj, "__pydantic_private__", None)
        return obj

    @classmethod
    def stat(
        cls,
        offset: int | None,
        lineno: int | None,
        line: str,
        event: str,
        fields: dict[str, Any],
        metrics: dict[str, MetricValue],
        spans: list[tuple[int, int, str]],
        warmup: bool,
        ts: str | None,
        inode: int | None,
    ) -> LogMatch:
        """A batch/stat line's match as the parser makes it (no phase, no also, not truncated):
        `fast` without its merging of defaults, for the shape cache's path. Equal to `fast` with
        the same values, field for field and in `model_fields_set` (a unit test checks it)."""
        obj = cls.__new__(cls)
        data = {
            "offset": offset,
            "lineno": lineno,
            "line": line,
            "event": event,
            "also": [],
            "fields": fields,
            "metrics": metrics,
            "spans": spans,
            "warmup": warmup,
            "ts": ts,
            "phase": None,
            "inode": inode,
            "truncated": None,
        }
        _set(obj, "__dict__", data)
        _set(obj, "__pydantic_fields_set__", set(_STAT_SET))
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj

    def samples(self) -> list[MetricSample]:
        return [
            MetricSample.model_construct(name=k, value=v, offset=self.offset, ts=self.ts, warmup=self.warmup)
            for k, v in self.metrics.items()
        ]


_MATCH_DEFAULTS: dict[str, Any] = {
    name: (f.get_default(call_default_factory=True) if not f.is_required() else None)
    for name, f in LogMatch.model_fields.items()
}

_set = object.__setattr__
# the fields the parser passes for a batch/stat line (all but `truncated`)
_STAT_SET = frozenset(_MATCH_DEFAULTS) - {"truncated"}

FollowEventKind = Literal[
    "opened",  # following started: inode, offset
    "missing",  # the file does not exist (yet); following waits for it
    "truncated",  # the file shrank below our offset: restarted from 0
    "rotated",  # the path now names another file (inode changed): restarted from 0 of the new one
    "reconnecting",  # the SSH connection dropped; waiting to resume from `offset`
    "resumed",  # reconnected; following again from `offset`
    "fallback",  # no python3 on the box: plain `tail -c +N -F`, no prefilter, no rotation detection
    "ended",  # the remote follower exited (detail says why)
    "error",  # the follower could not start (detail says why)
    "pattern_cut",  # a user pattern overran its time limit and was dropped (detail names it)
]


class LogEvent(Model):
    """Something that happened to the followed file or to the follow itself (not a log line)."""

    kind: FollowEventKind
    path: str
    offset: int | None = None
    inode: int | None = None
    detail: str = ""
