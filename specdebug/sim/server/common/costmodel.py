"""The sim's GPU cost model: how long one forward takes and how many tokens it yields.

Pure functions and constants only, so unit tests can check the calibration without a server.
See the package docstring (`specdebug.sim`) for the model in words and the calibration targets.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

# a stalled loop catches up at most this much, then time just moves on (engine, sched_frames)
MAX_LAG_S = 0.25

# --- calibration constants (the user's story: a 1T MoE on 8 PCIe GPUs) ---------------------------
TARGET_DECODE_MS = 1000.0 / 89.0  # one plain decode step, batch 1 -> 89 tok/s baseline
DRAFT_STEP_MS = 2.0  # one draft-model step (EAGLE head), batch 1
VERIFY_BASE_MS = 13.0  # target verify forward, fixed part
VERIFY_PER_DRAFT_TOKEN_MS = 1.0  # target verify, per draft token in the tree
# verify with all NCCL tuning vars missing is 30/19 slower (6 draft tokens: 19 ms -> 30 ms)
NCCL_MISSING_VERIFY_FACTOR = 30.0 / 19.0
NCCL_TUNING_VARS = ("NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_LEVEL")
NO_CUDA_GRAPH_FACTOR = 1.35  # --disable-cuda-graph: every decode/verify step is this much slower

# batch growth: per extra request in the batch, each part gets this much slower
DECODE_BATCH_GROWTH = 0.03
DRAFT_BATCH_GROWTH = 0.02
VERIFY_TOKEN_BATCH_GROWTH = 0.5  # the per-draft-token part grows fast: bs x draft tokens are verified

PREFILL_BASE_MS = 20.0
PREFILL_PER_TOKEN_MS = 0.05
DRAFT_EXTEND_MS = 2.0

# conditional acceptance of the draft token at depth i (1-based) given depth i-1 was accepted, topk 1
ACCEPT_TOPK1 = (0.56, 0.32 / 0.56, 0.55, 0.53, 0.51, 0.49, 0.47, 0.45)
# a wider tree (topk > 1) raises each depth's acceptance: q = 1 - (1 - a) ** (breadth ** GAMMA)
BREADTH_GAMMA = 0.1768

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")

# SM clocks of the simulated H200s (nvidia_smi shows them).  A thermally throttled GPU runs at
# THROTTLED_SM_MHZ; with tensor parallelism every step waits for the slowest rank at each
# all-reduce, so one throttled GPU of a server slows all of it by MAX/THROTTLED.  The story's fresh
# baseline on the throttled box: 88.8 tok/s x 1830/1980 = 82.
MAX_SM_MHZ = 1980
THROTTLED_SM_MHZ = 1830


@dataclass(frozen=True)
class Costs:
    """The cost model's speculative knobs (sim-only flags --draft-step-ms, --verify-base-ms,
    --verify-per-token-ms, --accept): the defaults are the story's box.  The advisor's benchmark
    (tests/perf/bench_spec_advice.py) runs other shapes with them: a cheap drafter, an expensive
    verify, acceptance that drops fast with depth."""

    draft_step_ms: float = DRAFT_STEP_MS
    verify_base_ms: float = VERIFY_BASE_MS
    verify_per_token_ms: float = VERIFY_PER_DRAFT_TOKEN_MS
    accept: tuple[float, ...] = ACCEPT_TOPK1  # conditional acceptance per depth (the last repeats)


DEFAULT_COSTS = Costs()


@dataclass(frozen=True)
class SpecConfig:
    """Speculative settings after SGLang's own adjustments (topk 1 -> draft tokens = steps + 1)."""

    algorithm: str | None = None
    num_steps: int = 0
    topk: int = 1
    num_draft_tokens: int = 0

    @property
    def enabled(self) -> bool:
        return self.algorithm is not None and self.algorithm.upper() in SPEC_ALGORITHMS


@dataclass(frozen=True)
class StepCost:
    """Duration of one decode iteration for the whole batch, split like a profiler would."""

    draft_ms: float
    verify_ms: float  # target verify (spec) or target decode (no spec)

    @property
    def total_ms(self) -> float:
        return self.draft_ms + self.verify_ms


def missing_nccl_vars(worker_envs: list[Mapping[str, str]]) -> int:
    """How many NCCL tuning vars are missing from at least one worker (0..3)."""
    if not worker_envs:
        return len(NCCL_TUNING_VARS)
    return sum(1 for name in NCCL_TUNING_VARS if any(not env.get(name) for env in worker_envs))


def verify_penalty(missing: int) -> float:
    """Verify slowdown factor: linear in the number of missing tuning vars, 30/19 when all are."""
    missing = max(0, min(missing, len(NCCL_TUNING_VARS)))
    return 1.0 + (NCCL_MISSING_VERIFY_FACTOR - 1.0) * missing / len(NCCL_TUNING_VARS)


