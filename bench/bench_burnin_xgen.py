#!/usr/bin/env python3
"""Burn-in verdicts on fleets from a generator that is not the project's own
(tests/fleet.py): a check that the analysis is not tuned to one noise model.

Fleets: groups of 16 with the job array's round-robin pairs (plan.rounds) and
one intra-node run per node; healthy nodes have their own spread (1%); a pair
runs at min(level a, level b) x noise; noise is gaussian, student-t(3) or
lognormal; transient congestion multiplies a share of pair measurements by
U(0.45, 0.85) (optionally intra runs too); failed tests. Retest rounds are
simulated as the run does them: the analysis' retest plan measured on the same
fleet, up to --retest submissions.

Right, per run: no healthy node drained; every node slow enough to be decided
(level <= 0.90 - 2.5 sd at sd <= 3%, else <= 0.90 - 3.5 sd) drained; no node
below 0.88 passes; retests <= max(2, 5% of the nodes); the guard not tripped.

Usage: python3 bench/bench_burnin_xgen.py [--nodes 512] [--seeds 8] [--rounds 3] [--retest 2] [--family NAME]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from slurmqual.burnin.judge.analyze import analyze  # noqa: E402
from slurmqual.burnin.records import Measurement  # noqa: E402
from slurmqual.burnin.judge.plan import groups, rounds  # noqa: E402

REF = 8589934592
BASE = 370.0

FAMILIES = {
    "borderline 0.85, 2%": dict(slow=[(0.85, 5)], noise=0.02),
    "borderline 0.87, 2%": dict(slow=[(0.87, 5)], noise=0.02),
    "borderline 0.85, 5%": dict(slow=[(0.85, 5)], noise=0.05),
    "many borderline, 2%": dict(slow=[(0.85, 12), (0.84, 12)], noise=0.02),
    "transient 4%": dict(slow=[(0.85, 5)], noise=0.02, tail=0.04),
    "transient 8%": dict(slow=[(0.80, 5)], noise=0.02, tail=0.08),
    "many borderline + transient 4%": dict(slow=[(0.85, 12), (0.83, 12)], noise=0.02, tail=0.04),
    "healthy only + transient 6%": dict(slow=[], noise=0.03, tail=0.06),
    "gaussian 8%": dict(slow=[(0.70, 5)], noise=0.08),
    "student-t(3) 3%": dict(slow=[(0.85, 5)], noise=0.03, kind="t3"),
    "lognormal 4% + transient 4%": dict(slow=[(0.80, 5)], noise=0.04, kind="lognorm", tail=0.04),
    "slow 0.85 and 0.6, 3% of nodes": dict(slow=[(0.85, 8), (0.6, 8)], noise=0.02, tail=0.02),
    "failed tests 5%": dict(slow=[(0.85, 5)], noise=0.02, failed=0.05),
}


class Fleet:
    def __init__(self, n: int, slow, noise: float, kind: str = "gauss", tail: float = 0.0, failed: float = 0.0,
                 intra_tail: bool = False, seed: int = 0):
        self.rng = random.Random(seed)
        self.nodes = [f"c{i:05d}" for i in range(n)]
        self.level = {x: 1.0 + self.rng.gauss(0, 0.01) for x in self.nodes}
        order = self.nodes[:]
        self.rng.shuffle(order)
        self.slow: dict[str, float] = {}
        for lv, count in slow:
            for _ in range(count):
                x = order.pop()
                self.slow[x] = self.level[x] = lv
        self.noise, self.kind, self.tail, self.failed, self.intra_tail = noise, kind, tail, failed, intra_tail

    def eps(self, pair: bool) -> float:
        r = self.rng
        if self.kind == "t3":
            t = r.gauss(0, 1) / math.sqrt(sum(r.gauss(0, 1) ** 2 for _ in range(3)) / 3)
            e = 1 + self.noise * t / math.sqrt(3)
        elif self.kind == "lognorm":
            e = math.exp(self.noise * r.gauss(0, 1))
        else:
            e = 1 + self.noise * r.gauss(0, 1)
        if self.tail and (pair or self.intra_tail) and r.random() < self.tail:
            e *= r.uniform(0.45, 0.85)
        return max(e, 0.01)

    def pair(self, a: str, b: str, task: int, rnd: int) -> Measurement:
        if self.failed and self.rng.random() < self.failed:
            return Measurement((a, b), 0.0, REF, "all_reduce", ok=False, task=task, round=rnd)
        return Measurement((a, b), BASE * min(self.level[a], self.level[b]) * self.eps(True), REF, "all_reduce",
                           gpu_model="H100", task=task, round=rnd)

    def intra(self, x: str, task: int) -> Measurement:
        return Measurement((x,), BASE * 1.2 * self.level[x] * self.eps(False), REF, "all_reduce", gpu_model="H100",
                           task=task)

    def first_run(self, n_rounds: int) -> list[Measurement]:
        out = []
        for t, g in enumerate(groups(self.nodes, 16)):
            out += [self.intra(x, t) for x in g]
            for r, rnd in enumerate(rounds(g, n_rounds)):
                out += [self.pair(a, b, t, r + 1) for a, b in rnd]
        return out

    def retest(self, plan, k: int) -> list[Measurement]:
        pairs = [tuple(p) for rnd in plan for p in rnd]
        nodes = list(dict.fromkeys(x for p in pairs for x in p))
        return [self.intra(x, 1000 + k) for x in nodes] + [self.pair(a, b, 1000 + k, 100 + k) for a, b in pairs]


def must_fail(level: float, noise: float) -> bool:
    return level <= 0.90 - (2.5 if noise <= 0.03 else 3.5) * noise


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=512)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="pair rounds of the first submission")
    ap.add_argument("--retest", type=int, default=2, help="automatic retest submissions (0: one-shot)")
    ap.add_argument("--seed-base", type=int, default=None)
    ap.add_argument("--family", default=None)
    args = ap.parse_args()
    base = args.seed_base if args.seed_base is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"{args.nodes} nodes, {args.rounds} rounds, {args.retest} retest submissions, seed base {base}")
    print(f"{'family':<34} {'right':>7} {'false drains':>13} {'missed':>7} {'retests/run':>12} {'follow-ups':>11}")
    ok = True
    budget = max(2, int(0.05 * args.nodes))
    for name, fam in FAMILIES.items():
        if args.family and args.family not in name:
            continue
        right = false = missed = retests = follow_max = 0
        for s in range(args.seeds):
            f = Fleet(args.nodes, seed=base + s, **fam)
            ms = f.first_run(args.rounds)
            a = analyze(ms, f.nodes)
            drained = set(a.drain)
            k = 0
            while a.retest_plan and k < args.retest and not a.guard_tripped:
                k += 1
                ms += f.retest(a.retest_plan, k)
                a = analyze(ms, f.nodes)
                drained |= set(a.drain)  # a drain the run made stays
            v = {x: a.nodes[x]["verdict"] for x in f.nodes}
            fd = [x for x in drained if x not in f.slow]
            miss = [x for x, lv in f.slow.items() if must_fail(lv, fam["noise"]) and x not in drained]
            miss += [x for x, lv in f.slow.items() if lv < 0.88 and v[x] == "pass"]
            rt = sum(1 for x in f.nodes if v[x] == "retest")
            good = not fd and not miss and rt <= budget and not a.guard_tripped
            right += good
            false += len(fd)
            missed += len(miss)
            retests += rt
            follow_max = max(follow_max, k)
        met = right == args.seeds and false == 0
        ok &= met
        print(f"{name:<34} {right / args.seeds:>7.0%} {false:>13} {missed:>7} {retests / args.seeds:>12.1f} "
              f"{follow_max:>11}  {'MET' if met else 'MISSED'}")
    print(f"target (every run right, 0 false drains): {'MET' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
