"""Sim-only options both engines share (SGLang and vLLM flavour): one parser group, one dataclass.

These switches are not flags of either real server; they shape the simulated box (where it logs,
how fast it starts, how fast and how steadily it decodes, which requests fail, which env its
workers lack).  Both `options.parse_args` (SGLang) and `vllm_args.parse_vllm_args` (vLLM) add them
with `add_common_flags` and read them back with `pop_common`, and both servers turn them into the
engine's scales with `engine_scales` and the sidecar's model record with `model_record`, so a flag
means the same on either engine.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from specdebug.sim.server.common import costmodel
from specdebug.sim.server.common.costmodel import SpecConfig


@dataclass
class CommonSimOptions:
    """The sim-only switches every engine understands (never printed as a server argument)."""

    log_file: str | None = None
    time_scale: float = 1.0  # multiplies startup durations
    drop_env: list[str] = field(default_factory=list)
    fail_requests: float = 0.0  # share of OpenAI generation requests answered with HTTP 500
    noise: float = 0.0  # run-to-run spread of the step cost (relative sd), drawn once per launch
    noise_seed: int | None = None  # None: a fresh draw every launch
    decode_scale: float = 1.0  # multiplies every forward (prefill, decode) step: <1 = a faster GPU
    slowdown_file: str | None = None  # a box-wide factor on step time read at launch (drift across launches)
    never_join: bool = False  # multi-node: this node's ranks stop before the rendezvous (the others wait)
    die_after_ready: float | None = None  # multi-node: this node's server is killed S s after it is up
    nccl_timeout_after: float | None = None  # multi-node: one rank's NCCL watchdog fires S s after it is up
    # the cost model's speculative shape (costmodel.Costs); None: the story's box
    draft_step_ms: float | None = None
    verify_base_ms: float | None = None
    verify_per_token_ms: float | None = None
    accept: list[float] | None = None


COMMON_FIELDS = tuple(CommonSimOptions.__dataclass_fields__)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def decode_scale_type(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError("must be between 0 and 100 (a factor on step time)")
    return value


def noise_type(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= costmodel.MAX_NOISE:
        raise argparse.ArgumentTypeError(f"must be between 0 and {costmodel.MAX_NOISE} (a relative spread)")
    return value


def fraction_type(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("must be between 0 and 1 (a share of the requests)")
    return value


def ms_type(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 10_000.0:
        raise argparse.ArgumentTypeError("must be between 0 and 10000 (ms)")
    return value


def accept_type(text: str) -> list[float]:
    """`0.8,0.7,0.6`: conditional acceptance of each depth (the last one repeats deeper)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or not all(0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError("a comma-separated list of fractions between 0 and 1")
    return values


def add_cost_flags(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """The cost model's speculative shape (costmodel.Costs), so a benchmark can run another box."""
    d = costmodel.DEFAULT_COSTS
    group.add_argument(
        "--draft-step-ms", type=ms_type, metavar="MS", help=f"one draft step (default {d.draft_step_ms})"
    )
    group.add_argument(
        "--verify-base-ms",
        type=ms_type,
        metavar="MS",
        help=f"verify, fixed part (default {d.verify_base_ms})",
    )
    group.add_argument(
        "--verify-per-token-ms",
        type=ms_type,
        metavar="MS",
        help=f"verify, per draft token (default {d.verify_per_token_ms})",
    )
    group.add_argument(
        "--accept",
        type=accept_type,
        metavar="Q1,Q2,...",
        help="conditional acceptance of each draft depth, topk 1 (the last repeats; default the story's)",
    )


def costs_of(opts: CommonSimOptions) -> costmodel.Costs:
    """The Costs these options set (the defaults where a flag is absent)."""
    d = costmodel.DEFAULT_COSTS
    return costmodel.Costs(
        draft_step_ms=d.draft_step_ms if opts.draft_step_ms is None else opts.draft_step_ms,
        verify_base_ms=d.verify_base_ms if opts.verify_base_ms is None else opts.verify_base_ms,
        verify_per_token_ms=d.verify_per_token_ms
        if opts.verify_per_token_ms is None
        else opts.verify_per_token_ms,
        accept=tuple(opts.accept) if opts.accept else d.accept,
    )


def add_common_flags(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """The shared sim-only flags, with their help (the engine's own sim-only flags are added beside)."""
    add_cluster_flags(group)
    add_cost_flags(group)
    group.add_argument(
        "--log-file", help="also append every log line to this file (+ sidecar <log-file>.sim.json)"
    )
    group.add_argument(
        "--time-scale", type=float, default=1.0, help="multiplies startup durations (1.0 = minutes)"
    )
    group.add_argument(
        "--drop-env",
        action="append",
        default=[],
        metavar="PREFIX",
        help="workers do not get vars with this prefix",
    )
    group.add_argument(
        "--fail-requests",
        type=fraction_type,
        default=0.0,
        metavar="FRACTION",
        help="answer this share (0..1) of /v1 completion requests with HTTP 500, spread evenly",
    )
    group.add_argument(
        "--noise",
        type=noise_type,
        default=0.0,
        metavar="F",
        help="run-to-run variation of the step cost: each launch scales it by N(1, F) (e.g. 0.03)",
    )
    group.add_argument(
        "--noise-seed", type=int, metavar="N", help="seed the --noise draw (default: fresh every launch)"
    )
    group.add_argument(
        "--slowdown-file",
        metavar="PATH",
        help="multiply step time by the number in PATH, read at launch (a box that slows down between launches)",
    )
    group.add_argument(
        "--decode-scale",
        type=decode_scale_type,
        default=1.0,
        metavar="F",
        help="multiplies every forward step's time (0.01 = a server 100x faster; to benchmark the client)",
    )


def seconds_type(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more (seconds)")
    return value


def add_cluster_flags(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """Fault switches of a multi-node server, for the node they are given to (both engines)."""
    group.add_argument(
        "--never-join",
        action="store_true",
        help="multi-node: this node's ranks stop before the rendezvous; the others wait at init until the timeout",
    )
    group.add_argument(
        "--die-after-ready",
        type=seconds_type,
        metavar="S",
        help="multi-node: S seconds after this node is up its whole server dies (SIGKILL); the others keep serving",
    )
    group.add_argument(
        "--nccl-timeout-after",
        type=seconds_type,
        metavar="S",
        help="multi-node: S seconds after this node is up its last rank's NCCL watchdog fires and the rank aborts",
    )


def pop_common(ns: dict[str, Any]) -> dict[str, Any]:
    """Take the shared options out of argparse's namespace dict (keyword arguments for the dataclass)."""
    out = {name: ns.pop(name) for name in COMMON_FIELDS}
    out["time_scale"] = max(0.0, out["time_scale"])
    return out


class EngineScales(TypedDict):
    cost_scale: float
    decode_scale: float
    costs: costmodel.Costs


def engine_scales(opts: CommonSimOptions) -> EngineScales:
    """The Engine keyword arguments these options set: this launch's --noise draw, --decode-scale and
    the cost model's shape."""
    return {
        "cost_scale": costmodel.launch_noise(opts.noise, opts.noise_seed) * slowdown(opts.slowdown_file),
        "decode_scale": opts.decode_scale,
        "costs": costs_of(opts),
    }


def slowdown(path: str | None) -> float:
    """The box-wide factor in `path` (1 when absent or unreadable; clipped to 0.1..10)."""
    if not path:
        return 1.0
    try:
        with open(path, encoding="utf-8") as f:
            return min(10.0, max(0.1, float(f.read().strip() or 1.0)))
    except (OSError, ValueError):
        return 1.0


class _CostedEngine(Protocol):
    cost_scale: float
    decode_scale: float
    costs: costmodel.Costs

    def step_cost(self, bs: int) -> costmodel.StepCost: ...


def model_record(
    engine: _CostedEngine, spec: SpecConfig, *, missing: int, cuda_graph: bool
) -> dict[str, Any]:
    """The sidecar's "model": what the cost model predicts for one stream, with this launch's scales."""
    one = engine.step_cost(1)
    return {
        "step_ms": one.total_ms,
        "draft_ms": one.draft_ms,
        "verify_ms": one.verify_ms,
        "expected_accept_length": costmodel.expected_accept_length(spec, engine.costs),
        "expected_single_stream_tok_s": costmodel.expected_rate(
            spec,
            nccl_missing=missing,
            cuda_graph=cuda_graph,
            scale=engine.cost_scale * engine.decode_scale,
            costs=engine.costs,
        ),
        "noise_factor": engine.cost_scale,
        "decode_scale": engine.decode_scale,
    }
