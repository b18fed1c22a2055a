"""Prometheus `/metrics` as a second source of truth, beside the log lines.

Why: both servers export the facts the log rounds (counters, not `%.2f` fields; per-position
acceptance), and they keep counting when the log is quiet (vLLM logs nothing when idle, a server may
run with --disable-log-stats or a long --decode-log-interval).  The text is parsed with
prometheus_client's maintained parser, never with regexes; counters become rates over a window
(two scrapes), gauges are read as they are.

Names (shared/formats/current-sources.md):
  SGLang  gauges sglang:spec_accept_length, spec_accept_rate, gen_throughput, num_running_reqs,
          num_queue_reqs, token_usage (of the last decode-log interval); counters
          sglang:generation_tokens_total, prompt_tokens_total, ...  /metrics only with --enable-metrics.
  vLLM    counters vllm:spec_decode_num_drafts_total, _num_draft_tokens_total,
          _num_accepted_tokens_total, _num_accepted_tokens_per_pos_total{position}, generation_tokens_total;
          gauges vllm:num_requests_running, num_requests_waiting, kv_cache_usage_perc (older
          gpu_cache_usage_perc).  /metrics is always on.
Series of one metric are combined over label sets (core.promparse): TP/EP replicas (the same labels
apart from tp_rank / moe_ep_rank) count once, the rest (SGLang DP-attention ranks, vLLM engines) are
summed, or averaged for ratios; NaN/Inf series are left out and named (null in JSON, with a note).

Reading goes through the SSH forward with one keep-alive HTTP client (one TCP connection, so one
SSH channel for the whole watch), about once a second while something needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from specdebug.core.fingerprint import url_host
from specdebug.core.logs.acceptrate import DEFINITIONS, own_rate, which_definition
from specdebug.core.model import Model
from specdebug.core.promparse import REPLICA_LABELS as REPLICA_LABELS  # re-exported
from specdebug.core.promparse import PromSnapshot, is_mean
from specdebug.core.promparse import parse_metrics as parse_metrics  # re-exported
from specdebug.engines import ENGINES, EngineName, get_engine
from specdebug.engines.base import PromNames
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote

if TYPE_CHECKING:
    import httpx  # imported where a request is made: it costs ~70 ms, and most verbs make none

logger = logging.getLogger(__name__)

SCRAPE_DEADLINE_S = 10.0  # one whole /metrics page
MAX_BODY = 4 << 20  # a /metrics page larger than this is cut (reported), never read whole
METRICS_OFF_HINT = {name: engine.prom.off_hint for name, engine in ENGINES.items()}
DEFAULT_OFF_HINT = (
    "metrics off: the server does not serve /metrics ("
    + "; ".join(f"{e.title}: add {e.prom.enable_flag}" for e in ENGINES.values() if e.prom.enable_flag)
    + ")"
)


class PromRates(Model):
    """What the server said over a window (or since start when there is one scrape); None = not exported."""

    engine: EngineName | None = None
    window_s: float | None = None  # None: counters since server start (one scrape only)
    accept_length: float | None = None  # incl. the bonus token
    accept_rate: float | None = None  # fraction of draft tokens accepted, 0..1
    per_position: list[float] = Field(default_factory=list)  # fraction accepted at each draft position
    gen_throughput: float | None = None  # generated tokens/s
    running: float | None = None
    queued: float | None = None
    kv_usage: float | None = None  # fraction 0..1
    drafts: float | None = None  # vLLM counter deltas over the window
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    # specdebug's own rate, one definition for every version: (accept length - 1) / (draft tokens - 1)
    draft_accept_rate: float | None = None
    num_steps: float | None = None  # SGLang 0.5.23 gauges: the live speculative settings
    num_draft_tokens: float | None = None
    verify_calls_per_s: float | None = None  # sglang:spec_verify_calls_total over the window
    dp_ranks: int = 1  # DP ranks / engines whose series were summed
    sources: dict[str, str] = Field(default_factory=dict)  # field -> the metric (and how) it came from
    notes: list[str] = Field(default_factory=list)  # e.g. a gauge that was NaN (shown as null)


class MetricsEvent(Model):
    """What `watch_metrics` yields: a sample, or a state change ("off", "error") with a message."""

    kind: Literal["sample", "off", "error"]
    t: float
    rates: PromRates | None = None
    since_start: PromRates | None = None  # the same scrape's counters since the server started
    message: str | None = None


class MetricsOff(SpecdebugError):
    """The server answers but serves no /metrics (SGLang without --enable-metrics)."""


# ---------------------------------------------------------------------------------------------
# parsing (pure)


def _counter(snap: PromSnapshot, name: str) -> float | None:
    """A counter by base name (exposed with _total; 0.8.x vLLM registered the _total name itself)."""
    for key in (f"{name}_total", name):
        if key in snap.values:
            return snap.values[key]
    return None


def _gauge(snap: PromSnapshot, *names: str) -> tuple[float | None, str | None]:
    for name in names:
        if name in snap.values:
            return snap.values[name], name
    return None, None


def _delta(prev: PromSnapshot | None, cur: PromSnapshot, name: str) -> float | None:
    now = _counter(cur, name)
    if now is None:
        return None
    before = _counter(prev, name) if prev is not None else 0.0
    if before is None or now < before:  # counter reset (server restart): count from zero
        before = 0.0
    return now - before


def compute_rates(prev: PromSnapshot | None, cur: PromSnapshot) -> PromRates:
    """Rates between two scrapes (counters), current gauges; prev None = since the server started."""
    window = cur.t - prev.t if prev is not None and cur.t > prev.t else None
    how = f"rate over {window:.1f} s" if window else "since server start"
    r = PromRates(
        engine=cur.engine or (prev.engine if prev else None), window_s=window, dp_ranks=cur.dp_ranks
    )
    r.notes = [f"{name} was {what}: shown as null" for name, what in cur.nonfinite.items()]
    summed = f", summed over {cur.dp_ranks} DP ranks" if cur.dp_ranks > 1 else ""
    names = get_engine(r.engine).prom if r.engine is not None else None
    if names is not None and names.spec_from == "gauges":
        _gauge_rates(r, prev, cur, names, window, how, summed)
    elif names is not None:
        _counter_rates(r, prev, cur, names, window, how)
    return r


def _gauge_rates(
    r: PromRates,
    prev: PromSnapshot | None,
    cur: PromSnapshot,
    names: PromNames,
    window: float | None,
    how: str,
    summed: str,
) -> None:
    """An engine that exports its speculative figures as gauges of the last log interval (SGLang)."""
    src = r.sources
    for field, group in names.gauges:
        value, name = _gauge(cur, *group)
        if value is None or name is None or (field in ("accept_length", "accept_rate") and value <= 0):
            continue  # 0: no speculative decoding, or no decode interval logged yet
        setattr(r, field, value)
        mean = is_mean(name) and cur.dp_ranks > 1
        src[field] = f"{name} (gauge" + (f", mean of {cur.dp_ranks} DP ranks)" if mean else f"{summed})")
    _own_rate(r, names)
    calls = _delta(prev, cur, names.verify_calls) if window and names.verify_calls else None
    if calls is not None and window:
        r.verify_calls_per_s = calls / window
        src["verify_calls_per_s"] = f"{names.verify_calls}_total ({how})"
    gen = _delta(prev, cur, names.generation_tokens) if window and names.generation_tokens else None
    if gen is not None and window:
        r.gen_throughput, src["gen_throughput"] = gen / window, f"{names.generation_tokens}_total ({how})"
    elif names.gen_throughput:
        value, _ = _gauge(cur, names.gen_throughput)
        if value is not None:
            r.gen_throughput, src["gen_throughput"] = value, f"{names.gen_throughput} (gauge)"


def _counter_rates(
    r: PromRates,
    prev: PromSnapshot | None,
    cur: PromSnapshot,
    names: PromNames,
    window: float | None,
    how: str,
) -> None:
    """An engine that exports speculative counters (vLLM): rates over the window."""
    src = r.sources
    drafts = _delta(prev, cur, names.drafts)
    draft_tokens = _delta(prev, cur, names.draft_tokens)
    accepted = _delta(prev, cur, names.accepted_tokens)
    r.drafts, r.draft_tokens, r.accepted_tokens = drafts, draft_tokens, accepted
    if accepted is not None and draft_tokens:
        r.accept_rate = r.draft_accept_rate = accepted / draft_tokens
        src["accept_rate"] = f"{names.accepted_tokens} / num_draft_tokens ({how})"
        src["draft_accept_rate"] = names.accept_rate_is_own
    if accepted is not None and drafts:
        r.accept_length = 1.0 + accepted / drafts
        src["accept_length"] = f"1 + {names.accepted_tokens} / num_drafts ({how})"
        prev_pos = prev.per_pos if prev is not None else {}
        r.per_position = [
            max(0.0, v - (prev_pos.get(i, 0.0) if prev_pos.get(i, 0.0) <= v else 0.0)) / drafts
            for i, v in sorted(cur.per_pos.items())
        ]
        if r.per_position:
            src["per_position"] = f"{names.accepted_per_pos} / num_drafts ({how})"
    gen = _delta(prev, cur, names.generation_tokens)
    if gen is not None and window:
        r.gen_throughput, src["gen_throughput"] = gen / window, f"{names.generation_tokens}_total ({how})"
    for field, group in names.gauges:
        value, gauge = _gauge(cur, *group)
        if value is not None:
            setattr(r, field, value)
            src[field] = f"{gauge} (gauge)"


def _own_rate(r: PromRates, names: PromNames) -> None:
    """SGLang: (accept length - 1) / (draft tokens - 1) from the gauges, and which definition the
    server's own spec_accept_rate uses (it changed in 0.5.23: core.logs.acceptrate)."""
    if r.accept_length is None or r.num_draft_tokens is None:
        return
    tokens = round(r.num_draft_tokens)
    r.draft_accept_rate = own_rate(r.accept_length, tokens)
    if r.draft_accept_rate is not None:
        r.sources["draft_accept_rate"] = names.own_rate_source
    if r.accept_rate is not None:
        kind = which_definition(r.accept_length, r.accept_rate, tokens)
        if kind is not None:
            r.sources["accept_rate"] += f"; {DEFINITIONS[kind]}"


