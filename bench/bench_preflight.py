#!/usr/bin/env python3
"""`slurmqual preflight` (issue #24): what it finds in one pass, and what it costs.

1. **Detection** on generated allocations (no processes: measurement lines
   as the pair rounds write them, judged by preflight.judge, i.e. the
   burn-in's analysis), over the pair plan the preflight runs (flow.rounds_for,
   [preflight] partners) and, for nodes the first pass leaves undecided,
   one retest round with the burn-in's retest plan (as the preflight runs it). Per allocation size (8, 16, 64, 512 nodes), with
   the fleet's stored medians and without (the allocation's own median),
   families:
   - slow node: one node at 0.85 (every path), Gaussian pair noise 1% / 2%;
   - heavy tail: 1.5% noise and transient hits on 3% of pairs (0.7-0.9);
   - slow NIC: one node's rail 1 of 4 at 0.5 (per-rail lines beside nccl-tests);
   - slow link: one pair at 0.6 between two healthy nodes (no end may fail);
   - slow switch: one leaf of 8 nodes at 0.8 with the topology known: its
     nodes are the "bad" ones here (slow for a job: *found* means left out of
     --need), and none may *fail* (a switch is not a node: never drained).
   A slow node / NIC is *found* when it is not `pass` (not chosen by --need);
   *failed* when its verdict is `fail` (drained with --drain). A healthy node
   is *dropped* when it is not `pass`; *false fail* when `fail`.
   Targets: a node 15% slow found in >= 99%, a healthy node dropped in < 0.5%.
2. **Time** of a whole preflight (flow.preflight: checks step, pair rounds,
   judgement, one retest round when the first pass leaves nodes undecided, choice, files) at 8, 64 and 512 nodes, with the stand-in tools
   (tests/fakebin all_reduce_perf and ib_write_bw, `slurmqual check` on an
   example node tree) launched by a stand-in `srun` (bench/standin/srun) that
   runs every task on this machine: all nodes share its CPUs, so the time is
   the harness's and the stand-ins' CPU, not a real fabric's (a real
   cluster runs each node's part on that node, at the same time).

    python3 bench/bench_preflight.py [--trials 200] [--sizes 8,16,64,512] [--no-timing] [--timing-sizes 8,64[,512]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from slurmqual.burnin.judge.analyze import Params  # noqa: E402
from slurmqual.preflight import judge  # noqa: E402
from slurmqual.preflight.flow import rounds_for, speed_reason  # noqa: E402

REF = 8589934592
BASE, RAIL_BASE = 400.0, 392.0
RAILS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]


class Alloc:
    """One generated allocation: per-node factor, per-(node, rail) factor,
    per-link factor, per-leaf factor, and the pair noise."""

    def __init__(self, n: int, rng: random.Random, noise: float, hit_rate: float = 0.0, rails: bool = False,
                 leaf_size: int = 8):
        self.nodes = [f"g{i:04d}" for i in range(n)]
        self.rng, self.noise, self.hit_rate, self.rails = rng, noise, hit_rate, rails
        self.node = {x: 1.0 for x in self.nodes}
        self.nic: dict[tuple[str, str], float] = {}
        self.link: dict[frozenset, float] = {}
        self.leaf_of = {x: f"leaf{i // leaf_size}" for i, x in enumerate(self.nodes)}
        self.leaf: dict[str, float] = {}

    def _pair(self, a: str, b: str) -> float:
        f = min(self.node[a], self.node[b]) * self.link.get(frozenset((a, b)), 1.0)
        for x in (a, b):
            f *= self.leaf.get(self.leaf_of[x], 1.0) if self.leaf_of[a] != self.leaf_of[b] or x == a else 1.0
        f *= 1 + self.rng.gauss(0, self.noise)
        if self.hit_rate and self.rng.random() < self.hit_rate:
            f *= self.rng.uniform(0.7, 0.9)
        return f

    def lines(self, plan) -> list[dict]:
        out = []
        for r, rnd in enumerate(plan):
            for a, b in rnd:
                out.append({"nodes": [a, b], "busbw": round(BASE * self._pair(a, b), 2), "size": REF,
                            "test": "all_reduce", "ok": True, "round": r})
                if self.rails:
                    for rail in RAILS:
                        f = self._pair(a, b) * min(self.nic.get((a, rail), 1.0), self.nic.get((b, rail), 1.0))
                        out.append({"nodes": [a, b], "busbw": round(RAIL_BASE * f, 2), "size": 1048576,
                                    "test": "ib_write_bw", "rail": rail, "ok": True, "round": r})
        return out

    def levels(self) -> dict[str, float]:
        out = {"all_reduce:pair": BASE}
        if self.rails:
            out.update({f"ib_write_bw:rail:{r}": RAIL_BASE for r in RAILS})
        return out


def topology_for(alloc: Alloc, tmp: str):
    from slurmqual.burnin.judge.topology import from_config

    leaves: dict[str, list[str]] = {}
    for x, s in alloc.leaf_of.items():
        leaves.setdefault(s, []).append(x)
    path = os.path.join(tmp, "topology.conf")
    with open(path, "w") as fh:
        fh.write("".join(f"SwitchName={s} Nodes={','.join(ns)}\n" for s, ns in leaves.items()))
        fh.write(f"SwitchName=spine Switches={','.join(leaves)}\n")
    return from_config(path)


FAMILIES = {
    # name: (noise, hit rate, rails, what is wrong)
    "slow node 1%": (0.01, 0.0, False, "node"),
    "slow node 2%": (0.02, 0.0, False, "node"),
    "heavy tail": (0.015, 0.03, False, "node"),
    "slow NIC": (0.01, 0.0, True, "nic"),
    "slow link": (0.01, 0.0, False, "link"),
    "slow switch": (0.01, 0.0, False, "switch"),
}


def trial(size: int, family: str, stored: bool, seed: int, tmp: str, partners: int) -> dict:
    noise, hits, rails, what = FAMILIES[family]
    rng = random.Random(seed)
    a = Alloc(size, rng, noise, hits, rails)
    bad: set[str] = set()
    topo = None
    if what == "node":
        x = rng.choice(a.nodes)
        a.node[x] = 0.85
        bad = {x}
    elif what == "nic":
        x = rng.choice(a.nodes)
        a.nic[(x, "mlx5_1")] = 0.5
        bad = {x}
    elif what == "link":
        x, y = rng.sample(a.nodes, 2)
        a.link[frozenset((x, y))] = 0.6
        plan_pairs = None  # the link must be in the plan to matter: choose one the plan measures
    elif what == "switch":
        if size < 16:
            return {}
        slow = rng.choice(sorted(set(a.leaf_of.values())))
        a.leaf[slow] = 0.8
        bad = {x for x, s in a.leaf_of.items() if s == slow}  # slow for a job, but no node to drain
        topo = topology_for(a, tmp)
    switch_of = a.leaf_of if topo is not None else None
    plan = rounds_for(a.nodes, switch_of, partners)
    if what == "link":
        x, y = rng.choice([p for rnd in plan for p in rnd])
        a.link = {frozenset((x, y)): 0.6}
    raw = a.lines(plan)
    levels = a.levels() if stored else {}
    analysis, mode, _ = judge.analyse(raw, a.nodes, Params(), {}, levels, topo, 4)
    retest = (analysis or {}).get("retest_plan") or []
    if retest:  # the preflight's one retest round (flow._steps): new, proven partners
        raw += [dict(m, retest=1) for m in a.lines([[tuple(p) for p in rnd] for rnd in retest])]
        analysis, mode, _ = judge.analyse(raw, a.nodes, Params(), {}, levels, topo, 4)
    reports = {x: {"node": x, "status": "pass", "checks": [{"name": "peermem", "status": "pass"}]} for x in a.nodes}
    out = judge.outcomes(a.nodes, reports, raw, analysis, speed_reason)
    healthy = [x for x in a.nodes if x not in bad]
    return {"bad": len(bad), "found": sum(out[x].verdict != "pass" for x in bad),
            "failed": sum(out[x].verdict == "fail" for x in bad), "healthy": len(healthy),
            "dropped": sum(out[x].verdict != "pass" for x in healthy),
            "false_fail": sum(out[x].verdict == "fail" for x in healthy), "mode": mode,
            "pairs": min(len({q for rnd in plan for p in rnd if x in p for q in p if q != x}) for x in a.nodes)}


def detection(sizes: list[int], trials: int, seed0: int, partners: int) -> None:
    print(f"## Detection in one pass (partners {partners}, seeds from {seed0})\n")
    print("| nodes | judged against | family | trials | min partners | bad found | bad failed | "
          "healthy dropped | healthy failed | s/trial |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            n = trials if size <= 64 else max(4, trials // 10)
            for stored in (True, False):
                for family in FAMILIES:
                    tot: dict[str, float] = {}
                    t0 = time.perf_counter()
                    pairs = 99
                    done = 0
                    for k in range(n):
                        r = trial(size, family, stored, seed0 + k, tmp, partners)
                        if not r:
                            continue
                        done += 1
                        pairs = min(pairs, r["pairs"])
                        for key in ("bad", "found", "failed", "healthy", "dropped", "false_fail"):
                            tot[key] = tot.get(key, 0) + r[key]
                    if not done:
                        continue
                    dt = (time.perf_counter() - t0) / done

                    def pct(num: str, den: str) -> str:
                        return "-" if not tot.get(den) else f"{100 * tot[num] / tot[den]:.2f}%"
                    print(f"| {size} | {'stored medians' if stored else 'own median'} | {family} | {done} | {pairs} | "
                          f"{pct('found', 'bad')} | {pct('failed', 'bad')} | {pct('dropped', 'healthy')} | "
                          f"{pct('false_fail', 'healthy')} | {dt:.3f} |", flush=True)


# -- time of a whole preflight with the stand-in tools ------------------------------------

def timing(sizes: list[int], budget: float) -> None:
    from slurmqual.config import load
    from slurmqual.nodetree import build
    from slurmqual.preflight.flow import Request, preflight

    print("\n## Time of a whole preflight with the stand-in tools (this machine's CPUs run every node)\n")
    print("| nodes | rails | checks s | network s | judge s | total s | pair rounds | partners/node | pass |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            tree = build("h100-roce-healthy", os.path.join(tmp, "tree"))
            tools = os.path.join(tmp, "tools")
            os.makedirs(tools)
            for t in ("all_reduce_perf", "ib_write_bw"):
                shutil.copy(os.path.join(REPO, "tests", "fakebin", t), tools)
            with open(os.path.join(tools, "fabric.json"), "w") as fh:
                json.dump({"base": 400, "noise": 0.01, "rail_base": 392, "seed": 1}, fh)
            rails = RAILS[:2]
            cfg = os.path.join(tmp, "c.toml")
            with open(cfg, "w") as fh:
                fh.write(f'[node]\ngpus = 8\nroot = "{tree}"\n[fabric]\nnics = 8\nrate_gbps = 400\n'
                         f'[hooks]\nstate_dir = "{tmp}/state"\nlog_file = "{tmp}/sq.log"\nsyslog = false\n'
                         # the checks step's share is hooks.deadline_s + 10 s: here every node's checks share 2 cores
                         f'deadline_s = {max(30, size)}\n'
                         f'[burnin]\nnccl_tests_dir = "{tools}"\nperftest_dir = "{tools}"\ngpus_per_node = 1\n'
                         f'srun_mpi = "none"\nrails = {json.dumps(rails)}\nrail_server_wait_s = 0.2\n'
                         f'[store]\npath = "{tmp}/none.db"\n[preflight]\nrail_duration_s = 1\n')
            config = load(cfg, use_cache=False)
            env = {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": f"g[0001-{size:04d}]"}
            old_path = os.environ["PATH"]
            os.environ["PATH"] = os.path.join(HERE, "standin") + os.pathsep + old_path
            os.environ["SLURMQUAL_STANDIN_PYTHON"] = sys.executable
            t0 = time.monotonic()
            try:
                run = preflight(config, Request(out_dir=tmp, time_s=budget), lambda: None, log=lambda m: None,
                                env=env)
            finally:
                os.environ["PATH"] = old_path
            total = time.monotonic() - t0
            met = [len(set(p)) for p in run.pairs.values()]
            passed = sum(o.verdict == "pass" for o in run.outcomes.values())
            rounds = len({m.get("round") for m in run.raw if m.get("test") == "all_reduce"})
            print(f"| {size} | {len(rails)} | {run.phases.get('checks', 0):.1f} | {run.phases.get('network', 0):.1f} | "
                  f"{run.phases.get('judge', 0):.2f} | {total:.1f} | {rounds} | {min(met) if met else 0}-"
                  f"{max(met) if met else 0} | {passed}/{size} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200, help="allocations per family up to 64 nodes (a tenth at 512)")
    ap.add_argument("--sizes", default="8,16,64,512")
    ap.add_argument("--partners", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--timing-only", action="store_true")
    ap.add_argument("--timing-sizes", default="8,64",
                    help="512 starts about 1,000 stand-in processes at once per rail round (a 2-core machine: minutes, "
                         "several GiB); ask for it on a machine of its own")
    ap.add_argument("--budget", type=float, default=1800, help="--time of the timed preflights (s)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    if not args.timing_only:
        detection([int(s) for s in args.sizes.split(",")], args.trials, seed, args.partners)
    if not args.no_timing:
        timing([int(s) for s in args.timing_sizes.split(",")], args.budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
