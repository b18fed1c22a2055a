"""Benchmarks: the built-in load generator, external tools, their results and the journaled history."""
