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
    from ..names import BadNodeName, check_all
    from ..slurm import SlurmError, expand, get_adapter
    from ..slurm import reason as reasons
    from ..policy import may_drain, may_resume

    try:
        config = load(args.config)
        adapter = get_adapter(config)
        names = check_all(expand(args.hostlist))  # one name per node, as scontrol will read it
        info = {n.name: n for n in adapter.node_info(args.hostlist)}
    except (ConfigError, SlurmError, BadNodeName) as exc:
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
            decision = may_drain(info[n], reason, "admin")  # the shared rules (slurmqual/policy.py)
            if decision.noop:
                print(f"{n}: {decision.why}")
            elif not decision and info[n].drained:  # someone else's drain: never replaced
                print(f"{n}: {decision.why}")
                rc = 1
            else:  # an admin may also drain a node Slurm is handling (down, maintenance)
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
        decision = may_resume(info[n], "admin", force=args.force)
        if decision:
            todo.append(n)
        elif decision.noop:
            print(f"{n}: {decision.why}; nothing to do")
        else:
            print(f"{n}: {decision.why}; use --force to resume anyway")
            rc = 1
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
    from ..burnin.results.store import existing

    with existing(config["store"]["path"]) as store:
        for n in nodes if store else []:
            store.add_event(n, kind, detail)
