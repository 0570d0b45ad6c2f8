"""`slurmqual hook prolog|epilog|healthcheck`: entry point for slurmd."""

from __future__ import annotations

import argparse


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("hook", choices=("prolog", "epilog", "healthcheck"))


def main(args: argparse.Namespace) -> int:
    import os

    from ..hooks import run

    # slurmd's umask is not ours to trust: under `umask 000` root would create a
    # 0777 state dir and log file that every later run must refuse.
    os.umask(0o022)

    return run(args.hook)
