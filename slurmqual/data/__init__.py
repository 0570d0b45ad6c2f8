"""Files the wheel carries for `slurmqual install`: the annotated site config
and the slurm.conf snippet (symlinks to config/ in a checkout, plain files in
the wheel), the Grafana dashboard and the Prometheus alert rules."""

from __future__ import annotations

from importlib import resources


def text(name: str) -> str:
    """One bundled file's text (e.g. "slurmqual.toml", "slurm.conf.snippet")."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
