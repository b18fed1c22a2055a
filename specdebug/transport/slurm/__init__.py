"""The Slurm transport: a node of an allocation reached through `srun --jobid J --overlap -w NODE`."""
