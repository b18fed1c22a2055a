"""SGLang's line shapes, process titles and launcher env by server version (the sim's --server-version).

Three eras, each with the source the shapes come from (shared/formats/current-sources.md and
serving-formats.md; the version boundaries are approximate, the index does not pin releases):

  legacy   < 0.5.0   `Decode batch. ... #queue-req: N, ` (trailing ", "), `Prefill batch. ... #queue-req: N, `,
                     rank prefix ` TP{t}` even with tp 1, `_set_envs_and_config` overwrites NCCL_CUMEM_ENABLE /
                     NCCL_NVLS_ENABLE always, CUDA_DEVICE_MAX_CONNECTIONS=4 (engine.py, older copies)
  classic  0.5.0 -   `Decode batch, ...` (scheduler_metrics_mixin @78ac30c2), classic capture lines
                     (`Capture cuda graph begin. This can take up to several minutes.`), warmup polls
                     /get_model_info; the env guard (`"NCCL_CUMEM_ENABLE" not in os.environ`) from
                     SGLANG_ENV_GUARD_SINCE (0.5.3); the sim's default version 0.5.4.post1
  current  >= 0.5.6  `Capture {target decode|target verify|draft decode|draft extend} CUDA graph begin.
                     backend=full, ...`, `KV Cache is allocated. dtype: ...`, `Engine startup timings (s): ...`,
                     `#pending-token` in prefill lines, warmup polls /model_info (@00eef542 observability/)
  >= 0.5.23          (read in the sglang-0.5.23 wheel, current-sources.md 3.1; the first release with each
                     change is not pinned, so they all start at 0.5.23): `server_args={...}` (a dict,
                     engine.py:311), `Init parallel begin.` / `Init parallel ends. elapsed=...`
                     (distributed/bootstrap.py:115, :190), `Load weight end.` without `dtype=`, no
                     `Using KV cache dtype` line, no overlap message (spec v2 keeps overlap on), and
                     `accept rate` = accepted drafts / (forwards x (draft tokens - 1)), bonus token left
                     out (metrics_reporter.py:968-985; older: accepted incl. bonus / (forwards x draft tokens))
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass

DEFAULT_VERSION = "0.5.23"  # the newest release read (2026-12)
CLASSIC_SINCE = (0, 5, 0)
ENV_GUARD_SINCE = (0, 5, 3)  # approximate
CURRENT_SINCE = (0, 5, 6)  # approximate
V0523_SINCE = (0, 5, 23)  # dict server_args, Init parallel, accept rate without the bonus token


def version_tuple(version: str) -> tuple[int, ...]:
    out = []
    for part in version.lstrip("v").split("."):
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        out.append(int(digits))
        if not part.isdigit():
            break
    return tuple(out) or (0,)


@dataclass(frozen=True)
class Shapes:
    """What one SGLang version prints and does."""

    version: str

    @property
    def v(self) -> tuple[int, ...]:
        return version_tuple(self.version)

    @property
    def era(self) -> str:
        if self.v < CLASSIC_SINCE:
            return "legacy"
        return "current" if self.v >= CURRENT_SINCE else "classic"

    @property
    def env_guard(self) -> bool:
        return self.v >= ENV_GUARD_SINCE

    @property
    def warmup_path(self) -> str:
        return "/model_info" if self.era == "current" else "/get_model_info"

    @property
    def newest(self) -> bool:
        """The 0.5.23 shapes (module docstring)."""
        return self.v >= V0523_SINCE

    def args_line(self, server: object) -> str:
        """`server_args=ServerArgs(...)` (dataclass repr) or, from 0.5.23, `server_args={...}` (a dict)."""
        if self.newest and is_dataclass(server) and not isinstance(server, type):
            return f"server_args={asdict(server)!r}"
        return f"server_args={server!r}"

    def init_begin(self) -> str:
        return "Init parallel begin." if self.newest else "Init torch distributed begin."

    def init_end(self, elapsed: float, mem_usage: float) -> str:
        if self.newest:
            return f"Init parallel ends. elapsed={elapsed:.2f} s"
        return f"Init torch distributed ends. elapsed={elapsed:.2f} s, mem usage={mem_usage:.2f} GB"

    def load_weight_end(self, elapsed: float, arch: str, avail: float, usage: float) -> str:
        dtype = "" if self.newest else "dtype=torch.bfloat16, "
        return (
            f"Load weight end. elapsed={elapsed:.2f} s, type={arch}, {dtype}"
            f"avail mem={avail:.2f} GB, mem usage={usage:.2f} GB."
        )

    @property
    def kv_dtype_line(self) -> str | None:
        """`Using KV cache dtype: ...` (not printed from 0.5.23)."""
        return None if self.newest else "Using KV cache dtype: torch.bfloat16"

    def accept_rate(self, accepted_incl_bonus: int, forwards: int, draft_tokens: int) -> float:
        """This version's `accept rate`: with or without the bonus token (module docstring)."""
        if forwards <= 0:
            return 0.0
        if self.newest:
            return (accepted_incl_bonus - forwards) / (forwards * max(draft_tokens - 1, 1))
        return accepted_incl_bonus / (forwards * max(draft_tokens, 1))

    def phase_lines(self) -> dict[str, str]:
        """The line (substring) that starts each sim phase in this version (sim.PHASE_LINES by version)."""
        current = self.era == "current"
        return {
            "init": self.init_begin(),
            "load_weights": "Load weight begin.",
            "kv_cache": self.kv_dtype_line or "KV Cache is allocated.",
            "cuda_graph": "CUDA graph begin. backend=" if current else "Capture cuda graph begin.",
            "http": "Started server process [",
            "warmup": f'"GET {self.warmup_path}',
            "ready": "The server is fired up and ready to roll!",
        }

    # --- periodic batch lines --------------------------------------------------------------------
    def prefill(
        self,
        *,
        new_seq: int,
        new_token: int,
        usage: float,
        running: int,
        queued: int,
        pending: int,
        tput: float,
    ) -> str:
        head = f"#new-seq: {new_seq}, #new-token: {new_token}, #cached-token: 0, token usage: {usage:.2f}, "
        if self.era == "legacy":
            return f"Prefill batch. {head}#running-req: {running}, #queue-req: {queued}, "
        tail = f"#running-req: {running}, #queue-req: {queued}, "
        if self.era == "current":
            tail += f"#pending-token: {pending}, "
        return f"Prefill batch, {head}{tail}cuda graph: False, input throughput (token/s): {tput:.2f}"

    def decode(
        self,
        *,
        running: int,
        used: int,
        usage: float,
        spec: tuple[float, float] | None,
        graph: bool,
        tput: float,
        queued: int,
    ) -> str:
        msg = f"#running-req: {running}, #token: {used}, token usage: {usage:.2f}, "
        if spec is not None:
            msg += f"accept len: {spec[0]:.2f}, " + (
                f"accept rate: {spec[1]:.2f}, " if self.era != "legacy" else ""
            )
        msg += f"cuda graph: {graph}, gen throughput (token/s): {tput:.2f}, #queue-req: {queued}"
        if self.era == "legacy":
            return f"Decode batch. {msg}, "
        return f"Decode batch, {msg}"


