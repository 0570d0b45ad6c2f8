"""`slurmqual requalify HOSTLIST [--reference N] [--no-wait]`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("hostlist", nargs="?", help="the swapped nodes, e.g. gpu[012,047]")
    p.add_argument("--swapped", action="store_true",
                   help="every node a hook found with a swapped part (GPU, NIC, board serial); "
                        "what the slurmqual-requalify-swapped timer runs")
    p.add_argument("--reference", type=int, default=2, help="known-good reference nodes to pair with (default 2)")
    p.add_argument("--no-wait", action="store_true", help="return at once; `slurmqual status` shows pending")
    p.add_argument("--json", action="store_true")
    p.add_argument("--config", default=None)


def main(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load
    from ..requalify import Cancelled, Requalify, RequalifyError
    from ..slurm import SlurmError, expand, get_adapter

    if bool(args.hostlist) == bool(args.swapped):
        print("slurmqual: requalify: name the nodes or --swapped (not both)", file=sys.stderr)
        return 2
    try:
        config = load(args.config)
        nodes = swapped_nodes(config, get_adapter(config)) if args.swapped else expand(args.hostlist)
    except (ConfigError, SlurmError) as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    if args.swapped:
        if not nodes:
            print("no swapped node waits for requalify")
            return 0
        print(f"swapped: {','.join(nodes)}")
        args.hostlist = ",".join(nodes)
    if args.no_wait:
        from ..nodestate import requalify_log

        log = requalify_log(config["hooks"]["state_dir"], os.getpid())
        argv = [sys.executable, "-P", "-m", "slurmqual", "requalify", args.hostlist, "--reference", str(args.reference)]
        if config.path:
            argv += ["--config", config.path]
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        print(f"requalify running in the background (pid {proc.pid}); log {log.name}; "
              "`slurmqual status` shows the nodes as pending")
        return 0
    try:
        result = Requalify(config, get_adapter(config), nodes, args.reference,
                           out=lambda m: print(m, flush=True)).run()
    except (RequalifyError, SlurmError, Cancelled) as exc:
        print(f"slurmqual: requalify: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    return 0 if all(r["result"] == "pass" for r in result.values()) else 1


def swapped_nodes(config, adapter) -> list[str]:
    """Nodes whose state says a part was swapped (hwid.py) and that are ours
    to requalify: in service or drained by slurmqual, never someone else's drain,
    and not failed by a requalify since the swap (a timer must not burn in a
    broken node every 15 minutes: an admin fixes it and names it)."""
    from ..nodestate import read_all
    from ..slurm import reason as reasons

    states, _bad = read_all(config["hooks"]["state_dir"])
    swapped = sorted(n for n, st in states.items() if st.swap)
    if not swapped:
        return []
    info = {i.name: i for i in adapter.node_info()}
    out = []
    for n in swapped:
        i = info.get(n)
        if i is None:
            print(f"{n}: swapped, but unknown to Slurm; skipped")
        elif i.drained and not reasons.is_ours(i.reason):
            print(f"{n}: swapped, but drained by someone else ({i.reason!r}); skipped")
        elif states[n].swap.get("failed"):
            print(f"{n}: swapped, but its requalify failed ({states[n].swap['failed'].get('reason')}); "
                  f"skipped: fix it, then `slurmqual requalify {n}`")
        else:
            out.append(n)
    return out
