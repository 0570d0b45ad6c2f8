#!/usr/bin/env python3
"""`slurmqual status` at size: 4,096 nodes (synthetic `sinfo --json`), one
hook state file per node, and a store grown by a year of daily burn-ins
(RUNS=365 runs, every node judged in each, recorded through the store's own
record_run). Runs the real CLI end to end (process start included) and prints
the median time and its ratio to the targets: all nodes < 1 s, one node < 0.2 s.

The grown store takes minutes to build; it is kept under $TMPDIR keyed on the
size and on the store code, so a second run measures at once.

`--adapters`: the same `status` of 4,096 nodes read from one real Slurm 25.11
cluster (tests/slurmbuild.py, tests/slurmcluster.py: slurmctld knows 4,096
nodes, every 97th drained with a reason) through each adapter: pyslurm
(libslurm RPCs), the CLI (`scontrol show nodes --json`; `sinfo --json` groups
nodes from 23.02, its bare time is printed beside) and slurmrestd (JWT).
Prints, per adapter, the whole command (process start, the pyslurm probe,
config) and the adapter's `node_info()` alone in a warm process. Needs root
and ../shared/sources.
"""

from __future__ import annotations

import hashlib
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
RUNS = int(os.environ.get("RUNS", "365"))
TARGET_ALL, TARGET_ONE = 1.0, 0.2


def names() -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, N + 1)]


def grown_store(path: str) -> None:
    """RUNS daily runs, oldest first; a few nodes fail now and then, as in life."""
    from slurmqual.burnin.results.store import RunRecord, open_store

    nodes = names()
    store = open_store(path)
    store.db.execute("PRAGMA synchronous=OFF")  # building a bench fixture: no fsync per run
    start = time.time() - RUNS * 86400
    try:
        for day in range(RUNS):
            verdicts = {n: {"verdict": "fail" if (i + day) % 397 == 0 else "pass",
                            "score": 380.0 - (i + day) % 13} for i, n in enumerate(nodes)}
            analysis = {"median": {"all_reduce:pair": 380.0}, "threshold": 0.9, "guard_tripped": False,
                        "drain": [n for n, v in verdicts.items() if v["verdict"] == "fail"], "nodes": verdicts}
            store.record_run(RunRecord(f"r{day:04d}", start + day * 86400, nodes), [], analysis)
            if day % 50 == 0:
                print(f"  building store: run {day + 1}/{RUNS}", file=sys.stderr, flush=True)
    finally:
        store.close()


def cached_store() -> str:
    with open(os.path.join(REPO, "slurmqual", "burnin", "store.py"), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"slurmqual-bench-status-{N}x{RUNS}-{digest}.db")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        grown_store(tmp)
        os.replace(tmp, path)
    return path


def setup(work: str) -> str:
    nodes = [{"name": n, "state": "idle", "state_flags": ["DRAIN"] if i % 97 == 0 else
              (["NOT_RESPONDING"] if i % 389 == 0 else []),
              "reason": "slurmqual: burnin: slow" if i % 97 == 0 else ""} for i, n in enumerate(names())]
    with open(os.path.join(work, "sinfo.json"), "w") as fh:
        json.dump({"nodes": nodes}, fh)
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    # scontrol as fast as the real one: -V, and `show node X --oneliner` from a file per node.
    os.makedirs(os.path.join(work, "scontrol"))
    for n in nodes:
        flags = "+".join(["IDLE", *n["state_flags"]])
        reason = f" Reason={n['reason']} [root@2026-01-01T00:00:00]" if n["reason"] else ""
        with open(os.path.join(work, "scontrol", n["name"]), "w") as fh:
            fh.write(f"NodeName={n['name']} Arch=x86_64 State={flags} Weight=1{reason}\n")
    for tool, body in (("sinfo", f"cat {work}/sinfo.json"),
                       ("scontrol", f'[ "$1" = -V ] && echo "slurm 22.05.8" && exit 0\ncat "{work}/scontrol/$3"')):
        with open(os.path.join(bindir, tool), "w") as fh:
            fh.write(f"#!/bin/sh\n{body}\n")
        os.chmod(os.path.join(bindir, tool), 0o755)
    from slurmqual import nodestate
    from slurmqual.result import CheckResult, Status

    os.makedirs(nodestate.nodes_dir(os.path.join(work, "state")))
    for i, n in enumerate(names()):  # the hooks' own state format, written without their fsync
        st = nodestate.NodeState(n)
        st.merge("healthcheck", [CheckResult("peermem", Status.FAIL if i % 211 == 0 else Status.PASS, "")],
                 {"driver": "550.54.15"}, time.time())
        with open(nodestate.path(os.path.join(work, "state"), n), "w") as fh:
            json.dump(st.to_dict(), fh)
    shutil.copy(cached_store(), os.path.join(work, "s.db"))
    cfg = os.path.join(work, "sq.toml")
    with open(cfg, "w") as fh:
        fh.write(f'[slurm]\nbin_dir = "{bindir}"\n[hooks]\nstate_dir = "{work}/state"\n[store]\npath = "{work}/s.db"\n'
                 f"[burnin]\nmax_age_days = {RUNS + 30}\n")
    return cfg


def timed(argv: list[str], env: dict, repeat: int = 7) -> tuple[float, float, float, str]:
    """(median wall, best wall, median CPU of the process) over `repeat` runs, and the output.
    The best wall time is the one least disturbed by other load on the machine."""
    import resource

    out = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), min(walls), statistics.median(cpus), out.stdout


