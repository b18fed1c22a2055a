"""The simulated servers: SGLang's and vLLM's processes, lines and HTTP, on one shared engine.

`common` holds what both imitate alike (cost model, batching engine, log sink, OpenAI surface, fault
classes, sim-only flags); `sglang` is `python -m sglang.launch_server`; `vllm` is `vllm serve`, built
on the common parts and on SGLang's where vLLM's behaviour is the same.
"""
