"""Running the selected checks against a node root: the one evaluation the
hooks, `slurmqual check` and requalify's on-node step share."""

from __future__ import annotations

import os

from .result import CheckResult, Status


def node_name(explicit: str | None = None) -> str:
    if explicit:
        return explicit
    env = os.environ.get("SLURMD_NODENAME")
    if env:
        return env
    return os.uname().nodename.split(".")[0]


def evaluate_with_context(root: str, config, level: str, names: list[str] | None, deadline: float = float("inf"),
                          node: str | None = None):
    """Run the selected checks against a node root; the shared core of `check`
    and the hooks. Returns the results and the context (its memo carries the
    versions found and any check tracebacks)."""
    from .checks import Context, run_checks, select
    from .fsroot import FsRoot

    ctx = Context(FsRoot(root), config, level=level, deadline=deadline,
                  command_timeout=config["hooks"]["command_timeout_s"], node=node)
    if not os.path.isdir(root):  # e.g. a test cluster's per-node root that is gone: cannot judge, never fail
        return [CheckResult(s.name, Status.ERROR, f"node root {root} is not a directory: cannot judge")
                for s in select(names, level)], ctx
    return run_checks(select(names, level), ctx), ctx


def evaluate(root: str, config, level: str, names: list[str] | None, deadline: float = float("inf"),
             node: str | None = None) -> list[CheckResult]:
    return evaluate_with_context(root, config, level, names, deadline, node)[0]