RATE_FIELDS = (
    ("accept_length", "accept length", "{:.3f}"),
    ("accept_rate", "accept rate", "{:.3f}"),
    ("draft_accept_rate", "draft accept rate", "{:.3f}"),
    ("per_position", "per-position acceptance", None),
    ("gen_throughput", "generation tok/s", "{:.1f}"),
    ("running", "running requests", "{:.0f}"),
    ("queued", "queued requests", "{:.0f}"),
    ("kv_usage", "KV usage", "{:.3f}"),
    ("num_steps", "speculative steps", "{:.0f}"),
    ("num_draft_tokens", "draft tokens", "{:.0f}"),
    ("verify_calls_per_s", "verify calls/s", "{:.1f}"),
)


def describe_rates(r: PromRates) -> list[tuple[str, str, str]]:
    """(label, value, source) for every number present, in a fixed order (the verb and the pane)."""
    out = []
    for field, label, fmt in RATE_FIELDS:
        value = getattr(r, field)
        if value is None or value == []:
            continue
        text = ", ".join(f"{v:.3f}" for v in value) if fmt is None else fmt.format(value)
        out.append((label, text, r.sources.get(field, "?")))
    return out


# ---------------------------------------------------------------------------------------------
# reading through the forward


async def scrape(
    client: httpx.AsyncClient, *, path: str = "/metrics", clock: Callable[[], float] = time.monotonic
) -> PromSnapshot:
    """One GET /metrics on the keep-alive client; MetricsOff on 404 (not exported)."""
    import httpx

    t = clock()
    body = bytearray()
    cut = False
    try:
        async with asyncio.timeout(SCRAPE_DEADLINE_S), client.stream("GET", path, timeout=10) as resp:
            if resp.status_code == 404:
                raise MetricsOff(f"GET {path}: HTTP 404")
            if resp.status_code != 200:
                raise httpx.HTTPStatusError(
                    f"GET {path}: HTTP {resp.status_code}", request=resp.request, response=resp
                )
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY:
                    cut = True
                    break
    except TimeoutError:  # every read succeeded, the page never ended: a whole-request deadline
        raise httpx.ReadTimeout(f"GET {path}: no whole page within {SCRAPE_DEADLINE_S:g} s") from None
    text = bytes(body[:MAX_BODY]).decode("utf-8", "replace")
    if cut:
        text = text[: text.rfind("\n") + 1]
    snap = parse_metrics(text, t)
    if cut:
        snap.error = f"/metrics larger than {MAX_BODY >> 20} MiB: read the first part only"
    return snap


