#!/usr/bin/env python3
"""Burn-in localisation on simulated fleets: 64, 256, 1024, 4096 nodes, 1% slow
nodes at 70% bandwidth, 3% noise, N seeds each. Prints, in the same run, recall
of slow nodes, false drains and test rounds for:

- slurmqual: intra-node test + 3 round-robin pair rounds per group of 16,
  fleet-relative verdicts (slurmqual.burnin.analyze); once with the slow node
  slow in every test, once slow on the network side only (intra test normal);
- random re-pairing with pass counting (imbue-style host validation, 15 rounds:
  a node is flagged when it fails most of its rounds);
- one all-node ring (finds that the fleet is slow, cannot say which node).

Target for slurmqual: recall 1.0 and zero false drains with at most 4 rounds at every size.
Usage: python3 bench/bench_burnin_sim.py [--seeds 100] [--sizes 64,256,1024,4096]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from fleet import measure, names  # noqa: E402
from slurmqual.burnin.analyze import analyze  # noqa: E402

SLOW, NOISE, THRESHOLD = 0.7, 0.03, 0.9


def fleet(n: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    nodes = names(n)
    return {x: SLOW for x in rng.sample(nodes, max(1, n // 100))}


def _retests(a) -> int:
    return sum(1 for v in a.nodes.values() if v["verdict"] == "retest")


def ours(n: int, slow: dict, seed: int) -> tuple[set[str], int]:
    a = analyze(measure(names(n), slow, noise=NOISE, seed=seed, n_rounds=3, group_size=16))
    return set(a.drain), 1 + 3, _retests(a)  # intra + three pair rounds


def ours_nic_only(n: int, slow: dict, seed: int) -> tuple[set[str], int]:
    """Same plan, but the slowness is on the network side only: the intra-node
    test sees nothing and the pairs alone must find the node."""
    a = analyze(measure(names(n), slow, noise=NOISE, seed=seed, n_rounds=3, group_size=16, intra=False))
    return set(a.drain), 1 + 3, _retests(a)  # the intra round still runs; it just shows nothing


def random_repairing(n: int, slow: dict, seed: int, n_rounds: int = 15) -> tuple[set[str], int]:
    rng = random.Random(seed + 7)
    nodes = names(n)
    fails = {x: 0 for x in nodes}
    for _ in range(n_rounds):
        rng.shuffle(nodes)
        vals = []
        for a, b in zip(nodes[::2], nodes[1::2]):
            v = 380 * min(slow.get(a, 1.0), slow.get(b, 1.0)) * (1 + NOISE * rng.gauss(0, 1))
            vals.append((a, b, v))
        med = statistics.median(v for _a, _b, v in vals)
        for a, b, v in vals:
            if v < THRESHOLD * med:
                fails[a] += 1
                fails[b] += 1
    return {x for x, f in fails.items() if f > n_rounds / 2}, n_rounds, 0


def ring(n: int, slow: dict, seed: int) -> tuple[set[str], int]:
    return set(), 1, 0  # one number for the whole fleet: slow, but nobody to drain


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--sizes", default="64,256,1024,4096")
    args = ap.parse_args()
    ok = True
    print(f"{'nodes':>6} {'method':<25} {'recall':>7} {'false drains':>13} {'rounds':>7} {'retests':>8} {'s/seed':>7}")
    for n in (int(x) for x in args.sizes.split(",")):
        for label, method in (("slurmqual", ours), ("slurmqual, NIC-side slow", ours_nic_only), ("random re-pairing x15", random_repairing), ("all-node ring", ring)):
            found = truth = false = retests = 0
            rounds_used = 0
            start = time.perf_counter()
            for seed in range(args.seeds):
                slow = fleet(n, seed)
                drained, rounds_used, retest = method(n, slow, seed)
                retests += retest
                truth += len(slow)
                found += len(drained & set(slow))
                false += len(drained - set(slow))
            recall = found / truth
            per = (time.perf_counter() - start) / args.seeds
            print(f"{n:>6} {label:<25} {recall:>7.3f} {false:>13} {rounds_used:>7} {retests:>8} {per:>7.3f}", flush=True)
            if label.startswith("slurmqual") and (recall < 1.0 or false or rounds_used > 4):
                ok = False
    print("slurmqual target (recall 1.0, 0 false drains, <= 4 rounds at every size):", "MET" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
