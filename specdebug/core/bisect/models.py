"""The shapes bisection speaks in: options, measurements (journaled), judged rows, the typed events
the pane and the verb consume, and the final result (the verb's JSON object).

Everything a front end shows comes from these events; nothing reports by callback.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from specdebug.core.model import Model

# journal event kinds
START_EVENT = "bisect_start"
TRIAL_EVENT = "bisect_trial"
JUDGEMENT_EVENT = "bisect_judgement"
RESULT_EVENT = "bisect_result"
LAUNCH_EVENT = "bisect_launch"  # a candidate's server started (its pid: what a resume may have to stop)
STOP_EVENT = "bisect_stop"


class Judged(StrEnum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"  # could not be judged: failed start (--failed-start skip), rejected args, bench failed
    UNCLEAR = "unclear"  # measured, but inside the noise band even after the repeats


class Phase(StrEnum):
    PORT = "port"  # stopping whatever of ours holds the port
    LAUNCH = "launch"
    READY = "ready"
    GATE = "gate"
    BENCH = "bench"
    STOP = "stop"


class Role(StrEnum):
    GOOD = "good"  # the good end
    BAD = "bad"  # the bad end
    CANDIDATE = "candidate"  # the good profile with some of the bad side's knobs
    DRIFT = "drift"  # the good end measured again at the end (repeats > 1)


class Status(StrEnum):
    OK = "ok"
    FAILED_START = "failed_start"
    INVALID = "invalid"  # the server rejected its arguments at startup
    GATED = "gated"  # the verify gate judged it bad; no benchmark spent
    BENCH_FAILED = "bench_failed"


class BisectOptions(Model):
    """What the user asked for; None bench fields come from the good profile's [bench] table."""

    metric: str = "output_tok_s"
    threshold: float | None = None
    min_gap_pct: float = Field(default=5.0, ge=0)
    repeats: int = Field(default=4, ge=1)  # the most measurements of one config (ends: at least 2)
    gate: str | None = None  # e.g. "verify_ms<=25"
    groups: list[str] = Field(default_factory=list)  # globs: matching knobs move together
    failed_start: Literal["bad", "skip"] = "skip"
    requests: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    input_len: int | None = None
    hand: bool = False  # every candidate waits for a judgement by hand (g/b/s)
    interleave: bool = False  # a candidate's repeats alternate with an end; linear drift corrected
    max_age_s: float | None = Field(
        default=900.0, ge=0
    )  # journaled measurements older than this are measured again


class Settings(Model):
    """The bench settings a measurement was taken with: part of the cache key."""

    requests: int
    output_len: int
    concurrency: int
    input_len: int

    def key(self) -> str:
        return f"requests={self.requests},output_len={self.output_len},concurrency={self.concurrency},input_len={self.input_len}"


class Unit(Model):
    """What the search moves: one knob, or a --group of knobs that move together."""

    name: str
    knobs: list[str]


class KnobRow(Model):
    name: str
    kind: str
    good: str | None = None  # None: absent on that side (journals written before issue 39 left it out)
    bad: str | None = None
    unit: str


class GateCheck(Model):
    expr: str
    name: str
    value: float | None = None
    passed: bool | None = None  # None: the metric never showed up in the log
    probed: bool = False  # a short request had to make the server print it


