"""`slurmqual history NODE`: burn-ins, scores, baselines, drains, resumes,
guard holds, requalify events and version changes of one node, newest first.

Hooks and requalify spool their events under the state dir (slurmqual/events.py);
history moves them into the store first, so it tells the whole story.
"""

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
    from .. import events as spool
    from ..burnin.results.store import NoStoreYet, StoreError, open_store
    from ..config import ConfigError, load

    try:
        config = load(args.config)
        state_dir = config["hooks"]["state_dir"]
        # Spooled hook events alone are a story worth a store (a cluster before its first burn-in).
        store = open_store(config["store"]["path"], create=bool(spool.pending(state_dir)))
    except NoStoreYet:
        # Nothing burned in, drained or resumed yet: an empty history, not an error.
        return _show(args, None, [], [])
    except (ConfigError, StoreError) as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    try:
        try:
            spool.ingest(store, state_dir)
        except (StoreError, OSError) as exc:  # the store's own history still answers
            print(f"slurmqual: warning: could not ingest spooled events: {exc}", file=sys.stderr)
        bad = spool.malformed(state_dir)
        if bad:
            print(f"slurmqual: warning: skipped unreadable or malformed event files in {spool.spool_dir(state_dir)}: "
                  f"{', '.join(bad[:10])}{' ...' if len(bad) > 10 else ''}", file=sys.stderr)
        events = store.node_history(args.node)
        baseline = store.baselines([args.node]).get(args.node)
        gpus = store.gpu_history(args.node) if hasattr(store, "gpu_history") else []
    finally:
        store.close()
    return _show(args, baseline, events, gpus)


def _show(args: argparse.Namespace, baseline: float | None, events: list[dict], gpus: list[dict]) -> int:
    if args.json:
        print(json.dumps({"node": args.node, "baseline": baseline, "events": events, "gpus": gpus}))
        return 0
    if not events:
        print(f"{args.node}: no history (never burned in, drained or resumed by slurmqual)")
        return 0
    print(f"{args.node}: baseline {baseline if baseline is not None else '-'} GB/s")
    for e in events:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["time"]))
        print(f"{when}  {e['kind']:<15} {e['detail'] or ''}  {('run ' + e['run_id']) if e['run_id'] else ''}")
    for line in gpu_lines(gpus):
        print(line)
    return 0


def gpu_lines(gpus: list[dict]) -> list[str]:
    """The node's GPUs in their latest burn-in (store.gpu_history rows, newest
    first): every result not passing, then a count of those that pass."""
    if not gpus:
        return []
    latest = [g for g in gpus if g["run_id"] == gpus[0]["run_id"]]
    out = [f"GPUs in run {gpus[0]['run_id']}:"]
    for g in latest:
        if g["verdict"] != "pass":
            rel = f" = {g['score'] / g['median']:.0%} of median {g['median']}" if g["score"] is not None and g["median"] \
                else ""
            base = f", baseline {g['baseline']}" if g["baseline"] is not None else ""
            out.append(f"  GPU {g['gpu']} ({g['serial'] or g['pci'] or 'no serial'}) {g['key']}: {g['verdict']} "
                       f"{g['score']}{rel}{base}")
    passed = sum(1 for g in latest if g["verdict"] == "pass")
    out.append(f"  {passed} of {len(latest)} GPU results pass")
    return out
