"""`slurmqual history NODE`: burn-ins, scores, baselines, drains, resumes and
version changes of one node, newest first."""

from __future__ import annotations

import argparse
import json
import sys
import time


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("node")
    p.add_argument("--config", default=None)
    p.add_argument("--json", action="store_true")


def main(args: argparse.Namespace) -> int:
    from ..burnin.store import StoreError, open_store
    from ..config import ConfigError, load

    try:
        config = load(args.config)
        store = open_store(config["store"]["path"], create=False)
    except (ConfigError, StoreError) as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    try:
        events = store.node_history(args.node)
        baseline = store.baselines([args.node]).get(args.node)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"node": args.node, "baseline": baseline, "events": events}))
        return 0
    if not events:
        print(f"{args.node}: no history (never burned in, drained or resumed by slurmqual)")
        return 0
    print(f"{args.node}: baseline {baseline if baseline is not None else '-'} GB/s")
    for e in events:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["time"]))
        print(f"{when}  {e['kind']:<15} {e['detail'] or ''}  {('run ' + e['run_id']) if e['run_id'] else ''}")
    return 0
