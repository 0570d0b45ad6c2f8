"""`slurmqual examples list|create NAME DIR`: the bundled example node trees.
They are generated from code (slurmqual.nodetree) because wheels cannot carry
the relative symlinks that make a tree look like real sysfs."""

from __future__ import annotations

import argparse
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    sub.add_parser("list", help="list the example node trees")
    c = sub.add_parser("create", help="write an example node tree into DIR (replacing DIR)")
    c.add_argument("name")
    c.add_argument("dir")


def main(args: argparse.Namespace) -> int:
    from ..nodetree import EXAMPLES, build

    if args.action == "list":
        for name, (desc, _spec) in EXAMPLES.items():
            print(f"{name:<20} {desc}")
        return 0
    if args.name not in EXAMPLES:
        print(f"slurmqual: unknown example {args.name!r}; known: {', '.join(EXAMPLES)}", file=sys.stderr)
        return 2
    print(build(args.name, args.dir))
    return 0
