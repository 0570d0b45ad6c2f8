"""The errors of Slurm access: SlurmError (Slurm unreachable or refusing),
FormatError (it answered in a shape we do not know)."""

from __future__ import annotations


class SlurmError(Exception):
    """Slurm could not be reached or answered something we cannot read."""


class FormatError(SlurmError):
    """Slurm answered in a shape this slurmqual does not know; the message
    names the source and the Slurm version so an admin can report it."""
