"""The one error a format decoder raises."""

from __future__ import annotations

from ..adapter import SlurmError


class FormatError(SlurmError):
    """Slurm answered in a shape this slurmqual does not know; the message
    names the source and the Slurm version so an admin can report it."""
