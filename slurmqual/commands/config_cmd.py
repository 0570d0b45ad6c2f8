"""`slurmqual config validate FILE` / `slurmqual config show`."""

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


def main(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load

    try:
        config = load(args.file if args.action == "validate" else args.config, use_cache=False)
    except ConfigError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    if args.action == "validate":
        print(f"{config.path}: ok")
    else:
        print(json.dumps(config.data, indent=2, sort_keys=True))
    return 0
