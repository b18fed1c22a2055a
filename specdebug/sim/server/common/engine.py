"""The batching engine: one asyncio loop that runs prefill and decode "forwards" on a real-time schedule.

It lives in the launcher (where SGLang's TokenizerManager is) and prints the scheduler's periodic
lines with TP0's prefix.  Forward durations come from `costmodel`; each forward's end time is a
deadline on the monotonic clock (previous deadline + duration), so sleeping never accumulates
drift and the rate a client measures equals the model.  A stalled event loop catches up (bounded).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from specdebug.sim.server.common import costmodel
from specdebug.sim.server.common.costmodel import MAX_LAG_S, AcceptSampler, SpecConfig
from specdebug.sim.server.sglang.shapes import DEFAULT_VERSION, Shapes

PROFILE_INTERVAL = 10  # [EAGLE3 profile] line every N decode steps
EOS_TOKEN_ID = 128001

_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no will more other its time what "
    "about up out them some could into only then now two may these first any new like over such our very"
).split()
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
VOCAB_WORDS, TOKEN_RE = _WORDS, _TOKEN_RE  # for the tokenizer endpoints (sim.server.common.openai_api.Vocab)


def count_tokens(text: str) -> int:
    """Rough tokenizer: words and punctuation, plus a BOS token ("The capital city of France is" -> 7)."""
    return len(_TOKEN_RE.findall(text)) + 1


@dataclass
class Finish:
    reason: str  # "length" | "stop" | "abort"
    matched_stop: int | str | None = None  # EOS id, or the stop string that matched


@dataclass
class Request:
    """One generation in flight; `out` receives a list[str] per forward and finally a Finish."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    ignore_eos: bool
    natural_len: int
    sampler: AcceptSampler
    words: random.Random
    out: asyncio.Queue = field(default_factory=asyncio.Queue)
    generated: int = 0
    verify_ct: int = 0
    accepted: int = 0
    created: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None
    finished: Finish | None = None

    def take(self, n: int) -> list[str]:
        limit = self.max_new_tokens if self.ignore_eos else min(self.max_new_tokens, self.natural_len)
        n = max(0, min(n, limit - self.generated))
        self.generated += n
        if self.generated >= limit:
            if not self.ignore_eos and self.natural_len < self.max_new_tokens:
                self.finished = Finish("stop", EOS_TOKEN_ID)
            else:
                self.finished = Finish("length")
        return [" " + self.words.choice(_WORDS) for _ in range(n)]


