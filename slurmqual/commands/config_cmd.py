"""`slurmqual config validate FILE` / `slurmqual config show [--node NAME]` /
`slurmqual config init`: a starting site config read from this node."""

from __future__ import annotations

import argparse
import json
import sys


def register(p: argparse.ArgumentParser, _name: str) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    v = sub.add_parser("validate", help="validate a site config file and say what is wrong")
    v.add_argument("file")
    s = sub.add_parser("show", help="print the effective config with defaults, as JSON")
    s.add_argument("--config", default=None)
    s.add_argument("--node", default=None,
                   help="print what this node sees: the base with its matching [[groups]] applied")
    s.add_argument("--partition", action="append", default=None, metavar="NAME",
                   help="with --node: the node's partitions (repeatable) instead of asking Slurm")
    s.add_argument("--feature", action="append", default=None, metavar="NAME",
                   help="with --node: the node's features (repeatable) instead of asking Slurm")
    i = sub.add_parser("init", help="write a starting site config read from this node (stdout, or -o FILE)")
    i.add_argument("--root", default="/", help="read the node tree under DIR instead of / (default /)")
    i.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="write FILE (refused if it exists, unless --force); default: stdout")
    i.add_argument("--force", action="store_true", help="with -o: replace an existing FILE")
    i.add_argument("--group", default=None, metavar="NAME",
                   help="write one [[groups]] entry for this kind of node (needs --hosts, --partition or --feature)")
    i.add_argument("--hosts", default=None, help="with --group: match = { hosts = HOSTLIST }")
    i.add_argument("--partition", default=None, help="with --group: match = { partition = NAME }")
    i.add_argument("--feature", action="append", default=None, metavar="NAME",
                   help="with --group: match = { feature = [...] } (repeatable: all of them)")
    i.add_argument("--no-verify", action="store_true",
                   help="do not run the checks on this node with the written config")


def main(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load

    if args.action == "init":
        return _init(args)

    try:
        config = load(args.file if args.action == "validate" else args.config, use_cache=False)
    except ConfigError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    if args.action == "validate":
        print(f"{config.path}: ok")
        return 0
    if args.action == "show" and (args.partition or args.feature) and not args.node:
        print("slurmqual: --partition/--feature describe a node: give --node", file=sys.stderr)
        return 2
    if args.node:
        try:
            config = _for_node(config, args)
        except (ConfigError, ValueError) as exc:
            print(f"slurmqual: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(config.data, indent=2, sort_keys=True))
    return 0


def _for_node(config, args: argparse.Namespace):
    """The node's merged config, checked against the models once more (several
    groups together), with one stderr line saying which groups applied."""
    from ..config import validate_effective
    from ..names import BadNodeName, check

    try:
        node = check(args.node)
    except BadNodeName as exc:
        raise ValueError(str(exc)) from None
    if args.partition is not None or args.feature is not None:
        merged = config.for_node(node, set(args.partition or ()), set(args.feature or ()))
    else:
        from ..nodefacts import node_config
        from ..security import root_only_ok

        trusted = root_only_ok(config["hooks"]["state_dir"], "state dir") is None
        merged = node_config(config, node, trusted=trusted)
    validate_effective(merged.data, f"{config.path or '<defaults>'} for node {node}")
    line = f"{node}: groups applied: {', '.join(merged.applied) or 'none'}"
    if merged.undecided:
        line += f"; not applied, partitions/features unknown: {', '.join(merged.undecided)}"
    print(line, file=sys.stderr)
    return merged


def _init(args: argparse.Namespace) -> int:
    """Read the node, write the config, then run the checks with it (exit 1 when
    this node fails its own config: the file is written all the same)."""
    import os
    import tempfile

    from .. import __version__, siteinit
    from ..config import ConfigError
    from ..result import Status

    match = {k: v for k, v in (("hosts", args.hosts), ("partition", args.partition), ("feature", args.feature))
             if v is not None}
    if args.group is None and match:
        print("slurmqual: --hosts/--partition/--feature describe a group: give --group NAME", file=sys.stderr)
        return 2
    if args.group is not None and not match:
        print("slurmqual: --group needs the nodes it matches: --hosts, --partition or --feature", file=sys.stderr)
        return 2
    if args.force and not args.output:
        print("slurmqual: --force replaces an -o FILE; without -o the config goes to stdout", file=sys.stderr)
        return 2
    if not os.path.isdir(args.root):
        print(f"slurmqual: --root {args.root}: not a directory", file=sys.stderr)
        return 2
    if args.output and os.path.lexists(args.output) and not args.force:
        print(f"slurmqual: {args.output} exists: not replaced (--force replaces it; or write to stdout)",
              file=sys.stderr)
        return 2
    node = siteinit.default_node_name(args.root)
    reading = siteinit.read_node(args.root)
    if args.group is not None:
        text = siteinit.render_group(reading, node, args.root, __version__, args.group, match)
    else:
        text = siteinit.render_base(reading, node, args.root, __version__)
    try:
        config = siteinit.parse_written(text, args.group is not None, args.output or "<config init>")
    except ConfigError as exc:   # a slurmqual bug: never write a file that does not validate
        print(f"slurmqual: config init wrote an invalid config (please report): {exc}", file=sys.stderr)
        return 2
    if args.output:
        from ..atomic import write_text

        try:
            write_text(args.output, text, 0o644)
        except OSError as exc:
            print(f"slurmqual: {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"slurmqual: wrote {args.output} ({len(reading.settings)} settings read from {node})", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    for line in reading.skipped:
        print(f"slurmqual: not written: {line}", file=sys.stderr)
    for line in reading.outliers:
        print(f"slurmqual: this node: {line}", file=sys.stderr)
    for line in reading.doubts:
        print(f"slurmqual: check this: {line}", file=sys.stderr)
    if args.no_verify:
        return 0
    with tempfile.TemporaryDirectory(prefix="slurmqual-init-") as state:
        results = siteinit.verify(args.root, config, state, node=node)
    bad = [r for r in results if r.status in (Status.FAIL, Status.ERROR, Status.WARN)]
    for r in bad:
        print(f"slurmqual: check with this config: {r.status.value} {r.name}: {r.message}", file=sys.stderr)
    passed = sum(1 for r in results if r.status is Status.PASS)
    print(f"slurmqual: check --level standard with this config on {node}: {passed} pass, "
          f"{sum(1 for r in results if r.status is Status.NA)} n/a, {len(bad)} not passing", file=sys.stderr)
    return 1 if any(r.status in (Status.FAIL, Status.ERROR) for r in bad) else 0
