"""The sim's batching engine and the worker-side line builders, without processes or HTTP."""

from __future__ import annotations

import asyncio
import re
import time
import traceback

import pytest

from specdebug.engines.primitives import parse_nccl_env_line
from specdebug.engines.sglang_pack import SGLANG
from specdebug.sim.box.local import decode_rate
from specdebug.sim.server.common import faults
from specdebug.sim.server.common.costmodel import SpecConfig, expected_rate
from specdebug.sim.server.common.engine import Engine, Finish, count_tokens
from specdebug.sim.server.sglang.options import parse_args
from specdebug.sim.server.sglang.worker import MemoryPlan, cuda_graph_batch_sizes, nccl_init_lines

SPEC = SpecConfig("EAGLE3", num_steps=2, topk=1, num_draft_tokens=3)


def make_engine(lines: list[str], spec: SpecConfig = SPEC, **kw) -> Engine:
    opts = dict(seed=1, max_total_tokens=100000, max_running=48, decode_log_interval=5, cuda_graph=True)
    opts.update(kw)
    return Engine(spec, log=lines.append, **opts)


async def collect(req) -> tuple[list[tuple[float, int]], Finish]:
    got = []
    while True:
        item = await req.out.get()
        if isinstance(item, Finish):
            return got, item
        got.append((time.monotonic(), len(item)))


async def test_engine_lines_parse_with_the_sglang_pack() -> None:
    lines: list[str] = []
    engine = make_engine(lines, profile=True)
    engine.start()
    try:
        a = engine.submit(7, 30, ignore_eos=True)
        b = engine.submit(9, 30, ignore_eos=True)
        (ga, fa), (gb, fb) = await asyncio.gather(collect(a), collect(b))
    finally:
        await engine.stop()
    assert sum(n for _, n in ga) == 30 and fa.reason == "length" and fb.reason == "length"
    prefill = [ln for ln in lines if ln.startswith("Prefill batch")]
    assert prefill and "#new-seq: 2, #new-token: 16" in prefill[0]
    decode = [SGLANG.parse_message(ln) for ln in lines if ln.startswith("Decode batch")]
    assert decode and all(p is not None and p.event == "decode_batch" for p in decode)
    m = decode[0].metrics
    assert 1.0 <= m["accept_len"] <= 3.0 and 0 < m["accept_rate"] <= 1.0 and m["running_req"] == 2
    assert "cuda graph: True" in lines[1] or any("cuda graph: True" in ln for ln in lines)
    prof = [ln for ln in lines if ln.startswith("[EAGLE3 profile]")]
    assert prof and re.search(r"Target verify: \d+\.\d\d ms", prof[0])
    assert engine.stats.avg_spec_accept_length > 1.0


async def test_eos_and_abort() -> None:
    engine = make_engine([], spec=SpecConfig())
    engine.start()
    try:
        req = engine.submit(3, 10**6, ignore_eos=False)  # stops at its natural length
        got, fin = await asyncio.wait_for(collect(req), 30)
        assert fin.reason == "stop" and fin.matched_stop is not None
        assert sum(n for _, n in got) == req.natural_len
        req = engine.submit(3, 1000, ignore_eos=True)
        await req.out.get()
        engine.abort(req)
        assert req not in engine.running and req.finished.reason == "abort"
    finally:
        await engine.stop()


async def test_single_stream_rate_follows_the_model() -> None:
    engine = make_engine([], spec=SpecConfig())
    engine.start()
    try:
        got, _ = await collect(engine.submit(3, 60, ignore_eos=True))
    finally:
        await engine.stop()
    rate = (sum(n for _, n in got) - got[0][1]) / (got[-1][0] - got[0][0])
    assert rate == pytest.approx(expected_rate(SpecConfig()), rel=0.05)


def test_count_tokens_matches_sglang_warmup() -> None:
    assert count_tokens("The capital city of France is") == 7


def test_nccl_lines_per_var_with_integer_dot() -> None:
    env = {"NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL", "NCCL_IB_DISABLE": "1", "OTHER": "x"}
    lines = nccl_init_lines(env, rank=1, nranks=2, pid=4242, tid=4243, host="box")
    parsed = [p for p in map(parse_nccl_env_line, lines) if p]
    assert {(p["name"], p["value"], p["pid"], p["rank"]) for p in parsed} == {
        ("NCCL_PROTO", "LL", 4242, 1),
        ("NCCL_IB_DISABLE", "1", 4242, 1),
    }
    assert "box:4242:4243 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1." in lines
    assert any(ln.endswith("Init COMPLETE") for ln in lines)
    assert not any("NCCL version" in ln for ln in lines)  # rank 0 prints the version


def test_memory_plan_and_graph_sizes() -> None:
    plan = MemoryPlan.for_config(parse_args(["--tp", "8"]))
    assert plan.tokens > 10000 and plan.final > 0
    assert MemoryPlan.for_config(parse_args(["--mem-fraction-static", "0.7"])).tokens == 0
    assert cuda_graph_batch_sizes(16) == [1, 2, 4, 8, 12, 16]


@pytest.mark.parametrize(
    ("call", "last"),
    [
        (
            lambda: faults.load_model("m/x.safetensors"),
            "safetensors_rust.SafetensorError: Error while deserializing",
        ),
        (
            lambda: faults.init_memory_pool(79.0, 0.88),
            "RuntimeError: Not enough memory. Please try to increase",
        ),
        (
            lambda: faults.init_cuda_graphs(0, 79.0, 1.0, oom=True),
            "Exception: Capture cuda graph failed: CUDA out",
        ),
        (lambda: faults.event_loop_normal(), "torch.AcceleratorError: CUDA error: an illegal memory access"),
    ],
)
def test_fault_tracebacks_read_like_the_real_ones(call, last) -> None:
    try:
        call()
    except Exception:
        text = traceback.format_exc()
    assert text.startswith("Traceback (most recent call last):")
    assert last in text
    if "Capture cuda graph failed" in last:
        assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in text
        assert "During handling of the above exception, another exception occurred:" in text
        assert "4. disable CUDA graph by --disable-cuda-graph." in text


def test_batches_beyond_cuda_graph_max_bs_run_eager() -> None:
    engine = make_engine([], cuda_graph_max_bs=2)
    assert engine.graph_used(2) and not engine.graph_used(3)
    assert engine.step_cost(3).total_ms > engine.step_cost(2).total_ms * 1.3


def test_decode_rate_is_the_slope_so_one_late_chunk_barely_moves_it() -> None:
    """A client on a loaded machine gets one chunk 80 ms late: first-to-last would read 8 % slow."""
    even = [(i / 94.0, 1) for i in range(97)]
    assert decode_rate(even) == pytest.approx(94.0, rel=1e-9)
    late_last = [*even[:-1], (even[-1][0] + 0.08, 1)]
    first_to_last = (len(late_last) - 1) / (late_last[-1][0] - late_last[0][0])
    assert first_to_last < 94.0 * 0.93
    assert decode_rate(late_last) == pytest.approx(94.0, rel=0.02)
    assert decode_rate(even[:1]) == 0.0