def step_cost(
    spec: SpecConfig,
    batch_size: int = 1,
    *,
    nccl_missing: int = 0,
    cuda_graph: bool = True,
    scale: float = 1.0,
    costs: Costs = DEFAULT_COSTS,
) -> StepCost:
    """Time of one decode iteration with `batch_size` running requests (`scale`: this launch's noise)."""
    extra = max(batch_size, 1) - 1
    graph = (1.0 if cuda_graph else NO_CUDA_GRAPH_FACTOR) * scale
    if not spec.enabled:
        return StepCost(0.0, TARGET_DECODE_MS * (1 + DECODE_BATCH_GROWTH * extra) * graph)
    draft = spec.num_steps * costs.draft_step_ms * (1 + DRAFT_BATCH_GROWTH * extra) * graph
    verify = costs.verify_base_ms * (
        1 + DECODE_BATCH_GROWTH * extra
    ) + costs.verify_per_token_ms * spec.num_draft_tokens * (1 + VERIFY_TOKEN_BATCH_GROWTH * extra)
    return StepCost(draft, verify * verify_penalty(nccl_missing) * graph)


def prefill_ms(new_tokens: int, spec: SpecConfig) -> float:
    """Time of a prefill (extend) forward over `new_tokens` prompt tokens."""
    return PREFILL_BASE_MS + PREFILL_PER_TOKEN_MS * new_tokens + (DRAFT_EXTEND_MS if spec.enabled else 0.0)


def breadth(spec: SpecConfig) -> float:
    """Candidates per tree level the verify sees: limited by topk and by the draft-token budget."""
    if spec.num_steps <= 0:
        return 1.0
    return max(1.0, min(float(spec.topk), (spec.num_draft_tokens - 1) / spec.num_steps))


def conditional_acceptance(spec: SpecConfig, costs: Costs = DEFAULT_COSTS) -> list[float]:
    """P(depth i accepted | depth i-1 accepted) for i = 1..num_steps."""
    b = breadth(spec)
    out = []
    table = costs.accept or ACCEPT_TOPK1
    for i in range(spec.num_steps):
        a = table[min(i, len(table) - 1)]
        out.append(1.0 - (1.0 - a) ** (b**BREADTH_GAMMA))
    return out


def accept_length_distribution(spec: SpecConfig, costs: Costs = DEFAULT_COSTS) -> list[float]:
    """P(accept length = k) for k = 1..num_steps+1 (accept length counts the bonus token, like SGLang)."""
    if not spec.enabled:
        return [1.0]
    probs = []
    reach = 1.0  # P(accept length >= k)
    for q in conditional_acceptance(spec, costs):
        probs.append(reach * (1.0 - q))
        reach *= q
    probs.append(reach)
    return probs


def expected_accept_length(spec: SpecConfig, costs: Costs = DEFAULT_COSTS) -> float:
    return sum((k + 1) * p for k, p in enumerate(accept_length_distribution(spec, costs)))


def expected_rate(
    spec: SpecConfig,
    batch_size: int = 1,
    *,
    nccl_missing: int = 0,
    cuda_graph: bool = True,
    scale: float = 1.0,
    costs: Costs = DEFAULT_COSTS,
) -> float:
    """Modelled decode tokens/s of one stream (steady state, after the first token)."""
    cost = step_cost(
        spec, batch_size, nccl_missing=nccl_missing, cuda_graph=cuda_graph, scale=scale, costs=costs
    )
    return expected_accept_length(spec, costs) * 1000.0 / cost.total_ms


@dataclass(frozen=True)
class Throttle:
    """`--throttle-gpu N --throttle-after S`: GPU `gpu` throttles from unix time `at` on."""

    gpu: int | None
    at: float
    gpus: tuple[int, ...]  # the GPUs this server runs on

    def slowdown(self, now: float) -> float:
        """Step-time factor now: the clock ratio once a GPU of this server throttles, else 1."""
        if self.gpu is None or self.gpu not in self.gpus or now < self.at:
            return 1.0
        return MAX_SM_MHZ / THROTTLED_SM_MHZ


MAX_NOISE = 0.5  # a factor outside [0.5, 1.5] is not "noise" any more


def launch_noise(noise: float, seed: int | None = None) -> float:
    """Step-cost factor of one launch: a real box differs a little across restarts (clocks, placement,
    NCCL rings).  Drawn once per launch from N(1, noise) and clipped; `noise` 0 gives exactly 1.

    Unseeded by default, so every launch draws anew (that is the point: repeats must see it); a seed
    makes a run reproducible when a test or a demo asks for it."""
    if noise <= 0:
        return 1.0
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    return min(1.0 + MAX_NOISE, max(1.0 - MAX_NOISE, rng.gauss(1.0, noise)))


class AcceptSampler:
    """Per-request acceptance lengths drawn by smooth weighted round-robin with seeded start credits.

    Each step every length k earns credit P(k), the richest is chosen and pays 1.  The seeded start
    makes runs deterministic under --seed yet different per request; the low discrepancy means 40
    steps already realise the expected mean within ~3%, so a client timing a short stream measures
    the modelled rate.
    """

    def __init__(self, spec: SpecConfig, rng: random.Random, costs: Costs = DEFAULT_COSTS):
        self._p = accept_length_distribution(spec, costs)
        self._credit = [rng.random() for _ in self._p]

    def next(self) -> int:
        credit = self._credit
        best = 0
        for k, p in enumerate(self._p):
            credit[k] += p
            if credit[k] > credit[best]:
                best = k
        credit[best] -= 1.0
        return best + 1