def main() -> int:
    work = tempfile.mkdtemp(prefix="sq-status-")
    try:
        cfg = setup(work)
        env = dict(os.environ, SLURMQUAL_CACHE_DIR=os.path.join(work, "cache"))
        base = [sys.executable, "-m", "slurmqual", "status", "--config", cfg]
        m_all, t_all, c_all, out_all = timed(base, env)
        m_one, t_one, c_one, out_one = timed(base + ["gpu0042"], env)
        rows = len(out_all.strip().splitlines()) - 2
        ok = t_all < TARGET_ALL and t_one < TARGET_ONE and rows == N

        def line(what, best, med, cpu, target):
            return (f"  {what}: best {best * 1000:.0f} ms (median {med * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms); "
                    f"ratio to {target:g} s target {best / target:.2f} ({'OK' if best < target else 'OVER'})")

        print(f"slurmqual status, {N} nodes, store of {RUNS} runs x {N} verdicts (load average "
              f"{os.getloadavg()[0]:.1f}):\n{line('all nodes', t_all, m_all, c_all, TARGET_ALL)}; {rows} rows\n"
              f"{line('one node ', t_one, m_one, c_one, TARGET_ONE)}\n"
              f"  {out_all.strip().splitlines()[-1]}\n  one node row: {out_one.strip().splitlines()[1]}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


ADAPTERS = ("pyslurm", "cli", "rest")


def _adapter_config(work: str, cluster, adapter: str, token_file: str | None, url: str | None) -> str:
    cfg = os.path.join(work, f"{adapter}.toml")
    rest = f'[slurm.rest]\nurl = "{url}"\nuser = "root"\ntoken_file = "{token_file}"\n' if adapter == "rest" else ""
    with open(cfg, "w") as fh:
        fh.write(f'[slurm]\nadapter = "{adapter}"\nslurm_conf = "{cluster.conf}"\nbin_dir = "{cluster.bin_dir}"\n'
                 f'timeout_s = 60\n{rest}[hooks]\nstate_dir = "{work}/state"\n[store]\npath = "{work}/s.db"\n')
    return cfg


def _in_process(cfg: str, repeat: int) -> tuple[float, float, int]:
    """(best, median) seconds of adapter.node_info() for all nodes, in one warm
    process (the first call, which loads pyslurm or reads slurmrestd's OpenAPI
    document, is left out), and the node count."""
    code = ("import statistics, sys, time\nfrom slurmqual.config import load\nfrom slurmqual.slurm import get_adapter\n"
            f"a = get_adapter(load({cfg!r}))\nn = len(a.node_info())\nts = []\n"
            f"for _ in range({repeat}):\n    t = time.perf_counter(); a.node_info(); ts.append(time.perf_counter() - t)\n"
            "print(min(ts), statistics.median(ts), n)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600)
    best, med, n = out.stdout.split()
    return float(best), float(med), int(n)


def adapters_main() -> int:
    """status of N nodes through pyslurm, the CLI and REST, on one real 25.11 cluster."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    import slurmbuild
    from slurmcluster import Cluster

    why = slurmbuild.why_unavailable("25.11") or (None if os.geteuid() == 0 else "needs root")
    if why:
        print(f"bench_status --adapters: Slurm 25.11 unavailable: {why}", file=sys.stderr)
        return 2
    slurmbuild.install_pyslurm(sys.executable, "25.11")
    work = tempfile.mkdtemp(prefix="sq-status-adapters-")
    os.chmod(work, 0o755)
    c = Cluster(os.path.join(work, "cluster"), 2, version="25.11")
    try:
        c.start(jwt=True)
        # The fleet slurmctld knows (no slurmd behind it: reads only), added by reconfigure.
        with open(c.conf, "a") as fh:
            fh.write(f"NodeName=gpu[0001-{N:04d}] NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=IDLE\n"
                     f"PartitionName=gpu Nodes=gpu[0001-{N:04d}] State=UP\n")
        c.run("scontrol", "reconfigure", timeout=120)
        c.wait_for(lambda: len(c.nodes()) == N + 2, 120, f"{N} more nodes after reconfigure")
        url = c.start_rest()
        from slurmqual.slurm import compress

        drained = [n for i, n in enumerate(names()) if i % 97 == 0]
        c.run("scontrol", "update", f"nodename={compress(drained)}", "state=drain",
              "reason=slurmqual: burnin: slow", timeout=120)
        tok = os.path.join(work, "jwt")
        with open(tok, "w") as fh:
            fh.write(c.token(lifespan=7200))
        os.chmod(tok, 0o600)
        env = dict(c.env, SLURMQUAL_CACHE_DIR=os.path.join(work, "cache"))
        env.pop("SLURMQUAL_CONFIG", None)
        sinfo = timed([c.tool("sinfo"), "--json"], env, repeat=5)
        print(f"slurmqual status, {N + 2} nodes of one real Slurm {c.slurm_version} cluster, per adapter "
              f"(load average {os.getloadavg()[0]:.1f}; best of 5, median in brackets):")
        for adapter in ADAPTERS:
            cfg = _adapter_config(work, c, adapter, tok, url)
            m_all, t_all, cpu, out = timed([sys.executable, "-m", "slurmqual", "status", "--config", cfg], env, repeat=5)
            rows = len(out.strip().splitlines()) - 2
            best, med, n = _in_process(cfg, 5)
            print(f"  {adapter:8s} status: {t_all * 1000:6.0f} ms ({m_all * 1000:.0f}, CPU {cpu * 1000:.0f}); "
                  f"node_info() alone: {best * 1000:5.0f} ms ({med * 1000:.0f}); {rows} rows, {n} nodes")
        print(f"  (bare `sinfo --json`, groups nodes from 23.02: {sinfo[1] * 1000:.0f} ms ({sinfo[0] * 1000:.0f}))")
        return 0
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(adapters_main() if "--adapters" in sys.argv[1:] else main())
