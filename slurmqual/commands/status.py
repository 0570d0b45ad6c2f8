"""`slurmqual status`: one row per node: Slurm state and reason, qualification
state, last burn-in, score vs fleet median and own baseline, failing checks.

Everything is gathered in bulk (one sinfo call, one store query per table,
one pass over the state dir) so it answers for thousands of nodes at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..qualification import STATES, NodeFacts, judge, ratio


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("hostlist", nargs="?", default=None, help="nodes to show (Slurm hostlist), default all")
    p.add_argument("--state", choices=STATES, default=None, help="only nodes in this qualification state")
    p.add_argument("--config", default=None)
    p.add_argument("--json", action="store_true")


def read_state_files(state_dir: str, names: set[str] | None) -> dict[str, dict]:
    """Last hook result per node; unreadable files are skipped (status must answer)."""
    out: dict[str, dict] = {}
    nodes_dir = os.path.join(state_dir, "nodes")
    try:
        entries = os.listdir(nodes_dir)
    except OSError:
        return out
    for entry in entries:
        node = entry[:-5] if entry.endswith(".json") else None
        if node is None or (names is not None and node not in names):
            continue
        try:
            with open(os.path.join(nodes_dir, entry), encoding="utf-8") as fh:
                out[node] = json.load(fh)
        except (OSError, ValueError):
            continue
    return out


def pending_nodes(state_dir: str) -> set[str]:
    try:
        return {e[:-5] for e in os.listdir(os.path.join(state_dir, "requalify")) if e.endswith(".json")}
    except OSError:
        return set()


def gather(slurm_nodes: list, state: dict[str, dict], pending: set[str], burnin: dict[str, dict]) -> list[NodeFacts]:
    """Join the three sources into NodeFacts. `slurm_nodes` are adapter NodeInfo
    objects (name, state, flags, reason); `burnin` maps node -> dict with keys
    time, verdict, score, median, baseline (any may be missing)."""
    facts = []
    for n in slurm_nodes:
        st = state.get(n.name, {})
        b = burnin.get(n.name, {})
        failing = [c.get("name", "?") for c in st.get("checks", []) if c.get("status") == "fail"]
        facts.append(NodeFacts(
            name=n.name, slurm_state=n.state, slurm_flags=list(n.flags), reason=n.reason or "",
            requalify_pending=n.name in pending, last_check_time=st.get("time"), failing_checks=failing,
            burnin_time=b.get("time"), burnin_verdict=b.get("verdict"), score=b.get("score"),
            median=b.get("median"), baseline=b.get("baseline"),
        ))
    return facts


def rows(facts: list[NodeFacts], now: float, max_age_s: float) -> list[dict]:
    out = []
    for f in facts:
        out.append({
            "node": f.name,
            "slurm_state": "+".join([f.slurm_state] + [x.lower() for x in f.slurm_flags]),
            "reason": f.reason,
            "qualification": judge(f, now, max_age_s),
            "last_burnin": f.burnin_time,
            "score": f.score,
            "vs_median": ratio(f.score, f.median),
            "vs_baseline": ratio(f.score, f.baseline),
            "failing_checks": f.failing_checks,
        })
    return out


def summary(table: list[dict]) -> dict[str, int]:
    counts = {s: 0 for s in STATES}
    for r in table:
        counts[r["qualification"]] += 1
    return counts


def render(table: list[dict], counts: dict[str, int]) -> str:
    def pct(x):
        return "-" if x is None else f"{x:.0%}"

    def when(t):
        return "-" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))

    lines = [f"{'NODE':<16} {'SLURM':<16} {'QUAL':<10} {'BURN-IN':<16} {'SCORE':>7} {'/MED':>5} {'/BASE':>5}  FAILING / REASON"]
    for r in table:
        score = "-" if r["score"] is None else f"{r['score']:.1f}"
        tail = ",".join(r["failing_checks"])
        if r["reason"]:
            tail = f"{tail} {r['reason']}".strip()
        lines.append(f"{r['node']:<16} {r['slurm_state']:<16} {r['qualification']:<10} {when(r['last_burnin']):<16} "
                     f"{score:>7} {pct(r['vs_median']):>5} {pct(r['vs_baseline']):>5}  {tail}")
    lines.append(" ".join(f"{k}={v}" for k, v in counts.items()) + f" total={len(table)}")
    return "\n".join(lines)


def _burnin_facts(config, names: list[str]) -> dict[str, dict]:
    """Last burn-in per node from the store, in bulk; {} when there is no store yet."""
    from ..burnin.store import existing

    with existing(config["store"]["path"]) as store:
        return store.last_burnin(names) if store else {}


def main(args: argparse.Namespace) -> int:
    from ..slurm import SlurmError, get_adapter
    from . import load_config

    config = load_config(args.config)
    if config is None:
        return 2
    try:
        nodes = get_adapter(config).node_info(args.hostlist)
    except SlurmError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    names = [n.name for n in nodes]
    state_dir = config["hooks"]["state_dir"]
    facts = gather(nodes, read_state_files(state_dir, set(names)), pending_nodes(state_dir),
                   _burnin_facts(config, names))
    table = rows(facts, time.time(), config["burnin"]["max_age_days"] * 86400)
    if args.state:
        table = [r for r in table if r["qualification"] == args.state]
    counts = summary(table)
    if args.json:
        print(json.dumps({"nodes": table, "summary": counts}))
    else:
        print(render(table, counts))
    return 0