HISTOGRAM_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class Histogram:
    """Cumulative Prometheus-style histogram (bucket counts, sum, count)."""

    counts: list[int] = field(default_factory=lambda: [0] * len(HISTOGRAM_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        self.total += value
        self.count += 1
        for i, bound in enumerate(HISTOGRAM_BUCKETS):
            if value <= bound:
                self.counts[i] += 1


@dataclass
class Stats:
    """What /get_server_info, /metrics and the decode line report."""

    last_gen_throughput: float = 0.0
    last_accept_len: float = 0.0
    last_accept_rate: float = 0.0
    cum_accepted: int = 0
    cum_verify: int = 0
    spec_verify_calls: int = 0  # verify forwards (one per decode step): sglang:spec_verify_calls_total
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    num_requests_total: int = 0
    ttft: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=Histogram)

    @property
    def avg_spec_accept_length(self) -> float:
        return self.cum_accepted / self.cum_verify if self.cum_verify else 0.0


class Engine:
    """Continuous batching over `Request`s with SGLang-style Prefill/Decode log lines."""

    def __init__(
        self,
        spec: SpecConfig,
        *,
        log: Callable[[str], object],
        seed: int,
        max_total_tokens: int,
        max_running: int,
        decode_log_interval: int,
        cuda_graph: bool,
        cuda_graph_max_bs: int = 160,
        nccl_missing: int = 0,
        profile: bool = False,
        shapes: Shapes | None = None,
        cost_scale: float = 1.0,
        decode_scale: float = 1.0,
        costs: costmodel.Costs = costmodel.DEFAULT_COSTS,
    ):
        self.shapes = shapes or Shapes(DEFAULT_VERSION)
        self.spec = spec
        self._log = log
        self._rng = random.Random(seed)
        self.max_total_tokens = max(max_total_tokens, 1)
        self.max_running = max(max_running, 1)
        self.decode_log_interval = max(decode_log_interval, 1)
        self.cuda_graph = cuda_graph
        self.cuda_graph_max_bs = cuda_graph_max_bs
        self.nccl_missing = nccl_missing
        self.cost_scale = cost_scale  # this launch's --noise draw
        self.decode_scale = decode_scale  # --decode-scale: a faster (or slower) GPU, for benchmarks
        self.costs = costs  # --draft-step-ms, --verify-*-ms, --accept: another box's shape
        self.slowdown: Callable[[], float] = lambda: 1.0  # a throttled GPU of this server (launcher)
        self.profile = profile and spec.enabled
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.stats = Stats()
        self.hung = False
        self.before_first_forward: Callable[[], None] | None = None  # warmup fault hook
        self._wake = asyncio.Event()
        self._ids = itertools.count(1)
        self._deadline = time.monotonic()
        self._stalled = 0.0  # seconds this process fell behind beyond MAX_LAG_S (its host's load)
        self._forward_ct = 0
        self._decode_ct = 0
        self._last_log = self._clock()
        self._tokens_since_log = 0
        self._spec_acc = 0
        self._spec_fwd = 0
        self._task: asyncio.Task | None = None

    # --- requests --------------------------------------------------------------------------------
    def submit(self, prompt_tokens: int, max_new_tokens: int, *, ignore_eos: bool) -> Request:
        n = next(self._ids)
        natural = 24 + int(self._rng.expovariate(1 / 220.0))
        req = Request(
            rid=f"{self._rng.getrandbits(128):032x}",
            prompt_tokens=max(prompt_tokens, 1),
            max_new_tokens=max(max_new_tokens, 0),
            ignore_eos=ignore_eos,
            natural_len=natural,
            sampler=AcceptSampler(self.spec, self._rng, self.costs),
            words=random.Random(self._rng.getrandbits(64) ^ n),
        )
        self.stats.num_requests_total += 1
        self.waiting.append(req)
        self._wake.set()
        return req

    def abort(self, req: Request) -> None:
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)
        if req.finished is None:
            req.finished = Finish("abort")

    @property
    def queue_len(self) -> int:
        return len(self.waiting)

    @property
    def used_tokens(self) -> int:
        return sum(r.prompt_tokens + r.generated for r in self.running)

    def step_cost(self, bs: int) -> costmodel.StepCost:
        return costmodel.step_cost(
            self.spec,
            bs,
            nccl_missing=self.nccl_missing,
            cuda_graph=self.graph_used(bs),
            scale=self.cost_scale * self.decode_scale * self.slowdown(),
            costs=self.costs,
        )

    def graph_used(self, bs: int) -> bool:
        """Decode replays a captured graph only up to --cuda-graph-max-bs (larger batches run eager)."""
        return self.cuda_graph and bs <= self.cuda_graph_max_bs

    # --- loop ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _sleep_until(self, deadline: float) -> None:
        delay = deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    def _advance(self, duration_s: float) -> float:
        now = time.monotonic()
        self._stalled += max(0.0, now - MAX_LAG_S - self._deadline)
        self._deadline = max(self._deadline, now - MAX_LAG_S) + duration_s
        return self._deadline

    def _clock(self) -> float:
        """The modelled box's time: the wall clock, less what this process lost to a stall of the
        machine running it (a loaded CI host is not a slower GPU).  Idle time counts, as in SGLang."""
        return self._deadline - self._stalled

    async def _run(self) -> None:
        while True:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                self._deadline = time.monotonic()
            if self.waiting and len(self.running) < self.max_running:
                await self._prefill()
            elif self.running:
                await self._decode()

    async def _prefill(self) -> None:
        room = self.max_running - len(self.running)
        batch, self.waiting = self.waiting[:room], self.waiting[room:]
        new_tokens = sum(r.prompt_tokens for r in batch)
        duration = costmodel.prefill_ms(new_tokens, self.spec) * self.decode_scale * self.slowdown() / 1000.0
        self._log_prefill(batch, new_tokens, duration)
        if self.before_first_forward is not None:
            hook, self.before_first_forward = self.before_first_forward, None
            hook()
        if self.hung:
            await asyncio.Event().wait()  # a hung (or crashed) GPU: this forward never completes
        await self._sleep_until(self._advance(duration))
        self._forward_ct += 1
        now = time.monotonic()
        for req in batch:
            self.stats.prompt_tokens_total += req.prompt_tokens
            if req.finished is not None:  # aborted while queued
                continue
            req.first_token_at = now
            self.stats.ttft.observe(now - req.created)
            self._emit(req, req.take(1))
            if req.finished is None:
                self.running.append(req)

    async def _decode(self) -> None:
        bs = len(self.running)
        used = self.used_tokens
        cost = self.step_cost(bs)
        await self._sleep_until(self._advance(cost.total_ms / 1000.0))
        self._forward_ct += 1
        self._decode_ct += 1
        accepts = []
        for req in list(self.running):
            n = req.sampler.next() if self.spec.enabled else 1
            tokens = req.take(n)
            accepts.append(n)
            req.verify_ct += 1
            req.accepted += len(tokens)
            self._emit(req, tokens)
            if req.finished is not None:
                self.running.remove(req)
        self._on_step(accepts)
        if self.spec.enabled:
            self._spec_acc += sum(accepts)
            self._spec_fwd += len(accepts)
            self.stats.cum_accepted += sum(accepts)
            self.stats.cum_verify += len(accepts)
            self.stats.spec_verify_calls += 1
        if self.profile and self._decode_ct % PROFILE_INTERVAL == 0:
            acc = f"{accepts[0]}" if len(accepts) == 1 else f"{sum(accepts) / len(accepts):.2f}"
            jitter = 1.0 + 0.015 * (self._rng.random() - 0.5)
            self._log(
                f"[EAGLE3 profile] step={self._decode_ct} draft: {cost.draft_ms * jitter:.2f} ms, "
                f"Target verify: {cost.verify_ms * jitter:.2f} ms, accept: {acc}"
            )
        if self._decode_ct % self.decode_log_interval == 0:
            self._log_decode(bs, used)

    def _emit(self, req: Request, tokens: list[str]) -> None:
        if tokens:
            self._tokens_since_log += len(tokens)
            self.stats.generation_tokens_total += len(tokens)
            req.out.put_nowait(tokens)
        if req.finished is not None:
            self.stats.e2e.observe(time.monotonic() - req.created)
            req.out.put_nowait(req.finished)

    # --- what the scheduler reports (the vLLM engine overrides these) ----------------------------
    def _on_step(self, accepts: list[int]) -> None:
        """Acceptance lengths (incl. the bonus token) of one decode step, one per running request."""

    def _log_prefill(self, batch: list[Request], new_tokens: int, duration: float) -> None:
        usage = (self.used_tokens + new_tokens) / self.max_total_tokens
        self._log(
            self.shapes.prefill(
                new_seq=len(batch),
                new_token=new_tokens,
                usage=usage,
                running=len(self.running),
                queued=len(self.waiting),
                pending=sum(r.prompt_tokens for r in self.waiting),
                tput=new_tokens / duration,
            )
        )

    def _log_decode(self, bs: int, used: int) -> None:
        now = self._clock()  # the server's own figure: of the modelled GPUs, not of this host's stalls
        self.stats.last_gen_throughput = self._tokens_since_log / max(now - self._last_log, 1e-6)
        self._last_log, self._tokens_since_log = now, 0
        spec = None
        if self.spec.enabled and self._spec_fwd:
            accept_len = self._spec_acc / self._spec_fwd
            accept_rate = self.shapes.accept_rate(self._spec_acc, self._spec_fwd, self.spec.num_draft_tokens)
            self.stats.last_accept_len, self.stats.last_accept_rate = accept_len, accept_rate
            self._spec_acc = self._spec_fwd = 0
            spec = (accept_len, accept_rate)
        self._log(
            self.shapes.decode(
                running=bs,
                used=used,
                usage=used / self.max_total_tokens,
                spec=spec,
                graph=self.graph_used(bs),
                tput=self.stats.last_gen_throughput,
                queued=len(self.waiting),
            )
        )
