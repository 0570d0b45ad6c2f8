"""`slurmqual status`: one row per node: Slurm state and reason, qualification
state, last burn-in, score vs fleet median and own baseline, failing checks.

Everything is gathered in bulk (one sinfo call, one store walk over the runs
newest first, one pass over the state dir) so it answers for thousands of
nodes with a year of daily runs in well under a second (bench/bench_status.py).
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
    p.add_argument("--slurm-state", default=None, metavar="WORD",
                   help="only nodes whose Slurm state has this word, e.g. idle, drain, down, not_responding")
    p.add_argument("--summary", action="store_true", help="counts only (and the hook-drain guard), no table")
    p.add_argument("--lemons", action="store_true",
                   help="only nodes with repeated hardware faults (remediation.lemon_count or more hardware "
                        "drains or automatic repairs within remediation.lemon_window_s)")
    p.add_argument("--config", default=None)
    p.add_argument("--json", action="store_true")


def gather(slurm_nodes: list, state: dict, pending: set[str], burnin: dict[str, dict],
           notes: dict[str, str] | None = None) -> list[NodeFacts]:
    """Join the three sources into NodeFacts. `slurm_nodes` are adapter NodeInfo
    objects (name, state, flags, reason); `state` node -> nodestate.NodeState; `burnin` maps node -> dict with keys
    time, verdict, score, median, baseline (any may be missing)."""
    facts = []
    notes = notes or {}
    for n in slurm_nodes:
        st = state.get(n.name)
        b = burnin.get(n.name, {})
        facts.append(NodeFacts(
            name=n.name, slurm_state=n.state, slurm_flags=list(n.flags), reason=n.reason or "",
            requalify_pending=n.name in pending, last_check_time=st.time if st else None,
            failing_checks=st.failing if st else [],
            burnin_time=b.get("time"), burnin_verdict=b.get("verdict"), score=b.get("score"),
            median=b.get("median"), baseline=b.get("baseline"), retest_note=notes.get(n.name, ""),
        ))
    return facts


def retest_notes(config, adapter, burnin: dict[str, dict]) -> dict[str, str]:
    """node -> 'burn-in retest round 1 of 2 submitted (analysis job N)' for the
    nodes whose last burn-in said retest and whose run has a round in flight
    (its analysis job pending or running). One job query for all of them."""
    from ..burnin.results import rundir

    runs = {b["run_id"] for b in burnin.values() if b.get("verdict") == "retest" and b.get("run_id")}
    stages = {}
    for run_id in runs:
        stage = rundir.current(os.path.join(config["burnin"]["run_dir"], run_id))
        if stage["round"] and stage["analysis"]:
            stages[run_id] = stage
    if not stages:
        return {}
    try:
        records = adapter.jobs([s["analysis"] for s in stages.values()])
    except Exception:  # noqa: BLE001 - status still shows the rest
        return {}
    live = {r: s for r, s in stages.items() if s["analysis"] in records and records[s["analysis"]].active}
    return {n: f"burn-in {rundir.describe(live[b['run_id']]).split(':')[0]} (analysis job {live[b['run_id']]['analysis']})"
            for n, b in burnin.items() if b.get("verdict") == "retest" and b.get("run_id") in live}


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
            "failing_checks": f.failing_checks + ([f.retest_note] if f.retest_note else []),
        })
    return out


def summary(table: list[dict]) -> dict[str, int]:
    counts = {s: 0 for s in STATES}
    for r in table:
        counts[r["qualification"]] += 1
    return counts


def slurm_state_matches(row: dict, word: str) -> bool:
    return word.lower() in row["slurm_state"].split("+")


def guard_lines(guard: dict | None) -> list[str]:
    if not guard or not guard.get("tripped"):
        return []
    held = guard["held"]
    return [f"CRITICAL: hook-drain guard tripped: {len(guard['recent_drains'])} hook drains within "
            f"{guard['window_s']:g}s (limit {guard['limit']} of {guard['fleet']} nodes); {len(held)} drains held: "
            f"{','.join(held[:20])}{' ...' if len(held) > 20 else ''}",
            "  held because: " + "; ".join(sorted(set(guard["held_reasons"].values())))[:300],
            "  suspect a shared config or a fleet-wide fault; fix it and the guard clears itself "
            "(or remove <state_dir>/guard)"]


def config_problem_lines(problems: dict[str, dict]) -> list[str]:
    """Nodes whose hooks judge nothing: they cannot use the site config (configproblem.py)."""
    if not problems:
        return []
    from ..configproblem import line

    names = sorted(problems)
    return ([f"CRITICAL: {len(names)} node(s) run no checks: their hooks cannot use the site config "
             "(fix it there; the next hook run clears this):"]
            + [f"  {line(n, problems[n])}"[:400] for n in names[:20]]
            + ([f"  ... and {len(names) - 20} more"] if len(names) > 20 else []))


def component_lines(parts: dict | None, limit: int = 20) -> list[str]:
    """The last full run's suspect switches and links/cables (what to replace
    besides nodes); nothing when it named none."""
    if not parts or not (parts.get("switches") or parts.get("links")):
        return []
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(parts["time"]))
    out = []
    sw = parts.get("switches") or []
    if sw:
        out.append(f"suspect switches (burn-in {parts['run_id']}, {when}): " + "; ".join(
            f"{s['switch']} ({'uplinks' if s['kind'] == 'uplinks' else 'every path'} at {s['factor']:.0%}, "
            f"{len(s['nodes'])} nodes behind it, none drained for it)" for s in sw[:limit])
            + (f"; ... and {len(sw) - limit} more" if len(sw) > limit else ""))
    links = parts.get("links") or []
    if links:
        out.append(f"suspect links/cables (burn-in {parts['run_id']}, {when}): " + "; ".join(
            f"{x['a']}<->{x['b']}" + (f" rail {x['rail']}" if x.get("rail") else "") for x in links[:limit])
            + (f"; ... and {len(links) - limit} more" if len(links) > limit else ""))
    return out


def add_components(table: list[dict], burnin: dict[str, dict], parts: dict | None) -> None:
    """Each row's `failed_nics` and `behind_suspect_switch` from the last full
    run, for the nodes whose last burn-in is that run (a later requalify
    supersedes it); [] otherwise."""
    run_id = (parts or {}).get("run_id")
    behind: dict[str, list[str]] = {}
    for s in (parts or {}).get("switches") or []:
        for n in s["nodes"]:
            behind.setdefault(n, []).append(s["switch"])
    for r in table:
        current = run_id is not None and burnin.get(r["node"], {}).get("run_id") == run_id
        r["failed_nics"] = list(parts["failed_nics"].get(r["node"], [])) if current else []
        r["behind_suspect_switch"] = behind.get(r["node"], []) if current else []


def render(table: list[dict], counts: dict[str, int], guard: dict | None = None, summary_only: bool = False,
           config_problems: dict[str, dict] | None = None, components: dict | None = None) -> str:
    def pct(x):
        return "-" if x is None else f"{x:.0%}"

    def when(t):
        return "-" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))

    lines = []
    if not summary_only:
        wn = max([4] + [len(r["node"]) for r in table])
        ws = max([5] + [len(r["slurm_state"]) for r in table])
        gpu_col = any(r.get("gpus") for r in table)
        wg = max([3] + [len(worst_gpu(r.get("gpus") or [])) for r in table]) if gpu_col else 0
        lines.append(f"{'NODE':<{wn}} {'SLURM':<{ws}} {'QUAL':<9} {'BURN-IN':<16} {'SCORE':>7} {'/MED':>5} "
                     f"{'/BASE':>5}  " + (f"{'GPU':<{wg}}  " if gpu_col else "") + "FAILING / REASON")
        for r in table:
            score = "-" if r["score"] is None else f"{r['score']:.1f}"
            tail = ",".join(r["failing_checks"])
            if r["reason"]:
                tail = f"{tail} {r['reason']}".strip()
            if r.get("failed_nics"):
                tail = f"{tail} failed NIC {','.join(r['failed_nics'])}".strip()
            if r.get("behind_suspect_switch"):
                tail = f"{tail} behind suspect switch {','.join(r['behind_suspect_switch'])}".strip()
            pf = r.get("preflight")
            if pf and pf.get("verdict") != "pass":
                tail = f"{tail} preflight {pf['verdict']} (job {pf.get('job')}) {pf.get('reason') or ''}".strip()
            lines.append(f"{r['node']:<{wn}} {r['slurm_state']:<{ws}} {r['qualification']:<9} "
                         f"{when(r['last_burnin']):<16} {score:>7} {pct(r['vs_median']):>5} "
                         f"{pct(r['vs_baseline']):>5}  "
                         + (f"{worst_gpu(r.get('gpus') or []):<{wg}}  " if gpu_col else "") + tail)
    lines.append(" ".join(f"{k}={v}" for k, v in counts.items()) + f" total={len(table)}")
    lines += component_lines(components)
    lines += guard_lines(guard)
    lines += config_problem_lines(config_problems or {})
    return "\n".join(lines)


def _burnin_facts(config, names: list[str]) -> dict[str, dict]:
    """Last burn-in per node from the store, in bulk; {} when there is no store yet."""
    from ..burnin.results.store import existing

    with existing(config["store"]["path"]) as store:
        if store is None:
            return {}
        walk = getattr(store, "last_burnin_walk", None)  # SQLite: runs newest first, stops early
        facts = walk(names) if walk else store.last_verdicts(names)
        last_gpus = getattr(store, "last_gpus", None)
        if last_gpus:  # each node's GPUs in its last burn-in (primary-key lookups)
            for n, gpus in last_gpus({n: b["run_id"] for n, b in facts.items() if b.get("run_id")}).items():
                facts[n]["gpus"] = gpus
        return facts


def _last_components(config) -> dict | None:
    """The last full run's suspect parts (store.last_components); None without a store or run."""
    from ..burnin.results.store import existing

    with existing(config["store"]["path"]) as store:
        return store.last_components() if store is not None else None


