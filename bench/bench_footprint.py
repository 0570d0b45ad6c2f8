#!/usr/bin/env python3
"""Compute-node footprint and prolog speed of the wheel.

Builds the wheel (or takes --wheel), installs it with its dependencies into a
fresh venv, and prints:
- the install's size: every installed distribution's files (from their RECORD),
  minus pip/setuptools that any venv brings; target < 40 MB;
- the prolog's wall time on the healthy 8-GPU/8-NIC example, as slurmd runs it
  (empty environment but SLURMD_NODENAME), through the wrapper `slurmqual install`
  writes and through the `slurmqual-prolog` console script, against today's
  path (the checkout's prolog/slurmqual-prolog wrapper running
  `python -m slurmqual hook prolog` in the same venv); target ratio <= 1.05
  (no slower than today, within run-to-run noise). The ratio is of CPU time
  (user+system, medians of interleaved runs): on a shared machine wall time
  swings with others' load; wall-time ratios are printed too.

Needs PyPI (or a pip index) for the dependencies. Usage:
    python3 bench/bench_footprint.py [--wheel FILE] [--runs N] [--keep]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE_TARGET_MB = 40.0
SPEED_TARGET = 1.05
VENV_OWN = {"pip", "setuptools", "wheel"}

SIZES = r"""
import importlib.metadata as md, json, os
out = {}
for d in md.distributions():
    name = d.metadata["Name"]
    total = 0
    for f in d.files or []:
        p = f.locate()
        try:
            total += os.lstat(p).st_size
        except OSError:
            pass
    out[name] = total
print(json.dumps(out))
"""


def build_wheel(dest: str) -> str:
    # sdist first, then the wheel from the unpacked sdist (what a release does;
    # nothing is written into the checkout).
    subprocess.run([sys.executable, "-m", "build", "-o", dest, REPO], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return glob.glob(os.path.join(dest, "slurmqual-*.whl"))[0]


def make_venv(path: str, wheel: str) -> str:
    subprocess.run(["/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable, "-m", "venv", path],
                   check=True)
    py = os.path.join(path, "bin", "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], check=True)
    return py


def sizes(py: str) -> dict[str, int]:
    return json.loads(subprocess.run([py, "-c", SIZES], check=True, capture_output=True, text=True).stdout)


def measure(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall, cpu) seconds of one run; cpu = user + system of the whole process
    tree, which load from other processes on a shared machine barely moves."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = subprocess.run(argv, env=env, cwd="/", capture_output=True, text=True).stderr
        raise SystemExit(f"{argv[0]} exited {proc.returncode}: {err.strip()[-400:]}")
    return took, usage.ru_utime + usage.ru_stime


def interleaved_medians(rows: list[tuple[str, list[str], dict]], runs: int) -> list[tuple[str, float, float]]:
    """Round-robin over the variants, so load from other processes hits all alike."""
    walls: dict[str, list[float]] = {label: [] for label, _a, _e in rows}
    cpus: dict[str, list[float]] = {label: [] for label, _a, _e in rows}
    for _ in range(runs):
        for label, argv, env in rows:
            w, c = measure(argv, env)
            walls[label].append(w)
            cpus[label].append(c)
    return [(label, statistics.median(walls[label]), statistics.median(cpus[label])) for label, _a, _e in rows]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel", default=None, help="use this wheel instead of building one")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="sq-footprint-")
    os.chmod(work, 0o755)
    try:
        wheel = args.wheel or build_wheel(os.path.join(work, "dist"))
        venv = os.path.join(work, "venv")
        py = make_venv(venv, wheel)
        per_dist = sizes(py)
        ours = {k: v for k, v in per_dist.items() if k.lower() not in VENV_OWN}
        total_mb = sum(ours.values()) / 1e6
        print(f"wheel: {os.path.basename(wheel)} ({os.path.getsize(wheel) / 1e3:.0f} kB)")
        for name, size in sorted(ours.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<28} {size / 1e6:7.2f} MB")
        heavy = sorted(n for n in ours if n.lower() in {"matplotlib", "numpy", "pillow", "fonttools"})
        print(f"compute-node install (base wheel + dependencies, without the venv's own pip): {total_mb:.1f} MB "
              f"(target < {SIZE_TARGET_MB:.0f} MB): {'OK' if total_mb < SIZE_TARGET_MB else 'OVER'}"
              + (f"; heavy packages present: {', '.join(heavy)}" if heavy else ""))

        # Prolog timing on a healthy example node.
        sys.path.insert(0, REPO)
        from slurmqual.nodetree import build

        tree = build("h100-roce-healthy", os.path.join(work, "node"))
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as fh:
            fh.write(f'[node]\nroot = "{tree}"\ngpus = 8\n[fabric]\nnics = 8\n[hooks]\nsyslog = false\n'
                     f'log_file = "{work}/log/slurmqual.log"\nstate_dir = "{work}/state"\n')
        cache = os.path.join(work, "cache")
        prefix = os.path.join(work, "opt")
        subprocess.run([os.path.join(venv, "bin", "slurmqual"), "install", "--prefix", prefix, "--config", cfg,
                        "--cache-dir", cache], check=True, stdout=subprocess.DEVNULL)
        env = {"SLURMD_NODENAME": "n1", "SLURMQUAL_CONFIG": cfg, "SLURMQUAL_CACHE_DIR": cache}
        today = dict(env, SLURMQUAL_PYTHON=py)
        rows = [
            ("python -c pass (floor)", [py, "-c", "pass"], env),
            ("today: prolog/slurmqual-prolog", [os.path.join(REPO, "prolog", "slurmqual-prolog")], today),
            ("installed wrapper (libexec)", [os.path.join(prefix, "libexec", "prolog", "slurmqual-prolog")], env),
            ("console script slurmqual-prolog", [os.path.join(venv, "bin", "slurmqual-prolog")], env),
        ]
        measure(rows[1][1], rows[1][2])  # warm the validated-config cache
        timed = interleaved_medians(rows, args.runs)
        base_wall, base_cpu = timed[1][1], timed[1][2]
        worst = 0.0
        for label, w, c in timed:
            ratio = c / base_cpu
            if label.startswith(("installed", "console")):
                worst = max(worst, ratio)
            print(f"{label:<36} cpu {c * 1000:6.1f} ms  (wall {w * 1000:6.1f} ms)   cpu vs today {ratio:4.2f}"
                  f"   wall vs today {w / base_wall:4.2f}")
        print(f"prolog: worst CPU-time ratio vs today {worst:.2f} (target <= {SPEED_TARGET:.2f}): "
              f"{'OK' if worst <= SPEED_TARGET else 'SLOWER'}")
        return 0 if total_mb < SIZE_TARGET_MB and worst <= SPEED_TARGET else 1
    finally:
        if args.keep:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
