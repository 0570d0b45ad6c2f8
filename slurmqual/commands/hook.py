"""`slurmqual hook prolog|epilog|healthcheck`: entry point for slurmd."""

from __future__ import annotations

import argparse


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("hook", choices=("prolog", "epilog", "healthcheck"))


def main(args: argparse.Namespace) -> int:
    from ..hooks import run

    return run(args.hook)
