"""Slurm access: one adapter interface; CLI, slurmrestd or pyslurm implementation."""

from __future__ import annotations

import os

from .adapter import NodeInfo, SlurmAdapter, SlurmError, compress, expand

__all__ = ["NodeInfo", "SlurmAdapter", "SlurmError", "compress", "expand", "get_adapter"]


def get_adapter(config, hook: bool = False) -> SlurmAdapter:
    """The adapter `[slurm] adapter` names. "auto": pyslurm when it is
    installed and its libslurm is the controller's release, else the CLI.
    hook=True (prolog, epilog, health check): pyslurm and auto mean the CLI,
    so a hook never loads libslurm (slurmd runs one per job on every node)
    and a libslurm left behind by an upgrade can never stop a drain."""
    slurm = config["slurm"]
    kind = slurm["adapter"]
    if kind == "rest":
        from .rest.adapter import RestAdapter

        return RestAdapter.from_config(slurm)
    if kind in ("pyslurm", "auto") and not hook:
        from .pyslurm_adapter import PyslurmAdapter

        if kind == "pyslurm":
            return PyslurmAdapter.from_config(slurm)
        from .libslurm import conf_problem, installed_version, mismatch, probe

        conf = slurm["slurm_conf"] or os.environ.get("SLURM_CONF") or None
        if installed_version() is not None and not conf_problem(conf) and mismatch(probe(conf)) is None:
            return PyslurmAdapter.from_config(slurm)
    from .cli import CliAdapter

    return CliAdapter(slurm["bin_dir"], slurm["timeout_s"], slurm["retries"], slurm_conf=slurm["slurm_conf"])
