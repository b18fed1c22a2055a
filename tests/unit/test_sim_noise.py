"""The sim's --noise: a per-launch step-cost factor (unseeded unless asked), harmless flags stay harmless."""

from __future__ import annotations

import statistics

import pytest

from specdebug.sim.server.common import costmodel
from specdebug.sim.server.common.costmodel import SpecConfig, expected_rate, launch_noise, step_cost
from specdebug.sim.server.sglang.options import parse_args

SPEC = SpecConfig("EAGLE3", 2, 1, 3)


def test_no_noise_is_exactly_one_and_scale_multiplies_the_step() -> None:
    assert launch_noise(0.0) == 1.0 and launch_noise(0.0, seed=3) == 1.0
    base = step_cost(SPEC)
    slow = step_cost(SPEC, scale=1.1)
    assert slow.total_ms == pytest.approx(base.total_ms * 1.1)
    assert expected_rate(SPEC, scale=1.1) == pytest.approx(expected_rate(SPEC) / 1.1)


def test_noise_is_fresh_per_launch_unless_seeded() -> None:
    draws = [launch_noise(0.03) for _ in range(400)]
    assert len(set(draws)) > 390  # every launch draws anew
    assert statistics.mean(draws) == pytest.approx(1.0, abs=0.01)
    assert statistics.stdev(draws) == pytest.approx(0.03, rel=0.25)
    assert launch_noise(0.03, seed=7) == launch_noise(0.03, seed=7) != launch_noise(0.03, seed=8)
    assert all(0.5 <= launch_noise(0.5) <= 1.5 for _ in range(200))


def test_noise_flags_parse_and_are_checked() -> None:
    cfg = parse_args(["--noise", "0.03", "--noise-seed", "5"])
    assert cfg.sim.noise == 0.03 and cfg.sim.noise_seed == 5
    assert parse_args([]).sim.noise == 0.0 and parse_args([]).sim.noise_seed is None
    with pytest.raises(SystemExit):
        parse_args(["--noise", "2"])
    assert "noise" not in repr(cfg.server)  # sim-only: never in the server_args line


HARMLESS = [
    ["--schedule-policy", "lpm"],
    ["--watchdog-timeout", "600"],
    ["--max-prefill-tokens", "8192"],
    ["--chunked-prefill-size", "4096"],
    ["--attention-backend", "fa3"],
    ["--log-requests"],
    ["--kv-cache-dtype", "fp8_e5m2"],
    ["--served-model-name", "kimi"],
    ["--trust-remote-code"],
    ["--mem-fraction-static", "0.85"],
    ["--cuda-graph-max-bs", "16"],
]


@pytest.mark.parametrize("flags", HARMLESS, ids=lambda f: f[0])
def test_harmless_sglang_flags_leave_the_modelled_rate_alone(flags: list[str]) -> None:
    spec = [
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
    ]
    a, b = parse_args(spec), parse_args([*spec, *flags])
    rate = lambda c: costmodel.expected_rate(c.spec, cuda_graph=not c.server.disable_cuda_graph)  # noqa: E731
    assert b.spec == a.spec and rate(b) == rate(a)
