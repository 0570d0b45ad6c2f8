"""slurmqual: keep bad GPU nodes out of a Slurm cluster."""

__version__ = "0.1.0"
