"""`slurmqual install [--check | --snippet | --dry-run] [--head-node]`: the arguments;
the work is in slurmqual/nodeinstall/ (see its docstring)."""

from __future__ import annotations

import argparse
import os
import sys

from ..nodeinstall.check import print_findings, run_check
from ..nodeinstall.layout import CACHE_DIR, CONFIG_PATH, DEFAULT_PREFIX, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, default_python
from ..nodeinstall.steps import run_install
from ..nodeinstall.templates import snippet_text


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("--check", action="store_true", help="verify an install instead of changing anything")
    p.add_argument("--dry-run", action="store_true", help="print what install would do, change nothing")
    p.add_argument("--head-node", action="store_true",
                   help="also write the head node's systemd units (requalify --swapped every 15 minutes) to "
                        "/etc/systemd/system, running this venv's python, and enable the timer")
    p.add_argument("--snippet", action="store_true", help="print the slurm.conf lines for this --prefix and exit")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"install prefix: wrappers go to PREFIX/libexec (default {DEFAULT_PREFIX})")
    p.add_argument("--root", default="/", help="filesystem root to install into (default /)")
    p.add_argument("--python", default=None,
                   help="python the wrappers run, as the node sees it (default: the python running this command)")
    p.add_argument("--slurm-conf", default=None, help="slurm.conf to check (default: slurm.slurm_conf, then /etc/slurm/slurm.conf)")
    p.add_argument("--slurm-version", default=None, metavar="X.Y",
                   help="--check: judge slurm.conf as this Slurm reads it (default: `scontrol -V` of slurm.bin_dir)")
    p.add_argument("--config", default=CONFIG_PATH,
                   help="site config the hooks read (default %(default)s; another path is exported by the wrappers)")
    p.add_argument("--cache-dir", default=CACHE_DIR, help="validated-config cache of the hooks (default %(default)s)")
    p.add_argument("--node", default=None, help="SLURMD_NODENAME for the --check hook run (default: short hostname)")
    p.add_argument("--no-hook-run", action="store_true", help="--check: do not run the prolog")


def parse_version(text: str) -> tuple[int, int]:
    """--slurm-version "24.11" -> (24, 11)."""
    major, dot, minor = text.partition(".")
    if not (major.isdigit() and dot and minor.split(".")[0].isdigit()):
        raise ValueError(f"--slurm-version {text!r}: expected X.Y, e.g. 24.11")
    return int(major), int(minor.split(".")[0])


def main(args: argparse.Namespace) -> int:
    prefix = os.path.abspath(args.prefix)
    root = os.path.abspath(args.root)
    if args.snippet:
        sys.stdout.write(snippet_text(prefix))
        return EXIT_OK
    if not os.path.isdir(root):
        print(f"slurmqual install: --root {root} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        try:
            version = parse_version(args.slurm_version) if args.slurm_version else None
        except ValueError as exc:
            print(f"slurmqual install: {exc}", file=sys.stderr)
            return EXIT_USAGE
        findings = run_check(root, prefix, args.slurm_conf, args.node, not args.no_hook_run,
                             args.config, args.cache_dir, version)
        print_findings(findings)
        return EXIT_PROBLEMS if any(not f.ok for f in findings) else EXIT_OK
    return run_install(root, prefix, args.python or default_python(), args.dry_run, args.config, args.cache_dir,
                       head_node=args.head_node)
