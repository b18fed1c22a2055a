"""vLLM's SpeculativeConfig for the sim: a pydantic dataclass, so unknown keys fail as they do in vLLM.

Apart from sim.server.vllm.args because the engine core and every spawned worker import args (for
VllmConfig) and would pay about 0.3 s of CPU each for pydantic; only the launcher validates.
"""

from __future__ import annotations

from pydantic import ConfigDict, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from specdebug.sim.server.vllm.args import SPEC_METHODS


@pydantic_dataclass(config=ConfigDict(extra="forbid"))
class SpeculativeConfig:
    """The keys vLLM's SpeculativeConfig takes (a subset; unknown keys fail as they do there)."""

    num_speculative_tokens: int | None = None
    model: str | None = None
    method: str | None = None
    draft_tensor_parallel_size: int | None = None
    quantization: str | None = None
    max_model_len: int | None = None
    revision: str | None = None
    code_revision: str | None = None
    disable_by_batch_size: int | None = None
    disable_padded_drafter_batch: bool = False
    prompt_lookup_max: int | None = None
    prompt_lookup_min: int | None = None
    speculative_token_tree: str | None = None
    enforce_eager: bool | None = None

    def __post_init__(self) -> None:
        if self.method is None and self.model is not None:
            name = self.model.lower()
            self.method = "eagle3" if "eagle3" in name else "eagle" if "eagle" in name else "draft_model"
        if self.method is None:
            raise ValueError("num_speculative_tokens was provided but without speculative model.")
        if self.method not in SPEC_METHODS:
            raise ValueError(f"Unsupported speculative method: '{self.method}'")
        if self.method == "ngram":
            self.prompt_lookup_min = self.prompt_lookup_min or self.prompt_lookup_max or 5
            self.prompt_lookup_max = self.prompt_lookup_max or self.prompt_lookup_min
        elif self.method in ("eagle", "eagle3", "draft_model", "medusa", "mlp_speculator") and not self.model:
            raise ValueError(f"speculative model is required for method '{self.method}'")
        if self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens must be provided with speculative model.")
        if self.num_speculative_tokens < 1:
            raise ValueError("Expected num_speculative_tokens to be greater than zero")


SIM_MAX_POSITION_EMBEDDINGS = 131072  # the sim's models' config.json (the max_model_len it assumes)


@pydantic_dataclass
class ModelConfig:
    """vLLM's ModelConfig check of --max-model-len against the model's own limit (config/model.py
    `_get_and_verify_max_len`, 0.32.0 and 0.34.0): a ValueError inside a pydantic dataclass, so the
    user sees `ValidationError: 1 validation error for ModelConfig` and the cause on the next line."""

    model: str
    max_model_len: int | None = None

    @model_validator(mode="after")
    def _verify_max_len(self) -> ModelConfig:
        derived = float(SIM_MAX_POSITION_EMBEDDINGS)
        if self.max_model_len is not None and self.max_model_len > derived:
            msg = (
                f"User-specified max_model_len ({self.max_model_len}) is greater than the derived "
                f"max_model_len (max_position_embeddings={derived} or model_max_length=None in model's "
                "config.json)."
            )
            warning = (
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative "
                "position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model "
                "uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
                "array out-of-bounds error."
            )
            raise ValueError(
                f"{msg} To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. {warning}"
            )
        return self