def gpu_scores(gpus: list[dict]) -> list[dict]:
    """A node's per-GPU results for `status --json`: each GPU and test with its
    verdict, score and the score against its key's fleet median and its own
    (serial's) baseline."""
    from ..burnin.records import split_key

    return [{"gpu": g["gpu"], "test": split_key(g["key"])[0], "key": g["key"], "verdict": g["verdict"],
             "score": g["score"], "vs_median": ratio(g["score"], g["median"]),
             "vs_baseline": ratio(g["score"], g["baseline"]), "serial": g["serial"], "pci": g["pci"]}
            for g in gpus]


def worst_gpu(gpus: list[dict]) -> str:
    """The table's GPU column: `3:gemm fail 84%` for the worst GPU result, `8 ok` when all pass."""
    from ..burnin.judge.analyze import VERDICT_ORDER

    if not gpus:
        return "-"
    worst = min(gpus, key=lambda g: (VERDICT_ORDER.index(g["verdict"]), g["vs_median"] is None, g["vs_median"] or 0))
    if worst["verdict"] == "pass":
        return f"{len({g['gpu'] for g in gpus})} ok"
    rel = "" if worst["vs_median"] is None else f" {worst['vs_median']:.0%}"
    return f"{worst['gpu']}:{worst['test']} {worst['verdict']}{rel}"


