"""Built-in streaming client: token counting (per-chunk usage, final usage only, multi-token chunks),
latency stats, errors, progress and cancellation, against a tiny local SSE server."""

from __future__ import annotations

import asyncio

import pytest

from specdebug.core.bench.builtin import BuiltinParams, RequestRecord, make_prompt, run_builtin, summarize
from specdebug.core.bench.models import LatencyStats, percentile
from tests.fixtures.bench.fake_sse import FakeServerConfig, FakeSSEServer


def test_percentiles_like_numpy() -> None:
    xs = [float(x) for x in range(1, 11)]
    assert percentile(xs, 50) == 5.5
    assert percentile(xs, 90) == pytest.approx(9.1)
    assert percentile([3.0], 99) == 3.0
    s = LatencyStats.from_samples([2.0, 1.0])
    assert (s.mean, s.p50, s.max) == (1.5, 1.5, 2.0)
    assert LatencyStats.from_samples([]).is_empty()


def test_prompt_is_seeded_and_sized() -> None:
    assert make_prompt(50, 1, 0) == make_prompt(50, 1, 0)
    assert make_prompt(50, 1, 0) != make_prompt(50, 1, 1)
    assert len(make_prompt(50, 1, 0).split()) == 50


def test_summarize_synthetic_records() -> None:
    # one request: ttft 100 ms, then 4 chunks each 50 ms apart carrying 1,3,1,3 tokens (speculative bursts)
    r = RequestRecord(
        start=0.0,
        end=0.35,
        ok=True,
        chunk_times=[0.1, 0.15, 0.2, 0.25, 0.3],
        chunk_tokens=[1, 3, 1, 3, 2],
        usage_completion=10,
    )
    res = summarize(
        [r, RequestRecord(ok=False, error="HTTP 500: boom")], 0.5, BuiltinParams(requests=2, output_len=10)
    )
    assert res.successful_requests == 1 and res.failed_requests == 1
    assert res.total_output_tokens == 10
    assert res.output_tok_s == pytest.approx(20.0)
    assert res.decode_tok_s == pytest.approx(9 / 0.2)  # tokens after the first chunk / first->last chunk
    assert res.ttft_ms.mean == pytest.approx(100.0)
    # gaps of 50 ms split over each chunk's tokens: 3 x 16.7, 1 x 50, 3 x 16.7, 2 x 25
    assert res.itl_ms.max == pytest.approx(50.0)
    assert res.itl_ms.p50 == pytest.approx(50 / 3)
    assert res.tpot_ms.mean == pytest.approx(250 / 9)
    assert res.errors == ["HTTP 500: boom"] and any("1 of 2 requests failed" in w for w in res.warnings)
    assert res.status == "done"


def test_summarize_all_failed() -> None:
    res = summarize([RequestRecord(ok=False, error="x")], 1.0, BuiltinParams(requests=1))
    assert res.status == "failed" and res.output_tok_s is None


@pytest.mark.parametrize(
    ("cfg", "label"),
    [
        (
            FakeServerConfig(step_s=0.002, tokens_per_chunk=[1, 3, 2], continuous_usage=True),
            "per-chunk usage",
        ),
        (FakeServerConfig(step_s=0.002, tokens_per_chunk=[1], continuous_usage=False), "final usage only"),
        (FakeServerConfig(step_s=0.002, continuous_usage=False, final_usage=False), "no usage at all"),
    ],
)
async def test_client_counts_tokens(cfg, label) -> None:
    seen = []
    async with FakeSSEServer(cfg) as srv:
        res = await run_builtin(
            srv.url, BuiltinParams(requests=3, output_len=30, input_len=8), progress=seen.append
        )
    assert res.status == "done", label
    assert res.total_output_tokens == 90, label
    assert res.successful_requests == 3 and res.failed_requests == 0
    assert res.config.backend == "fake-model"
    assert res.output_tok_s and res.decode_tok_s and res.decode_tok_s >= res.output_tok_s * 0.9
    for stats in (res.ttft_ms, res.itl_ms):
        assert (
            stats.p50 is not None
            and stats.p90 is not None
            and stats.p99 is not None
            and stats.mean is not None
        )
    assert res.total_input_tokens == 24
    assert seen[0].phase == "warmup" and seen[-1].phase == "collecting"
    assert max(p.done_requests for p in seen) == 3


async def test_concurrency_and_failures() -> None:
    async with FakeSSEServer(FakeServerConfig(step_s=0.002, fail_every=3)) as srv:
        res = await run_builtin(
            srv.url, BuiltinParams(requests=6, concurrency=3, output_len=10, input_len=4, warmup_requests=0)
        )
    assert res.successful_requests == 4 and res.failed_requests == 2
    assert res.errors[0].startswith("HTTP 500")
    assert res.peak_concurrent_requests == 3


async def test_unreachable_server_fails_cleanly() -> None:
    async with FakeSSEServer() as srv:
        url = srv.url
    res = await run_builtin(url, BuiltinParams(requests=2, output_len=5, warmup_requests=0, model="m"))
    assert res.status == "failed" and res.failed_requests == 2 and "Connect" in res.errors[0]


async def test_cancel_stops_the_run() -> None:
    async with FakeSSEServer(FakeServerConfig(step_s=0.01)) as srv:
        task = asyncio.create_task(run_builtin(srv.url, BuiltinParams(requests=50, output_len=1000)))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_params_from_spec_and_overrides() -> None:
    class Spec:
        requests = 16
        concurrency = 2
        output_len = 128
        command = ["x"]

    p = BuiltinParams.from_spec(Spec(), requests=3, concurrency=None)
    assert (p.requests, p.concurrency, p.output_len) == (3, 2, 128)
