#!/usr/bin/env python3
"""Prolog speed: `slurmqual check --level fast` on the healthy 8-GPU/8-NIC example
vs bare `python3 -c pass`, same machine, same run. Target: ratio <= 4.

Usage: python3 bench/bench_check_fast.py [--runs N] [--config FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median_wall(argv: list[str], runs: int, env: dict) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--config", default=os.path.join(REPO, "config", "slurmqual.toml"))
    args = ap.parse_args()
    sys.path.insert(0, REPO)
    from slurmqual.nodetree import build

    work = tempfile.mkdtemp(prefix="sq-bench-")
    try:
        root = build("h100-roce-healthy", os.path.join(work, "node"))
        env = dict(os.environ, SLURMQUAL_CACHE_DIR=os.path.join(work, "cache"))
        check = ["--level", "fast", "--root", root, "--config", args.config]
        # Warm the validated-config cache once, as the first prolog after a config change would.
        subprocess.run([sys.executable, "-m", "slurmqual", "check", *check], env=env, capture_output=True)
        base = median_wall([sys.executable, "-c", "pass"], args.runs, env)
        rows = [("python3 -c pass", base)]
        rows.append(("python3 -m slurmqual check", median_wall([sys.executable, "-m", "slurmqual", "check", *check], args.runs, env)))
        script = shutil.which("slurmqual")
        if script:
            rows.append(("slurmqual check (console script)", median_wall([script, "check", *check], args.runs, env)))
        worst = 0.0
        for label, t in rows:
            ratio = t / base
            worst = max(worst, ratio)
            print(f"{label:<36} {t * 1000:7.1f} ms   ratio {ratio:4.2f}")
        print(f"worst ratio {worst:.2f} (target <= 4.00): {'OK' if worst <= 4 else 'OVER'}")
        return 0 if worst <= 4 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
