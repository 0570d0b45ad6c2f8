"""`slurmqual requalify HOSTLIST [--reference N] [--no-wait]`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("hostlist", help="the swapped nodes, e.g. gpu[012,047]")
    p.add_argument("--reference", type=int, default=2, help="known-good reference nodes to pair with (default 2)")
    p.add_argument("--no-wait", action="store_true", help="return at once; `slurmqual status` shows pending")
    p.add_argument("--json", action="store_true")
    p.add_argument("--config", default=None)


def main(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load
    from ..requalify import Cancelled, Requalify, RequalifyError
    from ..slurm import SlurmError, expand, get_adapter

    try:
        config = load(args.config)
        nodes = expand(args.hostlist)
    except (ConfigError, SlurmError) as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    if args.no_wait:
        log_dir = os.path.join(config["hooks"]["state_dir"], "requalify")
        os.makedirs(log_dir, exist_ok=True)
        log = open(os.path.join(log_dir, f"requalify-{os.getpid()}.log"), "a")
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