def off_message(kind: str | None) -> str:
    return METRICS_OFF_HINT.get(kind or "", DEFAULT_OFF_HINT)


async def watch_metrics(
    remote: Remote,
    port: int,
    *,
    kind: str | None = None,
    interval: float = 1.0,
    count: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    host: str = "127.0.0.1",
) -> AsyncIterator[MetricsEvent]:
    """Scrape every `interval` s through one forward and one keep-alive client; yield rates over each
    interval (the first sample: counters since server start).  "off" ends the watch; errors are
    reported and retried.  `count` limits the number of samples (None: until cancelled).  `host`:
    where the server answers on the box (its --host)."""
    import httpx

    fwd = await remote.forward_local_port(port, host)
    prev: PromSnapshot | None = None
    n = 0
    try:
        async with httpx.AsyncClient(
            base_url=f"http://{url_host(fwd.local_host)}:{fwd.local_port}", trust_env=False
        ) as client:
            while count is None or n < count:
                started = clock()
                try:
                    snap = await scrape(client, clock=clock)
                except MetricsOff as exc:
                    yield MetricsEvent(kind="off", t=clock(), message=f"{off_message(kind)} ({exc})")
                    return
                except httpx.HTTPError as exc:
                    yield MetricsEvent(
                        kind="error", t=clock(), message=f"/metrics: {type(exc).__name__}: {exc}"
                    )
                else:
                    n += 1
                    rates = compute_rates(prev, snap)
                    since = compute_rates(None, snap) if prev is not None else rates
                    yield MetricsEvent(
                        kind="sample", t=snap.t, rates=rates, since_start=since, message=snap.error
                    )
                    prev = snap
                if count is not None and n >= count:
                    break
                await asyncio.sleep(max(0.0, interval - (clock() - started)))
    finally:
        try:
            await fwd.close()
        except Exception:  # the connection may be gone already
            logger.debug("closing the metrics forward failed", exc_info=True)


