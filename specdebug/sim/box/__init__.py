"""The simulated GPU box around the servers: nvidia-smi and its GPUs, local start/stop, the loopback sshd."""
