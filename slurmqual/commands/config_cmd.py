"""`slurmqual config validate FILE` / `slurmqual config show [--node NAME]`."""

from __future__ import annotations

import argparse
import json
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    v = sub.add_parser("validate", help="validate a site config file and say what is wrong")
    v.add_argument("file")
    s = sub.add_parser("show", help="print the effective config with defaults, as JSON")
    s.add_argument("--config", default=None)
    s.add_argument("--node", default=None,
                   help="print what this node sees: the base with its matching [[groups]] applied")
    s.add_argument("--partition", action="append", default=None, metavar="NAME",
                   help="with --node: the node's partitions (repeatable) instead of asking Slurm")
    s.add_argument("--feature", action="append", default=None, metavar="NAME",
                   help="with --node: the node's features (repeatable) instead of asking Slurm")


def main(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load

    try:
        config = load(args.file if args.action == "validate" else args.config, use_cache=False)
    except ConfigError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    if args.action == "validate":
        print(f"{config.path}: ok")
        return 0
    if args.action == "show" and (args.partition or args.feature) and not args.node:
        print("slurmqual: --partition/--feature describe a node: give --node", file=sys.stderr)
        return 2
    if args.node:
        try:
            config = _for_node(config, args)
        except (ConfigError, ValueError) as exc:
            print(f"slurmqual: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(config.data, indent=2, sort_keys=True))
    return 0


def _for_node(config, args: argparse.Namespace):
    """The node's merged config, checked against the models once more (several
    groups together), with one stderr line saying which groups applied."""
    from ..config import validate_effective
    from ..names import BadNodeName, check

    try:
        node = check(args.node)
    except BadNodeName as exc:
        raise ValueError(str(exc)) from None
    if args.partition is not None or args.feature is not None:
        merged = config.for_node(node, set(args.partition or ()), set(args.feature or ()))
    else:
        from ..nodefacts import node_config
        from ..security import root_only_ok

        trusted = root_only_ok(config["hooks"]["state_dir"], "state dir") is None
        merged = node_config(config, node, trusted=trusted)
    validate_effective(merged.data, f"{config.path or '<defaults>'} for node {node}")
    line = f"{node}: groups applied: {', '.join(merged.applied) or 'none'}"
    if merged.undecided:
        line += f"; not applied, partitions/features unknown: {', '.join(merged.undecided)}"
    print(line, file=sys.stderr)
    return merged
