"""`slurmqual explain CHECK`: what a check reads, why it matters, how to fix it."""

from __future__ import annotations

import argparse
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("check", nargs="?", help="check ID; omit to list all checks")


def main(args: argparse.Namespace) -> int:
    from ..checks import REGISTRY

    if not args.check:
        for spec in REGISTRY.values():
            print(f"{spec.name:<17} {spec.level:<9} {spec.summary}")
        return 0
    spec = REGISTRY.get(args.check)
    if spec is None:
        print(f"slurmqual: unknown check {args.check!r}; known: {', '.join(REGISTRY)}", file=sys.stderr)
        return 2
    print(f"{spec.name} ({spec.level} level): {spec.summary}\n")
    print(spec.explain)
    print(f"\nHint shown on failure: {spec.hint}")
    return 0
