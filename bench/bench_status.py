#!/usr/bin/env python3
"""`slurmqual status` for 4,096 nodes: synthetic `sinfo --json`, a store filled
with one burn-in run, one hook state file per node. Runs the real CLI end to
end (process start included) and prints the median time and its ratio to the
1-second target."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
N = int(os.environ.get("NODES", "4096"))


def setup(work: str) -> str:
    from slurmqual.burnin.store import RunRecord, open_store

    names = [f"gpu{i:04d}" for i in range(1, N + 1)]
    nodes = [{"name": n, "state": "idle", "state_flags": ["DRAIN"] if i % 97 == 0 else [],
              "reason": "slurmqual: burnin: slow" if i % 97 == 0 else ""} for i, n in enumerate(names)]
    with open(os.path.join(work, "sinfo.json"), "w") as fh:
        json.dump({"nodes": nodes}, fh)
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    with open(os.path.join(bindir, "sinfo"), "w") as fh:
        fh.write(f"#!/bin/sh\ncat {work}/sinfo.json\n")
    os.chmod(os.path.join(bindir, "sinfo"), 0o755)
    os.makedirs(os.path.join(work, "state", "nodes"))
    for i, n in enumerate(names):
        with open(os.path.join(work, "state", "nodes", f"{n}.json"), "w") as fh:
            json.dump({"node": n, "time": time.time(), "hook": "healthcheck", "status": "pass",
                       "checks": [{"name": "peermem", "status": "fail" if i % 211 == 0 else "pass",
                                   "message": "", "devices": [], "hint": ""}], "versions": {}}, fh)
    store = open_store(os.path.join(work, "s.db"))
    analysis = {"median": {"all_reduce:pair": 380.0}, "threshold": 0.9, "guard_tripped": False, "drain": [],
                "nodes": {n: {"verdict": "fail" if i % 97 == 0 else "pass", "score": 380.0 - i % 13} for i, n in enumerate(names)}}
    store.record_run(RunRecord("r1", time.time() - 3600, names), [], analysis)
    store.close()
    cfg = os.path.join(work, "sq.toml")
    with open(cfg, "w") as fh:
        fh.write(f'[slurm]\nbin_dir = "{bindir}"\n[hooks]\nstate_dir = "{work}/state"\n[store]\npath = "{work}/s.db"\n')
    return cfg


def main() -> int:
    work = tempfile.mkdtemp(prefix="sq-status-")
    try:
        cfg = setup(work)
        env = dict(os.environ, SLURMQUAL_CACHE_DIR=os.path.join(work, "cache"))
        argv = [sys.executable, "-m", "slurmqual", "status", "--config", cfg]
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        summary = out.stdout.strip().splitlines()[-1]
        times = []
        for _ in range(7):
            start = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        t = statistics.median(times)
        print(f"slurmqual status, {N} nodes: median {t * 1000:.0f} ms; ratio to 1 s target {t:.2f} "
              f"({'OK' if t < 1 else 'OVER'})\n  {summary}")
        return 0 if t < 1 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
