"""`slurmqual fabric map`: write the fabric map CSV (node,rail,switch,port)
that `burnin analyze --topology` reads, from iblinkinfo (InfiniBand: the
whole subnet, from any host with a port on it) or lldpctl -f json (RoCE: this
host's neighbours; run it on every node and concatenate with --no-header)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    a = sub.add_parser("map", help="write the fabric map CSV from iblinkinfo or lldpctl")
    src = a.add_mutually_exclusive_group(required=True)
    src.add_argument("--iblinkinfo", nargs="?", const="", metavar="FILE",
                     help="parse this saved iblinkinfo output (no FILE: run iblinkinfo)")
    src.add_argument("--lldp", nargs="?", const="", metavar="FILE",
                     help="parse this saved `lldpctl -f json` (no FILE: run it); rows for --node")
    a.add_argument("--node", default=None, help="the node the lldp output is from (default: this host)")
    a.add_argument("--no-header", action="store_true", help="rows only (to append other nodes' rows)")
    a.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")


def _err(msg: str) -> int:
    print(f"slurmqual: fabric map: {msg}", file=sys.stderr)
    return 2


def _text(path: str, argv: list[str]) -> str:
    """A saved output, or the tool's output now (bounded in time)."""
    if path:
        from ..fsroot import read_regular

        return read_regular(path, 64 << 20).decode("utf-8", "replace")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if done.returncode:
        raise OSError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


def main(args: argparse.Namespace) -> int:
    from ..burnin.read import fabricmap
    from ..burnin.judge.topology import write_csv

    try:
        if args.iblinkinfo is not None:
            result = fabricmap.from_iblinkinfo(_text(args.iblinkinfo, ["iblinkinfo"]))
        else:
            node = args.node or os.uname().nodename.split(".")[0]
            rails = fabricmap.netdev_rails() if not args.lldp or args.node is None else {}
            result = fabricmap.from_lldpctl(_text(args.lldp, ["lldpctl", "-f", "json"]), node, rails)
    except (OSError, subprocess.SubprocessError) as exc:
        return _err(str(getattr(exc, "strerror", None) or exc))
    except fabricmap.FabricMapError as exc:
        return _err(str(exc))
    if not result.rows:
        return _err("no compute-node NIC attached to a switch found" +
                    (f" (skipped: {', '.join(result.skipped)})" if result.skipped else ""))
    text = write_csv(result.rows)
    if args.no_header:
        text = text.split("\n", 1)[1]
    if args.output:
        from ..atomic import write_text

        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    nodes = len({r[0] for r in result.rows})
    switches = len({r[2] for r in result.rows})
    print(f"fabric map: {len(result.rows)} NIC(s) of {nodes} node(s) on {switches} switch(es)"
          + (f"; skipped {len(result.skipped)} non-node CA(s): {', '.join(result.skipped)}" if result.skipped else ""),
          file=sys.stderr)
    return 0
