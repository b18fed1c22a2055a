"""SGLang's own handling of the speculative flags (server_args.py `_handle_speculative_decoding`).

What the sim reproduces, with the source (shared/formats/current-sources.md "SGLang spec arg handling";
server_args.py index ids 8356329, 53577495653, speculative hook ids 56740725599, 57482987149):
  * NEXTN is turned into EAGLE (the EAGLE path runs; DeepSeek-style models use the target as draft).
  * --max-running-requests unset -> 48, with SGLang's warning.
  * EAGLE/EAGLE3/STANDALONE without --speculative-num-steps: topk and draft tokens must be unset too
    (an AssertionError otherwise), then all three come from `_auto_choose_speculative_params`:
    STANDALONE (3, 1, 4); DeepseekV3/V2, GptOss, BailingMoe (3, 1, 4); Llama, Grok and others (5, 4, 8).
  * topk 1 forces draft tokens = steps + 1 (with SGLang's warning).
  * NGRAM: topk = --speculative-ngram-max-bfs-breadth (10), draft tokens 12 by default (warning),
    steps = draft tokens // topk.
"""

from __future__ import annotations

from specdebug.sim.server.common.costmodel import SpecConfig

MAX_RUNNING_WARNING = (
    "Max running requests is reset to 48 for speculative decoding. "
    "You can override this by explicitly setting --max-running-requests."
)
OVERLAP_WARNING = "Overlap scheduler is disabled because of using eagle speculative decoding."
TOPK1_ADJUST_WARNING = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
)
NGRAM_DRAFT_WARNING = (
    "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
    "You can override this by explicitly setting --speculative-num-draft-tokens."
)
NGRAM_MAX_BFS_BREADTH = 10
SMALL_TREE_ARCHS = (
    "DeepseekV3ForCausalLM",
    "DeepseekV2ForCausalLM",
    "GptOssForCausalLM",
    "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM",
)


def model_arch(model_path: str) -> str:
    """The architecture the sim pretends the model has (from its name; default DeepSeek-V3 like Kimi K2)."""
    name = model_path.lower()
    for key, arch in (
        ("llama", "LlamaForCausalLM"),
        ("grok", "Grok1ForCausalLM"),
        ("qwen", "Qwen2ForCausalLM"),
        ("gpt-oss", "GptOssForCausalLM"),
    ):
        if key in name:
            return arch
    return "DeepseekV3ForCausalLM"


def auto_choose_speculative_params(algorithm: str, arch: str) -> tuple[int, int, int]:
    """(num_steps, topk, num_draft_tokens) as `_auto_choose_speculative_params` picks them."""
    if algorithm == "STANDALONE" or arch in SMALL_TREE_ARCHS:
        return (3, 1, 4)
    return (5, 4, 8)


def resolve_spec(server, warnings: list[str], *, spec_v2: bool = False) -> SpecConfig:
    """Apply SGLang's adjustments to `server` (a ServerArgs) in place; returns the cost model's view.

    spec_v2 (0.5.23): overlap stays on with EAGLE and nothing is printed (speculative_hook.py:1098-1102)."""
    algo = server.speculative_algorithm
    if algo in (None, "NONE"):
        server.speculative_algorithm = None
        return SpecConfig()
    arch = model_arch(server.model_path)
    if algo == "NEXTN":
        algo = server.speculative_algorithm = "EAGLE"  # NEXTN shares the implementation of EAGLE
        if arch.startswith("Deepseek") and server.speculative_draft_model_path is None:
            server.speculative_draft_model_path = server.model_path  # the MTP layers are in the target
    if server.max_running_requests is None:
        server.max_running_requests = 48
        warnings.append(MAX_RUNNING_WARNING)
    if algo == "NGRAM":
        server.speculative_eagle_topk = NGRAM_MAX_BFS_BREADTH
        if server.speculative_num_draft_tokens is None:
            server.speculative_num_draft_tokens = 12
            warnings.append(NGRAM_DRAFT_WARNING)
        if server.speculative_num_steps is None:
            server.speculative_num_steps = (
                server.speculative_num_draft_tokens // server.speculative_eagle_topk
            )
    else:
        if algo in ("EAGLE", "EAGLE3") and not spec_v2:
            warnings.insert(0, OVERLAP_WARNING)
            server.disable_overlap_schedule = True
        if server.speculative_num_steps is None:
            if server.speculative_eagle_topk is not None or server.speculative_num_draft_tokens is not None:
                raise AssertionError(
                    "--speculative-eagle-topk / --speculative-num-draft-tokens need --speculative-num-steps "
                    "(SGLang: assert speculative_eagle_topk is None and speculative_num_draft_tokens is None)"
                )
            steps, topk, draft = auto_choose_speculative_params(algo, arch)
            server.speculative_num_steps = steps
            server.speculative_eagle_topk = topk
            server.speculative_num_draft_tokens = draft
        if server.speculative_eagle_topk is None:
            server.speculative_eagle_topk = 1
        if server.speculative_num_draft_tokens is None:
            server.speculative_num_draft_tokens = server.speculative_num_steps + 1
        if algo in ("EAGLE", "EAGLE3") and server.speculative_draft_model_path is None:
            server.speculative_draft_model_path = f"{server.model_path}-{algo}-draft"
        if (
            server.speculative_eagle_topk == 1
            and server.speculative_num_draft_tokens != server.speculative_num_steps + 1
        ):
            warnings.append(TOPK1_ADJUST_WARNING)
            server.speculative_num_draft_tokens = server.speculative_num_steps + 1
    return SpecConfig(
        algorithm=algo,
        num_steps=server.speculative_num_steps,
        topk=server.speculative_eagle_topk,
        num_draft_tokens=server.speculative_num_draft_tokens,
    )
