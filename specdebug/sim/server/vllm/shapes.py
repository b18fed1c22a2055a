"""vLLM's startup line shapes by --server-version (the sim's vLLM mode), where 0.32, 0.33 and 0.34 differ.

Read from the vllm-0.33.0 wheel (shared/formats/current-sources.md 3.2; docs/current-sources-notes.md):
without DP the engine core is `EngineCore` (v1/engine/utils.py:289, `EngineCore_DP{i}` only with DP),
`Model loading took %s GiB memory and %.6f seconds` (gpu_model_runner.py:5089), one KV line
`GPU KV cache size: N tokens, Maximum concurrency for M tokens per request: x.xx` (kv_cache_utils.py:1148),
the rank line with PCP / ETP / EPLB ranks (distributed/parallel_state.py:2386) and `Supported tasks: %s`
(launchers/api_server/entry.py:135).  Older versions keep the shapes the sim printed before (0.10-0.11).

0.34.0 (read from its wheel; current-sources.md "Newest releases"): the old GPU model runner is gone, so
the load starts with `Loading model from scratch...` (v1/worker/gpu/model_runner.py:412, once per
worker) instead of `Starting to load model M...`, and neither `Loading drafter model...` nor the
CUDA-graph memory profiling lines are printed.  `init engine (...) took %.2f s` ends in `s` from
0.32 on (v1/engine/core.py:403 in 0.32.0, :459 in 0.34.0; `seconds` before).  Uncaught exceptions:
from 0.32 on vLLM's `(APIServer pid=N)` prefix is a log-record field (logger.py `_FORMAT`), so a
traceback the interpreter prints has no prefix (seen on the real 0.32.0 CPU build).
"""

from __future__ import annotations

from specdebug.sim.server.sglang.shapes import version_tuple

V033_SINCE = (0, 33)  # the first release with each change is not pinned: all start at 0.33
V034_SINCE = (0, 34)  # the V2 model runner is the only one
RECORD_PREFIX_SINCE = (0, 32)  # read in 0.32.0; the first release with it is not pinned


def newest(version: str) -> bool:
    return version_tuple(version) >= V033_SINCE


def engine_core_name(version: str) -> str:
    v = version_tuple(version)
    if v >= V033_SINCE:
        return "EngineCore"
    return "EngineCore_DP0" if v >= (0, 10) else "EngineCore_0"


def model_loading(version: str, gib: float, seconds: float) -> tuple[str, str]:
    if version_tuple(version) >= V034_SINCE:
        return "model_runner.py:442", f"Model loading took {gib:.4f} GiB memory and {seconds:.6f} seconds"
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


def load_start(version: str, model: str) -> tuple[str, str]:
    """The line that opens weight loading (the `load_weights` phase)."""
    if version_tuple(version) >= V034_SINCE:
        return "model_runner.py:412", "Loading model from scratch..."
    return "gpu_model_runner.py:2602", f"Starting to load model {model}..."


def drafter_line(version: str) -> tuple[str, str] | None:
    """`Loading drafter model...` (EAGLE-style drafts), gone with the old runner in 0.34."""
    if version_tuple(version) >= V034_SINCE:
        return None
    return "eagle.py:1020", "Loading drafter model..."


def init_engine_line(version: str, seconds: float) -> tuple[str, str]:
    head = "init engine (profile, create kv cache, warmup model) took"
    if version_tuple(version) >= RECORD_PREFIX_SINCE:
        return (
            "core.py:459" if version_tuple(version) >= V034_SINCE else "core.py:403"
        ), f"{head} {seconds:.2f} s"
    return "core.py:210", f"{head} {seconds:.2f} seconds"


def traceback_prefixed(version: str) -> bool:
    """Does an uncaught traceback carry `(APIServer pid=N) `?  Only where decorate_logs wrapped
    stdout/stderr (before the prefix became a log-record field)."""
    return version_tuple(version) < RECORD_PREFIX_SINCE
