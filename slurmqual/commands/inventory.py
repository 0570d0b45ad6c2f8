"""`slurmqual inventory`: fleet versions and the nodes that differ."""

from __future__ import annotations

import argparse
import json
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("--config", default=None)
    p.add_argument("--json", action="store_true")


def _nccl_versions(config) -> dict[str, str]:
    """NCCL version per node from the burn-in store's baselines, when there is a store."""
    try:
        from ..burnin.store import open_store
    except ImportError:
        return {}
    try:
        store = open_store(config["store"]["path"], create=False)
    except Exception:  # noqa: BLE001 - no store yet is normal on a new cluster
        return {}
    try:
        return store.nccl_versions()
    finally:
        store.close()


def main(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load
    from ..inventory import build, render

    try:
        config = load(args.config)
    except ConfigError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    inv = build(config["hooks"]["state_dir"], _nccl_versions(config))
    print(json.dumps(inv.to_dict()) if args.json else render(inv))
    return 1 if inv.outliers else 0
