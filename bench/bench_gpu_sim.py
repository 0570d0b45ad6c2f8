#!/usr/bin/env python3
"""Per-GPU burn-in judgement on simulated fleets (slurmqual.burnin.gpus).

Each GPU's number for a test is what the parsers report: the median of the
tool's readings over the second half of its run (30 readings here: a 60 s
gpu_burn or dcgmproftester run). Each reading carries run noise (2-5% sd, or
heavy-tailed: Student t with 2 degrees of freedom, scaled to 3%); each GPU a
persistent part-to-part spread of 0.5%.

Scenarios, 8 GPUs per node, 64 and 512 nodes, many seeds:
- slow_gpu: one GPU of eight 15% slow (0.85) on 1% of the nodes (gemm);
- slow_host_link: one GPU's host-to-device path at 0.6 (h2d);
- slow_hbm: one GPU's HBM at 0.8 (hbm);
- near_line: one GPU at 0.85-0.87 (just below the 90% line);
- heavy_tail: slow_gpu with heavy-tailed reading noise;
- mixed_models: half the fleet H200 (1.3x the H100 numbers), slow GPUs on
  both; the models must never be compared (no H200 named slow for being
  fast, no H100 for being slower than an H200);
- sdc: one GPU with compare errors (and a normal speed).

Targets (printed): the slow GPU named (verdict fail or retest, on the right
GPU) in >= 99% of runs; <= 0.1% of healthy GPUs flagged (fail or retest);
mixed models never compared; SDC always fails. Also printed: how often a slow
GPU is drained outright (below the noise margin) rather than retested.

Usage: python3 bench/bench_gpu_sim.py [--seeds N] [--sizes 64,512]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from slurmqual.burnin.gpus import GpuMeasurement, judge  # noqa: E402

READINGS = 30
BASE = {"gemm": 700.0, "h2d": 55.0, "hbm": 3000.0}
MODELS = {"NVIDIA H100 80GB HBM3": 1.0, "NVIDIA H200": 1.3}


def reading_noise(rng: random.Random, sigma: float, heavy: bool) -> float:
    if heavy:  # Student t, 2 dof: heavy tails, scaled so its IQR matches a 3% normal
        t = rng.gauss(0, 1) / max(1e-9, ((rng.gauss(0, 1) ** 2 + rng.gauss(0, 1) ** 2) / 2) ** 0.5)
        return 0.03 * t / 1.22
    return rng.gauss(0, sigma)


def fleet(rng: random.Random, nodes: int, scenario: str, test: str):
    """Measurements and the truth: the slow (node, gpu) set and the SDC set."""
    sigma = rng.uniform(0.02, 0.05)
    heavy = scenario == "heavy_tail"
    n_slow = max(1, nodes // 100)
    slow_nodes = rng.sample(range(nodes), n_slow)
    slow = {(f"n{i:04d}", rng.randrange(8)): (rng.uniform(0.85, 0.87) if scenario == "near_line" else
                                               {"slow_host_link": 0.6, "slow_hbm": 0.8}.get(scenario, 0.85))
            for i in slow_nodes}
    sdc = set()
    if scenario == "sdc":  # one GPU with compare errors at a normal speed, no slow GPU
        sdc, slow = {next(iter(slow))}, {}
    ms = []
    for i in range(nodes):
        node = f"n{i:04d}"
        model = "NVIDIA H200" if scenario == "mixed_models" and i % 2 else "NVIDIA H100 80GB HBM3"
        for g in range(8):
            part = 1 + rng.gauss(0, 0.005)
            factor = 1.0 if (node, g) in sdc else slow.get((node, g), 1.0)
            level = BASE[test] * MODELS[model] * part * factor
            value = median(level * (1 + reading_noise(rng, sigma, heavy)) for _ in range(READINGS))
            ms.append(GpuMeasurement((node,), g, test, round(value, 3), "TFLOPS" if test == "gemm" else "GB/s",
                                     3 if (node, g) in sdc else 0, True, model, f"0000:{0x18 + 0x20 * g:02x}:00.0"))
    return ms, slow, sdc


SCENARIOS = {"slow_gpu": "gemm", "slow_host_link": "h2d", "slow_hbm": "hbm", "near_line": "gemm",
             "heavy_tail": "gemm", "mixed_models": "gemm", "sdc": "gemm"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--sizes", default="64,512")
    args = ap.parse_args()
    t0 = time.time()
    ok = True
    print(f"{'scenario':15} {'nodes':>5} {'runs':>4} {'named':>7} {'drained':>8} {'healthy flagged':>16} {'mixed ok':>9}")
    for scenario, test in SCENARIOS.items():
        for size in (int(s) for s in args.sizes.split(",")):
            named = drained = slow_total = flagged = healthy = 0
            mixed_ok = True
            for seed in range(args.seeds):
                rng = random.Random(f"{scenario}:{size}:{seed}")
                ms, slow, sdc = fleet(rng, size, scenario, test)
                j = judge(ms, 0.9, 0.01, 0.01)
                if scenario == "mixed_models" and len([k for k in j.keys if k.startswith("gemm:gpu:")]) != 2:
                    mixed_ok = False
                for node, v in j.nodes.items():
                    for g, tests in v["gpus"].items():
                        verdict = tests[test]["verdict"]
                        key = (node, int(g))
                        if key in slow or key in sdc:
                            slow_total += 1
                            named += verdict in ("fail", "retest") if key in slow else verdict == "fail"
                            drained += verdict == "fail"
                        else:
                            healthy += 1
                            flagged += verdict in ("fail", "retest")
            rate, frate = named / max(slow_total, 1), flagged / max(healthy, 1)
            good = rate >= 0.99 and frate <= 0.001 and mixed_ok
            ok &= good
            print(f"{scenario:15} {size:5d} {args.seeds:4d} {rate:7.2%} {drained / max(slow_total, 1):8.2%} "
                  f"{frate:16.4%} {'yes' if mixed_ok else 'NO':>9}{'' if good else '  <- MISSES TARGET'}")
    print(f"targets: named >= 99%, healthy flagged <= 0.1%, models never compared: {'MET' if ok else 'NOT MET'} "
          f"({time.time() - t0:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