def add_gpus(table: list[dict], burnin: dict[str, dict]) -> None:
    """Each row's `gpus` (per-GPU scores of its last burn-in; [] without per-GPU tests)."""
    for r in table:
        r["gpus"] = gpu_scores(burnin.get(r["node"], {}).get("gpus") or [])


def main(args: argparse.Namespace) -> int:
    from ..policy import HookGuard
    from ..slurm import SlurmError, get_adapter
    from . import load_config

    config = load_config(args.config)
    if config is None:
        return 2
    if args.lemons:
        return lemons_main(config, args)
    try:
        adapter = get_adapter(config)
        nodes = adapter.node_info(args.hostlist)
    except SlurmError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    if args.slurm_state:
        nodes = [n for n in nodes if args.slurm_state.lower() in [n.state, *(f.lower() for f in n.flags)]]
    names = [n.name for n in nodes]
    state_dir = config["hooks"]["state_dir"]
    from ..burnin.results.store import StoreError

    store_error = None
    parts = None
    try:
        burnin_facts = _burnin_facts(config, names)
        parts = _last_components(config)
    except StoreError as exc:  # say so: never show a broken store as "no burn-in yet"
        store_error, burnin_facts = str(exc), {}
        print(f"slurmqual: burn-in store unusable, burn-in columns left empty: {exc}", file=sys.stderr)
    from .. import nodestate
    from ..configproblem import RECORD_STATE_DIR, current, read_all

    state, unreadable = nodestate.read_all(state_dir, set(names))
    if unreadable:  # their nodes show no hook results; say why rather than hide it
        print(f"slurmqual: unreadable or malformed node state files (ignored, the next hook replaces them): "
              f"{', '.join(unreadable[:10])}{' ...' if len(unreadable) > 10 else ''}", file=sys.stderr)
    facts = gather(nodes, state, nodestate.requalify_pending(state_dir), burnin_facts,
                   retest_notes(config, adapter, burnin_facts))
    problems = current(read_all([RECORD_STATE_DIR, state_dir], set(names)),
                       {n: st.time for n, st in state.items()})
    table = rows(facts, time.time(), config["burnin"]["max_age_days"] * 86400)
    add_gpus(table, burnin_facts)
    add_components(table, burnin_facts, parts)
    for r in table:  # the last job preflight on the node (preflight/flow.py), if any
        st = state.get(r["node"])
        r["preflight"] = st.preflight if st is not None else None
    if args.state:
        table = [r for r in table if r["qualification"] == args.state]
    counts = summary(table)
    guard = HookGuard.from_config(config).status()
    if args.json:
        out = {"summary": counts, "total": len(table), "guard": guard}
        if store_error:
            out["store_error"] = store_error
        if problems:
            out["config_problems"] = problems
        if parts:
            out["components"] = {k: v for k, v in parts.items() if k != "failed_nics"}
        if not args.summary:
            out["nodes"] = table
        print(json.dumps(out))
    else:
        print(render(table, counts, guard, args.summary, problems, parts))
    return 1 if store_error else 0


