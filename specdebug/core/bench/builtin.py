"""The built-in benchmark: a streaming OpenAI-completions client that measures what a user feels.

It talks to ``http://127.0.0.1:<port>`` (an SSH local forward to the box's server port, or a
local sim), so it uses ``trust_env=False``: a proxy exported on the laptop must not capture it.
Requests ask for a fixed output length with ``ignore_eos`` so every config decodes the same
number of tokens, and prompts are seeded words so runs are repeatable.

Tokens are counted from the stream itself: ``usage.completion_tokens`` when the server sends it
(per chunk with ``continuous_usage_stats``, else in the final usage chunk), otherwise one token
per non-empty chunk. Speculative servers send several tokens in one chunk; the gap before such a
chunk is split evenly over its tokens for ITL (as sglang.bench_serving does), so ITL stays a
per-token figure.  A chunk whose text the server held back (an incomplete UTF-8 sequence) still
counts by its running usage: it is an engine step that arrived.

The chunks' arrival times also give the cycle time of speculative decoding (``stream_cycles``,
core.bench.bursts): one chunk per engine step, so the gaps between bursts are draft+verify cycles,
the figure vLLM does not log.

Two throughput figures are reported:
- ``output_tok_s``: total output tokens / wall duration (sglang/vLLM bench definition; includes TTFT),
- ``decode_tok_s``: tokens after the first chunk / time from first to last chunk, summed over
  requests (the per-stream decode rate; for one stream it is the "tok/s" a user quotes).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import Field

from specdebug.core.bench.bursts import stream_cycles
from specdebug.core.bench.chunks import chunk_text, chunk_tokens
from specdebug.core.bench.models import BenchConfig, BenchProgress, BenchResult, LatencyStats
from specdebug.core.bench.stream_guard import (
    StreamRefused,
    bounded_lines,
    check_counted,
    check_usage,
    token_slack,
)
from specdebug.core.httpread import get_bounded
from specdebug.core.model import Model

ProgressFn = Callable[[BenchProgress], None]

_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there one all we their been has would when if so no what up out about into them "
    "can only other time new some could these two may first then do any like my now over such our man me "
    "even most made after also did many before must through back years where much your way well down should"
).split()
MAX_ERRORS_KEPT = 10
MODELS_BODY = 1 << 20  # a /v1/models answer (a list of ids); more is not read


class BuiltinParams(Model):
    """Knobs of one built-in run (defaults = one stream, the user's single-request tok/s)."""

    requests: int = Field(default=4, ge=1)
    concurrency: int = Field(default=1, ge=1)
    input_len: int = Field(default=512, ge=1)
    output_len: int = Field(default=256, ge=1)
    seed: int = 0
    warmup_requests: int = Field(default=1, ge=0)
    temperature: float = 0.0
    ignore_eos: bool = True
    endpoint: str = "/v1/completions"
    model: str | None = None
    timeout_s: float = 600.0  # the whole-request deadline (and the longest wait for one read)

    @classmethod
    def from_spec(cls, spec: Any = None, **overrides: Any) -> BuiltinParams:
        """From a profile's BenchSpec (any object with the same attribute names), then overrides."""
        data: dict[str, Any] = {}
        if spec is not None:
            for name in cls.model_fields:
                if hasattr(spec, name):
                    data[name] = getattr(spec, name)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)


def make_prompt(input_len: int, seed: int, index: int) -> str:
    """A deterministic prompt of ``input_len`` words (≈ tokens); distinct per request index."""
    rng = random.Random(f"{seed}:{index}")
    return " ".join(rng.choice(_WORDS) for _ in range(input_len))


