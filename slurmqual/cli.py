"""`slurmqual` command line. Each subcommand lives in `slurmqual.commands.<mod>`
with `register(parser)` and `main(args) -> int`; only the chosen one is
imported, so `slurmqual check` and the hooks stay fast."""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("check", "run the per-node checks and print the verdict"),
    "explain": ("explain", "print the long explanation and remediation of a check"),
    "config": ("config_cmd", "validate or show the site config"),
    "examples": ("examples", "list or materialise the bundled example node trees"),
    "hook": ("hook", "entry point for Slurm Prolog/Epilog/HealthCheckProgram"),
    "drain": ("drain", "drain nodes with a slurmqual reason"),
    "resume": ("drain", "resume nodes that slurmqual drained"),
    "burnin": ("burnin", "nccl-tests burn-in: submit, watch, parse, analyze, report"),
    "fabric": ("fabric", "fabric map (node, NIC, switch) from iblinkinfo or lldpctl, for burn-in attribution"),
    "status": ("status", "qualification status of the fleet"),
    "history": ("history", "one node's burn-ins, drains, resumes and version changes"),
    "requalify": ("requalify", "re-qualify nodes after a hardware swap"),
    "preflight": ("preflight", "in a job script: prove the allocation's nodes and links, pick the best N"),
    "rma": ("rma", "write a node's RMA evidence bundle (serials, failing checks, Xids, history)"),
    "inventory": ("inventory", "fleet driver/firmware/NCCL versions and the odd ones out"),
    "install": ("install", "install the hook wrappers, config and dirs on a node; --check verifies an install"),
}


def _load(name: str):
    return importlib.import_module(f"slurmqual.commands.{COMMANDS[name][0]}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slurmqual", description="Keep bad GPU nodes out of a Slurm cluster.")
    parser.add_argument("--version", action="version", version=f"slurmqual {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (_mod, help_text) in COMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            module = _load(name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("slurmqual.commands"):
                continue  # not built yet
            raise
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.register(p, name)
        p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    only = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(only)
    args = parser.parse_args(argv)
    try:
        return int(args._module.main(args) or 0)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
