"""`slurmqual drain|resume HOSTLIST`: the admin's way to use slurmqual's
reasons and ownership rules by hand."""

from __future__ import annotations

import argparse
import sys


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument("hostlist", help="nodes, e.g. gpu[001-004]")
    p.add_argument("--config", default=None)
    if name == "drain":
        p.add_argument("--reason", required=True, help="becomes 'slurmqual: admin: <reason>'")
        p.add_argument("--check", default="admin", help="check name to put in the reason")
    else:
        p.add_argument("--force", action="store_true", help="also resume nodes drained by someone else")
    p.set_defaults(_action=name)


def main(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load
    from ..slurm import SlurmError, expand, get_adapter
    from ..slurm import reason as reasons

    try:
        config = load(args.config)
        adapter = get_adapter(config)
        names = expand(args.hostlist)
        info = {n.name: n for n in adapter.node_info(args.hostlist)}
    except (ConfigError, SlurmError) as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in info]
    if unknown:
        print(f"slurmqual: unknown nodes: {','.join(unknown)}", file=sys.stderr)
        return 2
    rc = 0
    if args._action == "drain":
        reason = reasons.make(args.check, args.reason)
        todo = []
        for n in names:
            if info[n].drained and not reasons.is_ours(info[n].reason):
                print(f"{n}: already drained by someone else ({info[n].reason!r}); left alone")
                rc = 1
            else:
                todo.append(n)
        if todo:
            try:
                adapter.drain(todo, reason)
            except SlurmError as exc:
                print(f"slurmqual: {exc}", file=sys.stderr)
                return 2
            print(f"drained {','.join(todo)}: {reason}")
            _history(config, todo, "drain", reason)
        return rc
    todo = []
    for n in names:
        i = info[n]
        if not i.drained:
            print(f"{n}: not drained ({i.state}); nothing to do")
        elif not reasons.is_ours(i.reason) and not args.force:
            print(f"{n}: drained by someone else ({i.reason!r}); use --force to resume anyway")
            rc = 1
        else:
            todo.append(n)
    if todo:
        try:
            adapter.resume(todo)
        except SlurmError as exc:
            print(f"slurmqual: {exc}", file=sys.stderr)
            return 2
        print(f"resumed {','.join(todo)}")
        _history(config, todo, "resume", "by admin" + (" (--force)" if args.force else ""))
    return rc


def _history(config, nodes: list[str], kind: str, detail: str) -> None:
    """Record admin drains/resumes in the store's history when this host has the store."""
    from ..burnin.store import existing

    with existing(config["store"]["path"]) as store:
        for n in nodes if store else []:
            store.add_event(n, kind, detail)
