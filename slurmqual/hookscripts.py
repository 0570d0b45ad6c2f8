"""Console scripts `slurmqual-prolog`, `slurmqual-epilog`, `slurmqual-healthcheck`.

pip writes them into the venv's bin/ with a #! naming the venv's python, so
slurm.conf can point at them directly: they need no PATH to start. slurmd gives
HealthCheckProgram no PATH at all; the Slurm CLI calls a hook makes do need one.
"""

from __future__ import annotations

import os
import sys

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _run(hook: str) -> int:
    if not os.environ.get("PATH"):
        os.environ["PATH"] = SAFE_PATH
    from .hooks import run

    return run(hook)


def prolog() -> int:
    return _run("prolog")


def epilog() -> int:
    return _run("epilog")


def healthcheck() -> int:
    return _run("healthcheck")


if __name__ == "__main__":
    sys.exit(_run(sys.argv[1] if len(sys.argv) > 1 else "healthcheck"))