def window_rates(before: PromSnapshot | None, after: PromSnapshot | None) -> PromRates | None:
    """Server-side rates over a benchmark's window (None when either scrape is missing)."""
    if before is None or after is None:
        return None
    return compute_rates(before, after)


class ServerProm(Model):
    """/metrics over one benchmark's window, as stored in its result."""

    status: Literal["ok", "off", "error"]
    message: str | None = None
    scrapes: int = 0
    rates: PromRates | None = None


class MetricsWindow:
    """Scrapes /metrics about once a second while a benchmark runs (on the runner's forward).

    Counters give exact rates over the window (first to last scrape); SGLang's spec gauges hold the
    last decode-log interval, so they are averaged over the scrapes after the first (the first one
    still shows what the server did before the run)."""

    def __init__(self, base_url: str, kind: str | None = None, interval: float = 1.0) -> None:
        self.base_url = base_url
        self.kind = kind
        self.interval = interval
        self.snaps: list[PromSnapshot] = []
        self.status: Literal["ok", "off", "error"] = "ok"
        self.message: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> MetricsWindow:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="metrics-window")
        return self

    async def _run(self) -> None:
        import httpx

        async with httpx.AsyncClient(base_url=self.base_url, trust_env=False) as client:
            while True:
                stopping = self._stop.is_set()  # the last scrape starts after the run ended
                try:
                    self.snaps.append(await scrape(client))
                except MetricsOff as exc:
                    self.status, self.message = "off", f"{off_message(self.kind)} ({exc})"
                    return
                except httpx.HTTPError as exc:
                    self.status, self.message = "error", f"/metrics: {type(exc).__name__}: {exc}"
                if stopping:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.interval)

    def cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def finish(self) -> ServerProm:
        """One last scrape, then the window's rates."""
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 15)
            except Exception:  # the last scrape failed or hung: the window keeps what it has
                logger.debug("the last metrics scrape failed", exc_info=True)
        return summarize_window(self.snaps, self.status, self.message)


def summarize_window(snaps: list[PromSnapshot], status: str = "ok", message: str | None = None) -> ServerProm:
    """Counters from the first to the last scrape; SGLang gauges averaged over the later scrapes."""
    if status == "off" or len(snaps) < 2:
        msg = message or ("fewer than two /metrics scrapes in the window" if status != "off" else None)
        return ServerProm(status="off" if status == "off" else "error", message=msg, scrapes=len(snaps))
    rates = compute_rates(snaps[0], snaps[-1])
    names = get_engine(rates.engine).prom if rates.engine is not None else None
    if names is not None and names.spec_from == "gauges":
        later = snaps[1:]
        for field, name in (("accept_length", names.accept_length), ("accept_rate", names.accept_rate)):
            vals = [s.values[name] for s in later if s.values.get(name, 0.0) > 0]
            if vals:
                setattr(rates, field, sum(vals) / len(vals))
                rates.sources[field] = f"{name} (gauge, mean of {len(vals)} scrapes)"
    errors = [s.error for s in snaps if s.error]
    return ServerProm(
        status="ok", message=message or (errors[0] if errors else None), scrapes=len(snaps), rates=rates
    )