class Measurement(Model):
    """One launch of one config, journaled (fsync) as it finishes: the trial cache's unit."""

    bisect: str
    config: str  # the profile name launched
    fingerprint: str
    settings: str
    role: Role
    applied: list[str] = Field(default_factory=list)  # knob names set to the bad side's values
    status: Status = Status.OK
    metrics: dict[str, float] = Field(default_factory=dict)
    gate: GateCheck | None = None
    reason: str | None = None
    startup_s: float | None = None
    bench_s: float | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    gpu_before: list[dict[str, Any]] = Field(default_factory=list)
    gpu_after: list[dict[str, Any]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    # the benchmark's CPU contention (core.bench.cpuwait): summed over the bisection's runs in one warning
    box_cpu_wait: float | None = None
    client_cpu_wait: float | None = None


class TrialRow(Model):
    """One config as judged in this run (the trial table's row; ends are rows 0 and 1)."""

    index: int
    role: Role
    config: str
    applied: list[str]
    fingerprint: str
    metric: float | None = None  # mean of the samples
    samples: list[float] = Field(default_factory=list)
    judged: Judged | None = None
    cached: bool = False  # judged without launching anything in this run
    gated: bool = False
    launches: int = 0  # launches this run made for it
    reason: str | None = None
    share: float | None = None  # of the good-bad gap
    low: float | None = None
    high: float | None = None
    gate_value: float | None = None


class Drift(Model):
    before: float
    after: float
    beyond_noise: bool
    gpu_before: list[dict[str, Any]] = Field(default_factory=list)
    gpu_after: list[dict[str, Any]] = Field(default_factory=list)


class Evidence(Model):
    """Why the ends can (or cannot) be told apart, and what every judgement was measured against."""

    metric: str
    higher_is_better: bool
    good_samples: list[float] = Field(default_factory=list)
    bad_samples: list[float] = Field(default_factory=list)
    good_mean: float | None = None
    bad_mean: float | None = None
    threshold: float | None = None
    threshold_source: Literal["midpoint", "given"] = "midpoint"
    spread: float | None = None  # run-to-run sd estimated from the ends' repeats (None with repeats 1)
    band: float | None = None  # +- around the threshold where one measurement is ambiguous
    gap_pct: float | None = None
    distinguishable: bool = False
    why: str = ""
    drift: Drift | None = None
    scale: str = ""  # what the shares are of: 1/metric for throughput (time per token), else the metric
    noise_dof: int = 0  # degrees of freedom behind the noise estimate (0: a floor, not measured)


class Effect(Model):
    """A knob's (or a set's) effect as a share of the good-bad gap, low/high at 99 % from the noise."""

    share: float | None
    low: float | None = None
    high: float | None = None
    basis: str = ""  # how it was measured: alone | together | inferred | not measured: why
    runs: int = 0
    # what the measurement says: hurts (significantly slower, a culprit's effect) | no effect (within the
    # noise, or under 5 % of the gap) | helps (significantly faster) | "" (not measured)
    direction: Literal["hurts", "no effect", "helps", ""] = ""


class SetEffect(Effect):
    knobs: list[str] = Field(default_factory=list)


class Result(Model):
    """The verb's JSON object (issue 13) plus the evidence behind it."""

    verdict: Literal[
        "found", "several", "interaction", "cannot-tell", "no-difference", "inconclusive", "aborted"
    ]
    culprits: list[str] = Field(default_factory=list)
    effects: dict[str, Effect] = Field(default_factory=dict)  # every knob measured alone (or inferred)
    explained: float | None = None  # share of the gap the culprits explain together (confirmation launch)
    sets: list[SetEffect] = Field(default_factory=list)  # every set of knobs measured together
    # knobs whose effect together is said but not resolved among them (the launch budget ran out): no
    # culprit is named among them; their share is the set's in `sets` and the notes
    unresolved: list[str] = Field(default_factory=list)
    confirmed: bool = False  # the confirmation launch closed the gap within the noise
    metric_used: str = ""  # the metric judged: --metric, or "start" when the bad end fails to start
    knobs: list[KnobRow] = Field(default_factory=list)
    trials: list[TrialRow] = Field(default_factory=list)
    launches: int = 0
    naive_launches: int = 0
    duration_s: float = 0.0
    warnings: list[str] = Field(default_factory=list)
    search: str | None = None  # split (halves, then one at a time), ddmin
    notes: list[str] = Field(default_factory=list)
    evidence: Evidence | None = None
    bisect: str = ""
    good: dict[str, Any] = Field(default_factory=dict)
    bad: dict[str, Any] = Field(default_factory=dict)
    settings: str = ""


# -- events (the async iterator's items) ---------------------------------------------------------


class Planned(Model):
    type: Literal["planned"] = "planned"
    bisect: str
    knobs: list[KnobRow]
    units: list[Unit]
    naive_launches: int
    settings: str
    good: str
    bad: str


class TrialStarted(Model):
    type: Literal["trial_started"] = "trial_started"
    index: int
    role: Role
    config: str
    applied: list[str]
    fingerprint: str
    sample: int  # 1-based: which measurement of this config


class TrialProgress(Model):
    type: Literal["progress"] = "progress"
    index: int
    phase: Phase
    detail: str = ""
    fraction: float | None = None  # of this phase, when knowable
    elapsed_s: float = 0.0


class TrialDone(Model):
    type: Literal["trial"] = "trial"
    row: TrialRow


class EndsJudged(Model):
    type: Literal["ends"] = "ends"
    evidence: Evidence


class KnobStates(Model):
    type: Literal["knobs"] = "knobs"
    stage: str
    states: dict[str, Literal["suspect", "cleared", "culprit", "unresolved"]]


class Estimate(Model):
    """Launches left: the likely count (no repeat needed, nothing unexpected) and the most the search
    can still take (every question repeated up to --repeats, every fallback): a range, not a guess."""

    type: Literal["estimate"] = "estimate"
    launches_left: int
    seconds_left: float | None = None
    launches_max: int | None = None

    def text(self) -> str:
        """ "3 to 40 launch(es) left (likely 3, ~900 s)": the most the search can take, not a guess."""
        eta = f", ~{self.seconds_left:.0f} s" if self.seconds_left else ""
        if self.launches_max is None:  # no bound known
            return f"at least {self.launches_left} launch(es) left{eta}"
        if self.launches_max <= self.launches_left:
            return f"{self.launches_left} launch(es) left{eta}"
        return (
            f"{self.launches_left} to {self.launches_max} launch(es) left (likely {self.launches_left}{eta})"
        )


class AwaitJudgement(Model):
    type: Literal["await"] = "await"
    index: int
    metric: float | None
    suggestion: Judged | None


class Paused(Model):
    type: Literal["paused"] = "paused"
    paused: bool = True


class Finished(Model):
    type: Literal["finished"] = "finished"
    result: Result


Event = Annotated[
    Planned
    | TrialStarted
    | TrialProgress
    | TrialDone
    | EndsJudged
    | KnobStates
    | Estimate
    | AwaitJudgement
    | Paused
    | Finished,
    Field(discriminator="type"),
]
