"""`slurmqual inventory`: fleet versions and the nodes that differ."""

from __future__ import annotations

import argparse
import json


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("--config", default=None)
    p.add_argument("--json", action="store_true")


def _nccl_versions(config) -> dict[str, str]:
    """NCCL version per node from the burn-in store's baselines, when there is a store."""
    from ..burnin.results.store import existing

    with existing(config["store"]["path"]) as store:
        return store.nccl_versions() if store else {}


def main(args: argparse.Namespace) -> int:
    from ..inventory import build, render
    from . import load_config

    config = load_config(args.config)
    if config is None:
        return 2
    inv = build(config["hooks"]["state_dir"], _nccl_versions(config))
    print(json.dumps(inv.to_dict()) if args.json else render(inv))
    return 1 if inv.outliers else 0
