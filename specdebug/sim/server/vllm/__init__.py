"""The simulated `vllm serve`: API server, EngineCore and workers, flags, stats lines and line shapes."""
