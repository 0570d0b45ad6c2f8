"""pytest fixtures for a real local Slurm cluster (see tests/slurmcluster.py)."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from slurmcluster import Cluster, missing_requirements


def start_cluster(name: str, nodes: int, **start_args) -> Cluster:
    """Start a cluster in a fresh dir under /tmp (munged, as user munge, must be
    able to traverse it, which pytest's 0700 tmp dirs do not allow)."""
    why = missing_requirements()
    if why:
        pytest.skip(f"real Slurm cluster unavailable: {why}")
    base = tempfile.mkdtemp(prefix=f"slurmqual-{name}-")
    return Cluster(base, nodes).start(**start_args)


def stop_cluster(cluster: Cluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.base, ignore_errors=True)