def lemons_main(config, args) -> int:
    """`status --lemons`: from the nodes' events (store and spool); no Slurm call."""
    from .. import nodestate
    from ..burnin.results.store import StoreError, existing
    from ..remediation import duration, lemons
    from ..rma import events_of

    state_dir = config["hooks"]["state_dir"]
    r = config["remediation"]
    states, _bad = nodestate.read_all(state_dir)
    from .. import events

    names = set(states) | {str(ev.get("node")) for _p, ev in events.pending(state_dir)}
    if args.hostlist:
        from ..slurm import expand

        names &= set(expand(args.hostlist))
    try:
        with existing(config["store"]["path"]) as store:
            by_node = {n: events_of(state_dir, store, n) for n in sorted(names)}
    except StoreError as exc:
        print(f"slurmqual: burn-in store unusable: {exc}", file=sys.stderr)
        return 1
    found = lemons(by_node, r["lemon_count"], r["lemon_window_s"], time.time())
    if args.json:
        print(json.dumps({"lemon_count": r["lemon_count"], "window_s": r["lemon_window_s"], "lemons": found}))
        return 0
    print(f"lemons: {len(found)} node(s) with {r['lemon_count']} or more hardware faults within "
          f"{duration(r['lemon_window_s'])} (`slurmqual rma NODE` writes the evidence bundle)")
    for row in found:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(row["kinds"].items()))
        print(f"{row['node']:<16} {row['faults']:>3} faults ({kinds}); last "
              f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(row['last']))}: {row['last_detail'][:90]}")
    return 0
