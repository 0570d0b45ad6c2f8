"""Burn-in: multi-node nccl-tests as a Slurm job array, judged against the fleet itself."""
