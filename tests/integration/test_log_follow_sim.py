"""End to end against the simulated SGLang box behind the loopback sshd: follow its log from the
start while it boots and serves, and check the numbers against a scan of the finished file."""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import pytest

from specdebug.core.logs.events import LogEvent, LogMatch
from specdebug.core.logs.matches import follow_matches
from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.scan import Analyzer, scan_remote
from tests.sshd_harness import free_port

pytestmark = pytest.mark.slow


async def test_follow_sim_log_live(remote, tmp_path) -> None:
    port = free_port()
    log = str(tmp_path / "sim.log")
    argv = [
        sys.executable, "-m", "specdebug.sim", "--tp", "2", "--port", str(port), "--log-file", log,
        "--time-scale", "0.01", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3", "--decode-log-interval", "5",
    ]  # fmt: skip
    an = Analyzer(LogParser("auto", from_start=True))
    matches: list[LogMatch] = []
    ready = asyncio.Event()

    async def follow() -> None:
        async for item in follow_matches(remote, log, an.parser, from_start=True):
            if isinstance(item, LogEvent):
                continue
            an.add(item)
            matches.append(item)
            if item.event == "ready":
                ready.set()

    follower = asyncio.ensure_future(follow())  # starts before the file exists: waits for it
    sim = remote.stream(argv, env={"SPT_NOENV": "1", "NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL"}, stderr=True)

    async def drain() -> None:
        async for _ in sim:
            pass

    runner = asyncio.ensure_future(drain())
    fwd = await remote.forward_local_port(port)
    try:
        await asyncio.wait_for(ready.wait(), 60)
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            body = {"prompt": "x", "max_tokens": 120, "ignore_eos": True}
            r = await client.post(f"http://127.0.0.1:{fwd.local_port}/v1/completions", json=body)
            assert r.status_code == 200
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            post = [m for m in matches if m.event == "decode_batch" and not m.warmup]
            if len(post) >= 5:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    finally:
        await fwd.close()
        await sim.aclose()
        runner.cancel()
        follower.cancel()
    assert an.parser.pack_name == "sglang"
    phases = [m.phase for m in matches if m.event == "startup"]
    assert phases.index("load_weights") < phases.index("cuda_graph")
    assert any(m.event == "nccl_env" and m.fields["name"] == "NCCL_PROTO" and m.fields["value"] == "LL"
               for m in matches)  # fmt: skip
    decode = [m for m in matches if m.event == "decode_batch"]
    assert any(m.warmup for m in decode) or any(m.warmup for m in matches if m.event == "prefill_batch")
    live = an.store.summary()
    assert live["accept_len"]["n"] >= 5 and 1.0 <= live["accept_len"]["mean"] <= 3.0
    # after the fact, the same file gives the same numbers
    res = await scan_remote(remote, log)
    assert res.events["decode_batch"] >= len(decode)
    assert res.metrics["accept_len"]["n"] >= live["accept_len"]["n"]
    assert res.events.get("ready") == 1
