"""Test helpers: build node trees and run checks on them."""

from __future__ import annotations

from dataclasses import replace

from slurmqual.checks import REGISTRY, Context, run_one
from slurmqual.config import Config
from slurmqual.config_schema import SiteConfig
from slurmqual.fsroot import FsRoot
from slurmqual.nodetree import NodeSpec, build


FAST = ["peermem", "nic_link", "dcqcn", "gpu_nic_affinity", "gpu_count", "pcie_link", "ib_counters"]


def config(**sections) -> Config:
    """Validated config with some sections overridden, e.g. config(fabric={"nics": 8})."""
    return Config(SiteConfig.model_validate(sections).model_dump())


def tree(tmp_path, spec: NodeSpec | str = "h100-roce-healthy", name: str = "node", **changes):
    if changes:
        spec = replace(spec if isinstance(spec, NodeSpec) else NodeSpec(), **changes)
    return build(spec, str(tmp_path / name))


def check(root: str, name: str, cfg: Config | None = None, level: str = "fast"):
    ctx = Context(FsRoot(root), cfg or config(), level=level, command_timeout=5)
    return run_one(REGISTRY[name], ctx)


FULL = config(node={"gpus": 8}, fabric={"nics": 8, "rate_gbps": 400})


def context(root: str, cfg: Config | None = None, level: str = "fast", **kw) -> Context:
    return Context(FsRoot(root), cfg or config(), level=level, **kw)
