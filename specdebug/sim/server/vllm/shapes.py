"""vLLM's startup line shapes by --server-version (the sim's vLLM mode), where 0.33.0 differs.

Read from the vllm-0.33.0 wheel (shared/formats/current-sources.md 3.2; docs/current-sources-notes.md):
without DP the engine core is `EngineCore` (v1/engine/utils.py:289, `EngineCore_DP{i}` only with DP),
`Model loading took %s GiB memory and %.6f seconds` (gpu_model_runner.py:5089), one KV line
`GPU KV cache size: N tokens, Maximum concurrency for M tokens per request: x.xx` (kv_cache_utils.py:1148),
the rank line with PCP / ETP / EPLB ranks (distributed/parallel_state.py:2386) and `Supported tasks: %s`
(launchers/api_server/entry.py:135).  Older versions keep the shapes the sim printed before (0.10-0.11).
"""

from __future__ import annotations

from specdebug.sim.server.sglang.shapes import version_tuple

V033_SINCE = (0, 33)  # the first release with each change is not pinned: all start at 0.33


def newest(version: str) -> bool:
    return version_tuple(version) >= V033_SINCE


def engine_core_name(version: str) -> str:
    v = version_tuple(version)
    if v >= V033_SINCE:
        return "EngineCore"
    return "EngineCore_DP0" if v >= (0, 10) else "EngineCore_0"


def model_loading(version: str, gib: float, seconds: float) -> tuple[str, str]:
    if newest(version):
        return (
            "gpu_model_runner.py:5089",
            f"Model loading took {gib:.4f} GiB memory and {seconds:.6f} seconds",
        )
    return "gpu_model_runner.py:2653", f"Model loading took {gib:.4f} GiB and {seconds:.6f} seconds"


def kv_lines(version: str, tokens: int, max_len: int) -> list[tuple[str, str]]:
    size = f"GPU KV cache size: {tokens:,} tokens"
    conc = f"Maximum concurrency for {max_len:,} tokens per request: {tokens / max_len:.2f}x"
    if newest(version):
        return [("kv_cache_utils.py:1148", f"{size}, {conc}")]
    return [("kv_cache_utils.py:1087", size), ("kv_cache_utils.py:1091", conc)]


def rank_line(version: str, rank: int, world: int, ep: int) -> tuple[str, str]:
    head = f"rank {rank} in world size {world} is assigned as DP rank 0, PP rank 0, "
    if newest(version):
        return (
            "parallel_state.py:2386",
            f"{head}PCP rank 0, TP rank {rank}, ETP rank 0, EP rank {ep}, EPLB rank 0",
        )
    return "parallel_state.py:1208", f"{head}TP rank {rank}, EP rank {ep}"


def tasks_line(version: str) -> tuple[str, str]:
    if newest(version):
        return "entry.py:135", "Supported tasks: ['generate']"
    return "api_server.py:1634", "Supported_tasks: ['generate']"
