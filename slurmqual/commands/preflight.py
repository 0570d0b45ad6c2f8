"""`slurmqual preflight`: prove the job's own nodes and links before the
workload starts; pick the best N (docs/PREFLIGHT.md)."""

from __future__ import annotations

import argparse
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("--need", type=int, default=None, metavar="N",
                   help="choose the N best passing nodes and write a hostfile, a Slurm node list and the "
                        "rendezvous host (exit 3 when fewer than N pass)")
    p.add_argument("--level", choices=("fast", "standard", "slow"), default=None,
                   help="checks to run on every node (default: [preflight] level, else the prolog's: fast)")
    p.add_argument("--time", type=float, default=None, metavar="SECONDS",
                   help="the whole preflight within this many seconds (default [preflight] time_s: 90)")
    p.add_argument("--drain", action=argparse.BooleanOptionalAction, default=None,
                   help="drain bad nodes under the hooks' rules (default [preflight] drain: report only)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where the files go (default: the job's working directory)")
    p.add_argument("--gpu-tools", action=argparse.BooleanOptionalAction, default=None,
                   help="also run the burn-in's per-GPU tools (default [preflight] gpu_tools)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    # internal: what the preflight's checks step runs on each node (`check --json`, in short lines)
    p.add_argument("--node-report", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--only", default=None, help=argparse.SUPPRESS)
    p.add_argument("--config", default=None)


def main(args: argparse.Namespace) -> int:
    from ..preflight.flow import PreflightError, Request, preflight, summary
    from ..preflight.judge import EXIT_USAGE
    from . import load_config

    if args.node_report:
        return _node_report(args)
    config = load_config(args.config)
    if config is None:
        return EXIT_USAGE
    if args.time is not None and args.time < 10:
        print("slurmqual: --time: at least 10 seconds", file=sys.stderr)
        return EXIT_USAGE

    def adapter():
        from ..slurm import get_adapter

        return get_adapter(config)

    req = Request(need=args.need, level=args.level, time_s=args.time, drain=args.drain, out_dir=args.out,
                  gpu_tools=args.gpu_tools)
    try:
        run = preflight(config, req, adapter, log=lambda m: print(m, file=sys.stderr))
    except PreflightError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        import json

        print(json.dumps(run.to_dict()))
    else:
        print(summary(run), flush=True)
    return run.exit_code


def _node_report(args: argparse.Namespace) -> int:
    """On one node of the checks step: `slurmqual check --json` for the
    level and check list given, printed as short tagged lines
    (preflight.flow.report_lines): srun splits a long line into pieces that
    interleave with other nodes' output."""
    import contextlib
    import io

    from ..preflight.flow import report_lines
    from . import check

    ns = argparse.Namespace(root=None, config=args.config, level=args.level or "fast", only=args.only, json=True,
                            node=None, partition=None, feature=None)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        check.main(ns)
    text = buf.getvalue().strip().splitlines()
    from ..evaluation import node_name

    for line in report_lines(node_name(None), text[-1] if text else ""):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return 0
