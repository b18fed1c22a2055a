"""The sim's vLLM mode streams as vLLM does (vllm/entrypoints/openai/completion/serving.py
completion_stream_generator): one `data:` event per engine step, a speculative step's accepted + 1
tokens in one chunk, and finish_reason on the chunk that carries the last tokens (no empty chunk of
its own); the usage chunk and [DONE] follow.  The old sim sent finish_reason in an extra chunk with
empty text, a shape real vLLM never sends.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from specdebug.sim.box.local import start_local_sim

SPEC = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B", "num_speculative_tokens": 2}'
ARGS = ["--engine", "vllm", "serve", "m", "-tp", "1", "--speculative-config", SPEC]


def test_one_chunk_per_step_and_the_finish_on_the_last_tokens(tmp_path: Path) -> None:
    body = {
        "model": "m",
        "prompt": "a b c",
        "max_tokens": 60,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    with start_local_sim(ARGS, log_file=tmp_path / "sim.log", time_scale=0.02) as sim:
        sim.wait_ready(90)
        with httpx.Client(base_url=sim.url, trust_env=False, timeout=60) as client:
            resp = client.post("/v1/completions", json=body)
    events = [line[5:].strip() for line in resp.text.splitlines() if line.startswith("data:")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    *steps, usage = chunks
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 60
    running = [c["usage"]["completion_tokens"] for c in steps]
    per_step = [b - a for a, b in zip([0, *running], running, strict=False)]
    assert per_step[0] == 1  # the prefill's token
    assert all(1 <= n <= 3 for n in per_step) and max(per_step) == 3, per_step  # accepted + 1 <= 3
    assert all(c["choices"][0]["text"] for c in steps), steps  # no empty chunk
    assert [c["choices"][0]["finish_reason"] for c in steps] == [None] * (len(steps) - 1) + ["length"]
