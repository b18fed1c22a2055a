"""--decode-scale: the sim's forward steps scale, so the client can be benchmarked against a fast server."""

from __future__ import annotations

import asyncio
import time

import pytest

from specdebug.sim.server.common.costmodel import SpecConfig
from specdebug.sim.server.common.engine import Engine, Finish
from specdebug.sim.server.sglang.options import parse_args

SPEC = SpecConfig("EAGLE3", num_steps=2, topk=1, num_draft_tokens=3)
BASE = ["--model-path", "m"]


def engine(**kw) -> Engine:
    return Engine(
        SPEC,
        log=lambda m: None,
        seed=1,
        max_total_tokens=100000,
        max_running=8,
        decode_log_interval=5,
        cuda_graph=True,
        **kw,
    )


def test_flag_parses_and_defaults_to_one() -> None:
    assert parse_args(BASE).sim.decode_scale == 1.0
    assert parse_args([*BASE, "--decode-scale", "0.01"]).sim.decode_scale == 0.01


@pytest.mark.parametrize("bad", ["-1", "fast", "1000"])
def test_bad_value_is_a_usage_error(bad: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args([*BASE, "--decode-scale", bad])
    assert exc.value.code == 2
    assert "--decode-scale" in capsys.readouterr().err


def test_step_cost_scales_with_the_flag() -> None:
    plain, fast = engine(), engine(decode_scale=0.01)
    for bs in (1, 8):
        assert fast.step_cost(bs).total_ms == pytest.approx(plain.step_cost(bs).total_ms * 0.01)


async def test_fast_engine_generates_far_beyond_the_default_ceiling() -> None:
    """1000 tokens at ~89 tok/s take seconds; with 1000x faster steps they take a tiny fraction of that."""
    e = engine(decode_scale=0.001)
    modelled: list[float] = []  # each forward's modelled duration: the engine's own time, not the test's
    advance = e._advance
    e._advance = lambda duration_s: (modelled.append(duration_s), advance(duration_s))[1]  # type: ignore[method-assign]
    e.start()
    try:
        req = e.submit(7, 1000, ignore_eos=True)
        t0 = time.monotonic()
        n = 0
        while True:
            item = await asyncio.wait_for(req.out.get(), 60)
            if isinstance(item, Finish):
                break
            n += len(item)
        took = time.monotonic() - t0
    finally:
        await e.stop()
    assert n == 1000
    unscaled_s = 1000 / 3.0 * e.step_cost(1).total_ms / 0.001 / 1000  # accept length <= 3 tokens/step
    print(f"1000 tokens in {took:.2f} s wall; modelled {sum(modelled):.4f} s; unscaled {unscaled_s:.1f} s")
    # not bound by the default steps: the forwards it scheduled model a thousandth of them (a loaded
    # machine stretches the wall time, not what the engine asks to wait)
    assert sum(modelled) < unscaled_s / 100
