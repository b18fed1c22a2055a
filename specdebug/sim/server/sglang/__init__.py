"""The simulated `python -m sglang.launch_server`: launcher, schedulers, HTTP app, flags and line shapes."""