@dataclass
class RequestRecord:
    """What one streamed request did, in monotonic seconds."""

    start: float = 0.0
    end: float = 0.0
    ok: bool = False
    error: str | None = None
    chunk_times: list[float] = field(default_factory=list)  # arrival of each chunk carrying tokens
    chunk_tokens: list[int] = field(default_factory=list)  # tokens in each such chunk (as counted)
    chunk_chars: list[int] = field(default_factory=list)  # text length of each such chunk
    usage_completion: int | None = None  # final usage.completion_tokens
    usage_prompt: int | None = None
    text_chars: int = 0
    running_usage: bool = False  # every token chunk carried a running usage count (exact tokens per chunk)

    @property
    def output_tokens(self) -> int:
        counted = sum(self.chunk_tokens)
        return self.usage_completion if self.usage_completion is not None else counted

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.start if self.chunk_times else None


class _Live:
    """Shared counters for progress reports (throttled so a fast stream does not flood the UI)."""

    def __init__(self, total: int, progress: ProgressFn | None, interval: float = 0.1) -> None:
        self.total = total
        self.done = 0
        self.tokens = 0
        self.t0 = time.perf_counter()
        self.progress = progress
        self.interval = interval
        self.last = 0.0
        self.phase = "running"

    def report(self, force: bool = False) -> None:
        if self.progress is None:
            return
        now = time.perf_counter()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        elapsed = now - self.t0
        self.progress(
            BenchProgress(
                done_requests=self.done,
                total_requests=self.total,
                output_tokens=self.tokens,
                elapsed_s=elapsed,
                tok_s=self.tokens / elapsed if elapsed > 0 else None,
                phase=self.phase,
            )
        )


async def discover_model(client: httpx.AsyncClient) -> str:
    """The served model id from ``GET /v1/models`` (servers reject unknown names)."""
    try:
        got = await get_bounded(client, "/v1/models", deadline_s=10, max_bytes=MODELS_BODY)
        data = [] if got.cut else json.loads(got.body).get("data") or []
        if data and isinstance(data[0], dict) and data[0].get("id"):
            return str(data[0]["id"])
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return "default"


