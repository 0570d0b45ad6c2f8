"""Slurm access: one adapter interface, CLI or slurmrestd implementation."""

from __future__ import annotations

from .adapter import NodeInfo, SlurmAdapter, SlurmError, compress, expand

__all__ = ["NodeInfo", "SlurmAdapter", "SlurmError", "compress", "expand", "get_adapter"]


def get_adapter(config) -> SlurmAdapter:
    slurm = config["slurm"]
    if slurm["adapter"] == "rest":
        from .rest.adapter import RestAdapter

        return RestAdapter.from_config(slurm)
    from .cli import CliAdapter

    return CliAdapter(slurm["bin_dir"], slurm["timeout_s"], slurm["retries"], slurm_conf=slurm["slurm_conf"])
