"""Transports: the narrow pipe to one machine (SSH, Slurm job steps, this machine), under the box client."""
