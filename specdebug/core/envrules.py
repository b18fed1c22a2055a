"""What each server does to its workers' environment, per engine and version, with the source of each rule.

Why a rule table: an env check that says "the server replaced your value" must be right about the
server.  Current SGLang sets NCCL_CUMEM_ENABLE / NCCL_NVLS_ENABLE only when the user has not exported
them (or when --enable-symm-mem / --enable-nccl-nvls force them); older SGLang overwrote them always;
vLLM went from forcing NCCL_CUMEM_ENABLE=0 to respecting an explicit value to not touching it.  So a
rule resolves, for one server (kind, version, argv), to an `Effect`:

  overwrites  the user's value never reaches the workers (the server sets its own)
  default     the server sets a value only when the user did not export one (an exported value is kept)
  maybe       the version decides and is unknown: an exported value may or may not have been kept

Version boundaries marked "approximate" are not pinned to a release by the sources we have (the index
holds server files from both sides of the change, without their release numbers); versions compare
numerically on their leading digits ("0.5.4.post1" -> (0, 5, 4)).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Effect = Literal["overwrites", "default", "maybe"]

# SGLang engine.py `_set_envs_and_config`: the `"NAME" not in os.environ` guard (current copies, index
# ids 51822085073 / 193236366) vs unconditional assignment (older copies, ids 38009857313 / 196295075).
SGLANG_ENV_GUARD_SINCE = (0, 5, 3)  # approximate
SGLANG_GUARD_SRC = "SGLang engine.py _set_envs_and_config (current: `not in os.environ` guard)"
SGLANG_OLD_SRC = "SGLang engine.py _set_envs_and_config (older versions: unconditional)"
# vLLM: PR #19105 (June 2025, ~0.9.1) respects an explicit NCCL_CUMEM_ENABLE in env_override.py;
# PR #24141 (~0.11.0) removed the override; before, worker_base.py forced 0 inside each worker.
VLLM_CUMEM_RESPECTED_SINCE = (0, 9, 1)  # approximate (release of PR #19105)
VLLM_CUMEM_DROPPED_SINCE = (0, 11, 0)  # approximate (release of PR #24141)


@dataclass(frozen=True)
class EnvRule:
    """One variable the server sets for itself, resolved for one server."""

    name: str
    effect: Effect
    value: str | None  # what the server sets (None: depends)
    note: str  # one sentence for the user, naming the source and version

    @property
    def overwrites(self) -> bool:
        return self.effect == "overwrites"


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """'0.5.4.post1' -> (0, 5, 4); 'v0.11.0rc2' -> (0, 11, 0); None when no digits lead."""
    if not text:
        return None
    m = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _has(argv: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def sglang_rules(version: str | None, argv: Sequence[str] = ()) -> dict[str, EnvRule]:
    """SGLang's launcher env handling (engine.py `_set_envs_and_config`), for this version and argv."""
    v = parse_version(version)
    symm = _has(argv, "--enable-symm-mem")
    nvls = _has(argv, "--enable-nccl-nvls") or symm
    rules = {
        "CUDA_DEVICE_MAX_CONNECTIONS": EnvRule(
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "overwrites",
            "8" if v is None or v >= SGLANG_ENV_GUARD_SINCE else "4",
            "SGLang sets CUDA_DEVICE_MAX_CONNECTIONS itself before spawning workers "
            "(8 in current engine.py, 4 in older versions)",
        ),
        "CUDA_MODULE_LOADING": EnvRule(
            "CUDA_MODULE_LOADING",
            "overwrites",
            "AUTO",
            "SGLang sets CUDA_MODULE_LOADING=AUTO before spawning workers (engine.py, every version)",
        ),
    }
    for name, forced, flag in (
        ("NCCL_CUMEM_ENABLE", symm, "--enable-symm-mem"),
        ("NCCL_NVLS_ENABLE", nvls, "--enable-nccl-nvls/--enable-symm-mem"),
    ):
        if forced:
            rules[name] = EnvRule(
                name, "overwrites", "1", f"SGLang sets {name}=1 for {flag} ({SGLANG_GUARD_SRC})"
            )
        elif v is not None and v < SGLANG_ENV_GUARD_SINCE:
            rules[name] = EnvRule(
                name,
                "overwrites",
                "0",
                f"SGLang {version} sets {name}=0 before spawning workers ({SGLANG_OLD_SRC})",
            )
        elif v is not None:
            rules[name] = EnvRule(
                name,
                "default",
                "0",
                f"SGLang {version} sets {name}=0 only when it is not exported ({SGLANG_GUARD_SRC})",
            )
        else:
            rules[name] = EnvRule(
                name,
                "maybe",
                "0",
                f"current SGLang keeps an exported {name} and sets 0 only when it is unset; older SGLang "
                f"(before ~{'.'.join(map(str, SGLANG_ENV_GUARD_SINCE))}) overwrote it with 0; server version unknown",
            )
    return rules


def vllm_rules(version: str | None, argv: Sequence[str] = ()) -> dict[str, EnvRule]:
    """vLLM's NCCL_CUMEM_ENABLE handling (set inside each process, so /proc/PID/environ never shows it)."""
    v = parse_version(version)
    name = "NCCL_CUMEM_ENABLE"
    if v is not None and v >= VLLM_CUMEM_DROPPED_SINCE:
        return {}
    if v is not None and v >= VLLM_CUMEM_RESPECTED_SINCE:
        note = f"vLLM {version} sets {name}=0 only when it is not exported (env_override.py, PR #19105)"
        return {name: EnvRule(name, "default", "0", note)}
    if v is not None:
        note = f"vLLM {version} forces {name}=0 inside each worker (worker_base.py; invisible in environ)"
        return {name: EnvRule(name, "overwrites", "0", note)}
    note = (
        f"older vLLM (before ~0.9.1) forced {name}=0 inside each worker (invisible in environ); 0.9.1-0.10 "
        "keep an exported value (PR #19105); 0.11+ leave it alone (PR #24141); server version unknown"
    )
    return {name: EnvRule(name, "maybe", "0", note)}


def server_env_rules(
    kind: str | None, version: str | None = None, argv: Sequence[str] = ()
) -> dict[str, EnvRule]:
    """The rules for one server; {} for unknown kinds."""
    if kind == "sglang":
        return sglang_rules(version, argv)
    if kind == "vllm":
        return vllm_rules(version, argv)
    return {}
