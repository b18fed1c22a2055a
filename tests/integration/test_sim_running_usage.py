"""The sim's running usage (continuous_usage_stats) counts the tokens already sent, as the servers do.

The engine runs ahead of the stream on a fast sim (--decode-scale 0.001): reporting its own count in
every chunk made the built-in client see 282 tokens for 256 asked and refuse the stream."""

from __future__ import annotations

from pathlib import Path

from specdebug.core.bench.builtin import BuiltinParams, run_builtin
from specdebug.sim.box.local import start_local_sim


async def test_a_fast_sims_stream_counts_exactly_the_tokens_asked(tmp_path: Path) -> None:
    argv = ["--model-path", "m", "--tp", "1", "--decode-scale", "0.001"]
    with start_local_sim(argv, log_file=tmp_path / "sim.log", time_scale=0.02) as sim:
        sim.wait_ready(60)
        params = BuiltinParams(
            requests=1, concurrency=1, output_len=256, input_len=8, warmup_requests=0, model="m"
        )
        res = await run_builtin(sim.url, params)
    assert res.status == "done", res.errors
    assert res.total_output_tokens == 256
