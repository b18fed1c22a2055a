"""The vLLM-mode sim prints each version's shapes and the vLLM pack reads them all (issue 21: the fidelity
tests run against an older release, 0.33.0 and the current default, 0.34.0; current-sources.md 3.2 and
"Newest releases": 0.34's load line is `Loading model from scratch...`, no `Loading drafter model...`)."""

from __future__ import annotations

import httpx
import pytest

from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.scan import scan_file
from specdebug.sim.box.local import start_local_sim
from specdebug.sim.server.vllm.args import DEFAULT_VERSION

SPEC = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B", "num_speculative_tokens": 2}'
ARGS = [
    "--engine",
    "vllm",
    "serve",
    "meta-llama/Llama-3.1-70B-Instruct",
    "-tp",
    "2",
    "--speculative-config",
    SPEC,
]


@pytest.mark.parametrize("version", ["0.11.2", "0.33.0", "0.34.0"])
def test_startup_lines_by_version(version: str, tmp_path) -> None:
    log = tmp_path / "vllm.log"
    with start_local_sim([*ARGS, "--server-version", version], log_file=log, time_scale=0.01,
                         extra_env={"VLLM_LOG_STATS_INTERVAL": "1"}) as sim:  # fmt: skip
        sim.wait_ready(60)
        httpx.post(
            f"{sim.url}/v1/completions",
            json={"prompt": "x", "max_tokens": 300, "ignore_eos": True},
            timeout=30,
        )
        text = sim.log_text()
    newest = version in ("0.33.0", "0.34.0")
    v034 = version == "0.34.0"
    assert ("Loading model from scratch..." in text) == v034 and ("Starting to load model " in text) != v034
    assert ("Loading drafter model..." in text) != v034  # eagle3 here: the old runners print it
    assert ("(EngineCore pid=" in text) == newest and ("(EngineCore_DP0 pid=" in text) == (not newest)
    kv = [ln for ln in text.splitlines() if "GPU KV cache size:" in ln]
    assert kv and (", Maximum concurrency for 131,072 tokens per request: " in kv[0]) == newest
    assert ("GiB memory and " in text) == newest and ("Supported tasks: ['generate']" in text) == newest
    assert ("PCP rank 0, TP rank 1, ETP rank 0, EP rank 0, EPLB rank 0" in text) == newest
    phases = [m.phase for m in map(LogParser("vllm").parse, text.splitlines()) if m is not None and m.phase]
    for phase in ("args", "engine_init", "load_weights", "load_weights_done", "kv_cache", "ready"):
        assert phase in phases, (version, phase)
    res = scan_file(log, pack="auto")
    assert res.pack == "vllm" and res.metrics["mean_acceptance_length"]["n"] >= 1
    assert "draft_accept_rate" in res.metrics  # specdebug's own rate: the same definition as vLLM's


def test_the_default_is_the_current_release() -> None:
    assert DEFAULT_VERSION == "0.34.0"
