"""Test helpers: build node trees and run checks on them."""

from __future__ import annotations

from dataclasses import replace

from slurmqual.checks import REGISTRY, Context, run_one
from slurmqual.config import Config
from slurmqual.config_schema import SiteConfig
from slurmqual.fsroot import FsRoot
from slurmqual.nodetree import NodeSpec, build


# Derived from the check declarations, so a new fast check is covered by the example tests.
FAST = [s.name for s in REGISTRY.values() if s.level == "fast"]


def config(**sections) -> Config:
    """Validated config with some sections overridden, e.g. config(fabric={"nics": 8})."""
    return Config(SiteConfig.model_validate(sections).model_dump())


def tree(tmp_path, spec: NodeSpec | str = "h100-roce-healthy", name: str = "node", **changes):
    if changes:
        spec = replace(spec if isinstance(spec, NodeSpec) else NodeSpec(), **changes)
    return build(spec, str(tmp_path / name))


def check(root: str, name: str, cfg: Config | None = None, level: str = "fast"):
    ctx = context(root, cfg, level=level, command_timeout=5)
    return run_one(REGISTRY[name], ctx)


FULL = config(node={"gpus": 8}, fabric={"nics": 8, "rate_gbps": 400})


def context(root: str, cfg: Config | None = None, level: str = "fast", **kw) -> Context:
    """A check context on a node tree; state files (counter history, cursors)
    go next to the tree, never to the machine's /var/lib/slurmqual."""
    kw.setdefault("state_dir", f"{root}.state")
    return Context(FsRoot(root), cfg or config(), level=level, **kw)