@dataclass(frozen=True)
class Rank:
    """One scheduler process: its ranks, its log prefix and its process title (run_scheduler_process)."""

    index: int
    tp: int
    pp: int = 0
    dp: int | None = None
    ep: int | None = None
    prefix: str = ""

    @property
    def title(self) -> str:
        return f"sglang::scheduler{self.prefix.replace(' ', '_')}"


def scheduler_ranks(
    tp_size: int,
    pp_size: int = 1,
    dp_size: int = 1,
    ep_size: int = 1,
    *,
    dp_attention: bool = False,
    legacy: bool = False,
) -> list[Rank]:
    """Every scheduler on this node with SGLang's prefix: " DP{d}" (dp) + " PP{p}" (pp > 1) + " TP{t}"
    (tp > 1; always in legacy versions) + " EP{e}" (ep > 1)."""
    ranks: list[Rank] = []
    groups = 1 if dp_attention or dp_size <= 1 else dp_size
    for group in range(groups):
        for pp in range(max(pp_size, 1)):
            for tp in range(max(tp_size, 1)):
                dp = None
                if dp_attention and dp_size > 1:
                    dp = tp // max(tp_size // dp_size, 1)
                elif dp_size > 1:
                    dp = group
                ep = tp // max(tp_size // ep_size, 1) if ep_size > 1 else None
                prefix = f" DP{dp}" if dp is not None else ""
                prefix += f" PP{pp}" if pp_size > 1 else ""
                prefix += f" TP{tp}" if tp_size > 1 or legacy else ""
                prefix += f" EP{ep}" if ep is not None else ""
                ranks.append(Rank(len(ranks), tp, pp, dp, ep, prefix))
    return ranks


def set_envs_and_config(
    environ: os._Environ | dict, shapes: Shapes, *, enable_symm_mem: bool, enable_nccl_nvls: bool
) -> None:
    """SGLang's `_set_envs_and_config` in the launcher, as this version does it (before spawning)."""
    if shapes.env_guard:
        if "NCCL_CUMEM_ENABLE" not in environ or enable_symm_mem:
            environ["NCCL_CUMEM_ENABLE"] = str(int(enable_symm_mem))
        if "NCCL_NVLS_ENABLE" not in environ or enable_nccl_nvls or enable_symm_mem:
            environ["NCCL_NVLS_ENABLE"] = str(int(enable_nccl_nvls or enable_symm_mem))
        environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    else:
        environ["NCCL_CUMEM_ENABLE"] = str(int(enable_symm_mem))
        if not enable_symm_mem:
            environ["NCCL_NVLS_ENABLE"] = str(int(enable_nccl_nvls))
        environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "4"
    environ["CUDA_MODULE_LOADING"] = "AUTO"


def startup_timings(parts: Mapping[str, float], graphs: Mapping[str, float]) -> str:
    """`Engine startup timings (s): load_weight=..., ..., cuda_graph={target_verify=..., ...}, ...` (newest)."""
    body = ", ".join(f"{k}={v:.2f}" for k, v in parts.items() if k != "tokenizer_e2e")
    graph = ", ".join(f"{k}={v:.2f}" for k, v in graphs.items())
    tail = f", tokenizer_e2e={parts['tokenizer_e2e']:.2f}" if "tokenizer_e2e" in parts else ""
    return f"Engine startup timings (s): {body}, cuda_graph={{{graph}}}{tail}"
