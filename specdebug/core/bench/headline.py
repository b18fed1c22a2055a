"""One headline per result: the figure every screen and verb shows for a config, named, with its unit
and the bench settings it came from.

Why: the same 2-step config read 94.0 in the Bench pane (decode rate), 91.4 as `output_tok_s` in
`bench --json` (output throughput, TTFT included) and 80.7 in the Bisect pane (shorter benchmarks).
Each was right for what it measured, but nothing said which.  `headline_of` picks the figure once:
for one stream the decode rate (TTFT left out; for a parsed result 1000 / TPOT mean), otherwise the
output throughput; and `settings_differ` says when two headlines were not measured alike, so a
comparison names the difference instead of passing it off as the config's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specdebug.core.model import Model

if TYPE_CHECKING:
    from specdebug.core.bench.models import BenchResult

DECODE = "decode_tok_s"
OUTPUT = "output_tok_s"
LABELS = {DECODE: "decode rate", OUTPUT: "output throughput"}


class BenchSettings(Model):
    """What the benchmark was asked to do (a headline is only comparable under the same settings)."""

    client: str  # builtin, external, or the parsed tool (sglang, vllm, aiperf, guidellm)
    requests: int | None = None
    concurrency: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    request_rate: str | None = None

    def text(self) -> str:
        parts = [self.client]
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        if self.requests is not None:
            parts.append(f"{self.requests} requests")
        if self.input_len is not None or self.output_len is not None:
            parts.append(f"in {self.input_len or '?'} / out {self.output_len or '?'} tokens")
        if self.request_rate not in (None, "inf"):
            parts.append(f"rate {self.request_rate}")
        return ", ".join(parts)


class Headline(Model):
    """The figure a result is compared by."""

    metric: str  # the BenchResult field: decode_tok_s or output_tok_s
    label: str  # "decode rate" / "output throughput"
    value: float | None
    unit: str = "tok/s"
    definition: str
    settings: BenchSettings

    def text(self) -> str:
        """`94.0 tok/s decode rate` (the figure with its name)."""
        shown = "-" if self.value is None else f"{self.value:.1f}"
        return f"{shown} {self.unit} {self.label}"


def _settings(r: BenchResult) -> BenchSettings:
    c = r.config
    client = r.kind if r.kind != "parsed" else f"parsed {r.source_format}"
    requests = c.requests
    if requests is None and r.kind == "parsed":
        requests = (r.successful_requests or 0) + (r.failed_requests or 0) or None
    return BenchSettings(
        client=client,
        requests=requests,
        concurrency=c.concurrency,
        input_len=c.input_len,
        output_len=c.output_len,
        request_rate=c.request_rate,
    )


def headline_of(r: BenchResult) -> Headline:
    """The result's headline: one stream -> decode rate, else output throughput."""
    settings = _settings(r)
    if r.config.concurrency in (None, 1) and r.decode_tok_s is not None:
        if r.kind == "builtin":
            how = "per-stream decode rate, TTFT left out (tokens after the first / time, mean over requests)"
        else:
            how = "1000 / TPOT mean (single stream: TTFT left out, as the built-in client measures)"
        return Headline(
            metric=DECODE, label=LABELS[DECODE], value=r.decode_tok_s, definition=how, settings=settings
        )
    how = "total output tokens / benchmark duration (TTFT included)"
    return Headline(
        metric=OUTPUT, label=LABELS[OUTPUT], value=r.output_tok_s, definition=how, settings=settings
    )


def settings_differ(a: Headline, b: Headline) -> list[str]:
    """What makes two headlines not directly comparable (empty: measured alike)."""
    out = []
    if a.metric != b.metric:
        out.append(f"figure: {a.label} -> {b.label}")
    sa, sb = a.settings, b.settings
    for name in ("client", "concurrency", "requests", "input_len", "output_len", "request_rate"):
        va, vb = getattr(sa, name), getattr(sb, name)
        if va != vb and va is not None and vb is not None:
            out.append(f"{name.replace('_', ' ')}: {va} -> {vb}")
    return out


def result_json(r: BenchResult) -> dict[str, Any]:
    """A result as every verb prints it: its fields plus `headline` (metric, label, value, unit,
    definition, settings)."""
    return {**r.model_dump(mode="json"), "headline": headline_of(r).model_dump(mode="json")}


def headline_text(r: BenchResult) -> str:
    """`94.0 tok/s decode rate (builtin, concurrency 1, 8 requests, in 512 / out 256 tokens)`: what a
    screen shows for one result (the Bench pane's notice, the Bisect pane's measurements)."""
    h = headline_of(r)
    return f"{h.text()} ({h.settings.text()})"