async def stream_one(
    client: httpx.AsyncClient,
    params: BuiltinParams,
    model: str,
    prompt: str,
    max_tokens: int,
    live: _Live | None,
) -> RequestRecord:
    """One streaming completion; failures are recorded, never raised (cancellation is)."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": params.temperature,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "ignore_eos": params.ignore_eos,
    }
    rec = RequestRecord(start=time.perf_counter())
    try:
        async with asyncio.timeout(params.timeout_s):  # the whole request, not one read
            await _read_stream(client, params, body, max_tokens, rec, live)
    except TimeoutError:
        rec.error = f"no end of the stream after {params.timeout_s:g} s (the whole-request deadline)"
    except StreamRefused as exc:
        rec.error = str(exc)
    except httpx.HTTPError as exc:
        rec.error = (f"{type(exc).__name__}: {exc}" if str(exc).strip() else type(exc).__name__)[:200]
    finally:
        rec.end = time.perf_counter()
    if rec.error is not None:
        return rec
    if not rec.chunk_times:
        rec.error = "stream ended without any token"
        return rec
    rec.ok = True  # a missing [DONE] is tolerated: some servers omit it and the tokens did arrive
    return rec


async def _read_stream(
    client: httpx.AsyncClient,
    params: BuiltinParams,
    body: dict[str, Any],
    max_tokens: int,
    rec: RequestRecord,
    live: _Live | None,
) -> None:
    """Read one completion stream into `rec`: bounded lines, checked usage, stopped past max_tokens
    (+ slack). Sets rec.error for an HTTP or server error; raises StreamRefused for a broken bound."""
    prev_usage: int | None = None
    counted = 0  # tokens so far (a running sum: summing the list per chunk made long streams quadratic)
    async with client.stream("POST", params.endpoint, json=body) as resp:
        if resp.status_code != 200:
            page = b""
            async for part in resp.aiter_bytes():
                page += part
                if len(page) > 4096:  # an error page is read only as far as it is shown
                    break
            rec.error = f"HTTP {resp.status_code}: {page.decode('utf-8', 'replace').strip()[:200]}"
            return
        async for line in bounded_lines(resp.aiter_bytes()):
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            now = time.perf_counter()
            try:
                chunk = json.loads(payload)
            except ValueError:
                continue
            if isinstance(chunk, dict) and chunk.get("error"):
                rec.error = f"server error: {str(chunk['error'])[:200]}"
                return
            text = chunk_text(chunk)
            usage = chunk.get("usage") if isinstance(chunk, dict) else None
            completion, prompt = check_usage(usage, max_tokens, prev_usage)
            if prompt is not None:
                rec.usage_prompt = prompt
            if completion is not None:
                rec.usage_completion = completion
            n = chunk_tokens(chunk, text, completion, prev_usage)
            if completion is not None:
                prev_usage = completion
            if n > 0:
                rec.running_usage = completion is not None and (counted == 0 or rec.running_usage)
                counted += n
                rec.chunk_times.append(now)
                rec.chunk_tokens.append(n)
                rec.chunk_chars.append(len(text))
                if live is not None:
                    live.tokens += n
                    live.report()
            rec.text_chars += len(text)
            check_counted(counted, max_tokens)


async def run_builtin(
    base_url: str,
    params: BuiltinParams,
    *,
    progress: ProgressFn | None = None,
    client: httpx.AsyncClient | None = None,
) -> BenchResult:
    """Run the benchmark against ``base_url`` and return client-side figures (no conditions yet).

    Cancelling the calling task cancels every in-flight request (the HTTP streams close).
    """
    own = client is None
    if client is None:
        client = httpx.AsyncClient(
            base_url=base_url,
            trust_env=False,
            timeout=httpx.Timeout(params.timeout_s, connect=15.0),
            limits=httpx.Limits(
                max_connections=params.concurrency + 2, max_keepalive_connections=params.concurrency + 2
            ),
        )
    try:
        model = params.model or await discover_model(client)
        live = _Live(params.requests, progress)
        if params.warmup_requests:
            live.phase = "warmup"
            live.report(force=True)
            warm = [
                stream_one(
                    client,
                    params,
                    model,
                    make_prompt(params.input_len, params.seed, -1 - i),
                    min(params.output_len, 16),
                    None,
                )
                for i in range(params.warmup_requests)
            ]
            await asyncio.gather(*warm)
        live = _Live(params.requests, progress)
        live.report(force=True)
        records: list[RequestRecord] = [RequestRecord() for _ in range(params.requests)]
        next_index = 0

        async def worker() -> None:
            nonlocal next_index
            while next_index < params.requests:
                i = next_index
                next_index += 1
                prompt = make_prompt(params.input_len, params.seed, i)
                records[i] = await stream_one(client, params, model, prompt, params.output_len, live)
                live.done += 1
                live.report(force=True)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(params.concurrency, params.requests))))
        t1 = time.perf_counter()
        live.phase = "collecting"
        live.report(force=True)
        result = summarize(records, t1 - t0, params)
        result.config.backend = model
        return result
    finally:
        if own:
            await client.aclose()


def summarize(records: list[RequestRecord], duration: float, params: BuiltinParams) -> BenchResult:
    """Turn request records into the result figures (pure: unit tests feed synthetic records)."""
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    res = BenchResult(
        kind="builtin",
        source_format="builtin",
        config=BenchConfig(
            requests=params.requests,
            concurrency=params.concurrency,
            input_len=params.input_len,
            output_len=params.output_len,
            seed=params.seed,
            request_rate="inf",
            token_slack=token_slack(params.output_len),
            request_deadline_s=params.timeout_s,
        ),
        duration_s=duration,
        successful_requests=len(ok),
        failed_requests=len(failed),
    )
    res.errors = [r.error or "unknown error" for r in failed][:MAX_ERRORS_KEPT]
    if failed:
        res.warnings.append(f"{len(failed)} of {len(records)} requests failed: {res.errors[0]}")
    if not ok:
        res.status = "failed"
        return res
    out_tokens = sum(r.output_tokens for r in ok)
    res.total_output_tokens = out_tokens
    prompt = [r.usage_prompt for r in ok if r.usage_prompt is not None]
    res.total_input_tokens = sum(prompt) if len(prompt) == len(ok) else params.input_len * len(ok)
    if duration > 0:
        res.output_tok_s = out_tokens / duration
        res.request_throughput = len(ok) / duration
        res.input_tok_s = res.total_input_tokens / duration
        res.total_tok_s = (res.total_input_tokens + out_tokens) / duration
        res.mean_concurrency = sum(r.end - r.start for r in ok) / duration

    ttfts = [r.ttft * 1000 for r in ok if r.ttft is not None]
    e2es = [(r.end - r.start) * 1000 for r in ok]
    itls: list[float] = []
    tpots: list[float] = []
    dec_tokens = 0
    dec_time = 0.0
    for r in ok:
        tokens = _scaled_chunk_tokens(r)
        for k in range(1, len(r.chunk_times)):
            gap = (r.chunk_times[k] - r.chunk_times[k - 1]) * 1000
            n = max(tokens[k], 1)
            itls.extend([gap / n] * n)
        if r.output_tokens > 1 and r.ttft is not None:
            tpots.append((r.end - r.start - r.ttft) * 1000 / (r.output_tokens - 1))
        if len(r.chunk_times) > 1:
            dec_tokens += sum(tokens[1:])
            dec_time += r.chunk_times[-1] - r.chunk_times[0]
    res.ttft_ms = LatencyStats.from_samples(ttfts)
    res.e2e_ms = LatencyStats.from_samples(e2es)
    res.itl_ms = LatencyStats.from_samples(itls)
    res.tpot_ms = LatencyStats.from_samples(tpots)
    if dec_time > 0:
        res.decode_tok_s = dec_tokens / dec_time
    res.peak_output_tok_s, res.peak_concurrent_requests = _peaks(ok)
    res.stream_cycles = stream_cycles(ok)  # core.bench.bursts
    short = [r for r in ok if params.ignore_eos and r.output_tokens < params.output_len]
    if short:
        res.warnings.append(
            f"{len(short)} requests returned fewer than {params.output_len} tokens (ignore_eos not honoured?)"
        )
    return res


def _scaled_chunk_tokens(r: RequestRecord) -> list[int]:
    """Per-chunk token counts.

    Exact when the server sent per-chunk usage. When only the final usage total is known and
    chunks carry several tokens (speculative steps), the surplus over one token per chunk is
    spread in proportion to each chunk's text length (largest remainder), so a one-token first
    chunk is not credited with a burst's worth of tokens.
    """
    counted = sum(r.chunk_tokens)
    total = r.usage_completion
    n = len(r.chunk_tokens)
    if total is None or total == counted or n == 0 or total < n:
        return r.chunk_tokens
    surplus = total - n
    weights = [max(c, 1) for c in (r.chunk_chars if len(r.chunk_chars) == n else [1] * n)]
    wsum = sum(weights)
    shares = [surplus * w / wsum for w in weights]
    out = [1 + int(x) for x in shares]
    left = total - sum(out)
    for i in sorted(range(n), key=lambda i: shares[i] - int(shares[i]), reverse=True)[:left]:
        out[i] += 1
    return out


def _peaks(ok: list[RequestRecord]) -> tuple[float | None, float | None]:
    """Highest tokens in any 1 s bucket, and most requests in flight at once."""
    if not ok:
        return None, None
    t0 = min(r.start for r in ok)
    buckets: dict[int, int] = {}
    for r in ok:
        for t, n in zip(r.chunk_times, _scaled_chunk_tokens(r), strict=False):
            b = int(t - t0)
            buckets[b] = buckets.get(b, 0) + n
    edges = sorted([(r.start, 1) for r in ok] + [(r.end, -1) for r in ok], key=lambda e: (e[0], e[1]))
    cur = peak = 0
    for _, d in edges:
        cur += d
        peak = max(peak, cur)
    return (float(max(buckets.values())) if buckets else None), float(peak)
