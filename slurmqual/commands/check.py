"""`slurmqual check`: run the per-node checks and print the verdict."""

from __future__ import annotations

import os
import sys
import time

from ..evaluation import evaluate, node_name
from ..result import CheckResult, Status, exit_code, worst


def register(p: "argparse.ArgumentParser", _name: str) -> None:
    p.add_argument("--root", default=None, help="treat DIR as / (node trees, containers); default from config or /")
    p.add_argument("--config", default=None, help="site config TOML (default $SLURMQUAL_CONFIG or /etc/slurmqual/config.toml)")
    p.add_argument("--level", choices=("fast", "standard", "slow"), default="fast",
                   help="fast: sysfs/procfs only (prolog); standard: also bounded tools; slow: also long diagnostics (dcgm)")
    p.add_argument("--only", default=None, help="comma-separated check IDs")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--node", default=None, help="node name to report (default $SLURMD_NODENAME or hostname)")
    p.add_argument("--partition", action="append", default=None, metavar="NAME",
                   help="the node's partitions for [[groups]] (repeatable) instead of asking Slurm")
    p.add_argument("--feature", action="append", default=None, metavar="NAME",
                   help="the node's features for [[groups]] (repeatable) instead of asking Slurm")


def render_human(node: str, results: list[CheckResult], colour: bool) -> str:
    colours = {Status.FAIL: "31", Status.ERROR: "35", Status.WARN: "33", Status.PASS: "32"}
    ordered = sorted(results, key=lambda r: -r.status.rank)
    lines = []
    for r in ordered:
        tag = r.status.value.upper().ljust(5)
        if colour and r.status in colours:
            tag = f"\033[{colours[r.status]}m{tag}\033[0m"
        line = f"{tag} {r.name:<17} {r.message}"
        if r.hint and r.status in (Status.FAIL, Status.WARN, Status.ERROR):
            line += f"\n      hint: {r.hint}"
        lines.append(line)
    lines.append(f"{node}: {worst(results).value}")
    return "\n".join(lines)


def main(args: "argparse.Namespace") -> int:
    from ..checks import REGISTRY
    from . import load_config

    config = load_config(args.config)
    if config is None:
        return 2
    names = None
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in REGISTRY]
        if unknown:
            print(f"slurmqual: unknown check {', '.join(unknown)}; known: {', '.join(REGISTRY)}", file=sys.stderr)
            return 2
    node = node_name(args.node)
    if config.groups:  # [[groups]]: the settings this node sees (config.for_node)
        if args.partition is not None or args.feature is not None:  # offline: a node tree, a new node
            config = config.for_node(node, set(args.partition or ()), set(args.feature or ()))
        else:
            from ..nodefacts import node_config
            from ..security import root_only_ok

            config = node_config(config, node,
                                 trusted=root_only_ok(config["hooks"]["state_dir"], "state dir") is None)
        if config.undecided:
            print(f"slurmqual: {node}: groups not applied (partitions/features unknown): "
                  f"{', '.join(config.undecided)}", file=sys.stderr)
    root = args.root or config.node_root(node)
    if not os.path.isdir(root):
        print(f"slurmqual: --root {root}: not a directory", file=sys.stderr)
        return 2
    deadline = time.monotonic() + config["hooks"]["deadline_s"]
    results = evaluate(root, config, args.level, names, deadline, node)
    status = worst(results)
    if args.json:
        import json

        print(json.dumps({"node": node, "status": status.value, "checks": [r.to_dict() for r in results]}))
    else:
        print(render_human(node, results, sys.stdout.isatty() and not os.environ.get("NO_COLOR")))
    return exit_code(status)
