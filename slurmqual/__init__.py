"""slurmqual: keep bad GPU nodes out of a Slurm cluster."""

import os as _os

__version__ = "0.1.0"

# $SLURMRESTD_TOKEN leaves the environment as the process starts (every entry
# point imports this package first), so no child process — mlxconfig,
# nvidia-smi, sbatch — ever inherits it; the REST adapter asks for it here
# (slurm/rest/transport.env_token).
_STARTUP_SECRETS = {k: v for k in ("SLURMRESTD_TOKEN",) if (v := _os.environ.pop(k, None))}


def take_startup_secret(name: str) -> "str | None":
    """A secret taken out of the environment at start (handed out once)."""
    return _STARTUP_SECRETS.pop(name, None)
