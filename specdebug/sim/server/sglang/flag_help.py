"""Help text of the sim's SGLang flags (`specdebug sim --help`), kept apart from the parser.

The flags mean what they mean in `python -m sglang.launch_server`; the text says what the sim
does with each (many are accepted and only echoed in the server_args line, as on a real box).
"""

from __future__ import annotations

import argparse

ECHOED = "accepted and shown in server_args, as SGLang does"

HELP: dict[str, str] = {
    "model_path": "model name or path (only named in logs and /get_model_info)",
    "tokenizer_path": f"tokenizer path (default: the model path); {ECHOED}",
    "tokenizer_mode": ECHOED,
    "load_format": ECHOED,
    "trust_remote_code": ECHOED,
    "dtype": ECHOED,
    "kv_cache_dtype": "KV cache dtype named in the kv_cache phase line",
    "quantization": ECHOED,
    "context_length": "maximum context length reported by /get_model_info",
    "device": ECHOED,
    "served_model_name": "model name the OpenAI-compatible API reports",
    "host": "address the HTTP server binds (default %(default)s)",
    "port": "HTTP port (default %(default)s)",
    "mem_fraction_static": "share of GPU memory for weights + KV cache (default 0.88); too small or "
    "too large fails like SGLang",
    "max_running_requests": "requests decoded together at most (continuous batching)",
    "max_total_tokens": "KV cache size in tokens (default: from the memory plan)",
    "chunked_prefill_size": ECHOED,
    "max_prefill_tokens": ECHOED,
    "schedule_policy": ECHOED,
    "cuda_graph_max_bs": "largest batch run with cuda graphs; larger batches are 1.35x slower",
    "tp_size": "tensor parallel ranks: one scheduler process per rank (and GPU)",
    "dp_size": ECHOED,
    "ep_size": ECHOED,
    "pp_size": ECHOED,
    "dist_init_addr": "multi-node: HOST:PORT of node 0's rendezvous store (rank 0 listens there)",
    "nnodes": "multi-node: how many nodes share the TP ranks (--tp is the total)",
    "node_rank": "multi-node: this node's rank; ranks >= 1 serve only /health and /health_generate",
    "nccl_port": "rendezvous port on 127.0.0.1 when --dist-init-addr is not given",
    "dist_timeout": "multi-node: seconds the rendezvous waits for every rank (default 600, torch's)",
    "stream_interval": ECHOED,
    "random_seed": "seed (default: --seed)",
    "watchdog_timeout": ECHOED,
    "log_level": "log level of the server's lines",
    "log_level_http": "log level of the uvicorn access lines (default: --log-level)",
    "log_requests": ECHOED,
    "api_key": "require this bearer key on the API (masked in specdebug's records)",
    "enable_metrics": "serve Prometheus /metrics",
    "decode_log_interval": "print a `Decode batch` line every N decode steps (default %(default)s)",
    "speculative_draft_model_path": "draft model (EAGLE/EAGLE3; default: derived from the model)",
    "speculative_num_steps": "draft steps per iteration (default 3)",
    "speculative_eagle_topk": "draft branches per step (default 1)",
    "speculative_num_draft_tokens": "tokens verified per iteration (topk 1: forced to steps + 1)",
    "speculative_accept_threshold_single": ECHOED,
    "speculative_accept_threshold_acc": ECHOED,
    "attention_backend": ECHOED,
    "disable_cuda_graph": "no cuda graphs: every step 1.35x slower",
    "enable_torch_compile": ECHOED,
    "enable_dp_attention": ECHOED,
    "disable_overlap_schedule": ECHOED,
    "disable_custom_all_reduce": ECHOED,
    "enable_nccl_nvls": "sets NCCL_NVLS_ENABLE=1 for the workers, as SGLang",
    "enable_symm_mem": "sets NCCL_CUMEM_ENABLE=1 for the workers, as SGLang",
    "skip_server_warmup": "ready without the warmup request (and without the ready line)",
}


class HelpfulParser(argparse.ArgumentParser):
    """SGLang's parser, with help from HELP for its flags that have none."""

    def fill_help(self) -> None:
        for action in self._actions:
            if not action.help and action.dest in HELP:
                action.help = HELP[action.dest]
