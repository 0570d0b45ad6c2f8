"""`slurmqual rma NODE [--out FILE]`: the evidence bundle for a vendor RMA (slurmqual/rma.py)."""

from __future__ import annotations

import argparse
import json
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("node", help="one node name")
    p.add_argument("--out", default=None, help="write the bundle here (JSON) instead of stdout")
    p.add_argument("--config", default=None)


def main(args: argparse.Namespace) -> int:
    from ..burnin.results.store import StoreError, existing
    from ..names import BadNodeName, check
    from ..nodestate import StateError
    from ..rma import bundle
    from . import load_config

    config = load_config(args.config)
    if config is None:
        return 2
    try:
        node = check(args.node)
        with existing(config["store"]["path"]) as store:
            data = bundle(config, node, store)
    except (BadNodeName, StateError, StoreError, ValueError) as exc:
        print(f"slurmqual: rma: {exc}", file=sys.stderr)
        return 2
    if not data["checks"] and not data["drain_history"] and not data["hardware"]:
        print(f"slurmqual: rma: nothing kept about {node} (no state file, no events): wrong name or state dir?",
              file=sys.stderr)
        return 2
    text = json.dumps(data, indent=1, sort_keys=True)
    if args.out:
        from ..atomic import write_text

        try:
            write_text(args.out, text + "\n")
        except OSError as exc:
            print(f"slurmqual: rma: cannot write {args.out}: {exc}", file=sys.stderr)
            return 2
        print(f"{node}: RMA bundle written to {args.out} ({len(data['failing_checks'])} failing checks, "
              f"{len(data['xid_events'])} Xid events, {len(data['drain_history'])} events)")
    else:
        print(text)
    return 0
