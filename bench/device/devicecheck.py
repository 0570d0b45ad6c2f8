#!/usr/bin/env python3
"""The Python half of bench/device/check.sh, run by the python of the venv the
wheel was installed into (so it exercises the installed package, not a checkout).

  runconfig INIT OUT --work W [--root TREE]   the config init wrote, plus where this run keeps its state
  checks --config C --level L --work W        each check: verdict, reason, time
  hooks --config C --work W [--runs N]        prolog/epilog/healthcheck through the installed wrapper,
                                              slurmd's environment, vs this venv's `python3 -c pass`
  tools --config C --work W --tools-dir D [--nccl-tests-dir N] [--seconds S]
                                              gpu_burn, nvbandwidth, dcgmproftester and nccl-tests through
                                              the burn-in task's own runner for this node (srun: bin/srun)

Each prints report lines; exit 1 when something did not pass (a check failed or
errored, a hook exited non-zero), so the shell script can say so at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def runconfig(args) -> int:
    """init's file with node.root (a tree), the hooks' state/log under the work
    dir, no syslog, and Slurm out of reach (none on this machine: a drain the
    hooks try fails fast and is logged); DCGM at its quick level (minutes, not 15)."""
    with open(args.init, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    if args.root != "/":
        root = f'root = {json.dumps(args.root)}   # device check: the node tree'
        if "[node]" in lines:
            lines.insert(lines.index("[node]") + 1, root)
        else:
            lines += ["", "[node]", root]
    w = args.work
    lines += ["", "# device check run settings (bench/device/check.sh)", "[hooks]", "syslog = false",
              f"log_file = {json.dumps(w + '/log/slurmqual.log')}", f"state_dir = {json.dumps(w + '/state')}",
              "deadline_s = 120", "", "[slurm]", f"bin_dir = {json.dumps(w + '/no-slurm')}", "retries = 1",
              "timeout_s = 2", "", "[checks.dcgm]", "run_level = 1", "timeout_s = 120"]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(args.out, 0o644)
    return 0


def checks(args) -> int:
    """Every check of the level, one at a time, as `slurmqual check` runs them
    (one Context: the probes they share are read once, as in a hook)."""
    from slurmqual.checks import Context, run_one, select
    from slurmqual.config import load
    from slurmqual.fsroot import FsRoot

    config = load(args.config, use_cache=False)
    root = config.node_root(None)
    ctx = Context(FsRoot(root), config, level=args.level, deadline=time.monotonic() + 900,
                  command_timeout=config["hooks"]["command_timeout_s"], state_dir=os.path.join(args.work, "state"))
    bad = 0
    for spec in select(None, args.level):
        start = time.perf_counter()
        r = run_one(spec, ctx)
        ms = (time.perf_counter() - start) * 1000
        verdict = {"na": "n/a"}.get(r.status.value, r.status.value)
        flag = "" if r.status.value in ("pass", "na", "skip") else "   <-- NOT PASSING"
        bad += bool(flag)
        print(f"  {spec.name:<17} {spec.level:<8} {verdict:<5} {ms:8.1f} ms  {r.message}{flag}")
        if flag and r.hint:
            print(f"  {'':<17} hint: {r.hint}")
    for name, tb in ctx.memo.get("_tracebacks", []):
        print(f"  {name}: CRASHED inside the check:\n" + "\n".join("    " + ln for ln in tb.splitlines()))
        bad += 1
    print(f"  level {args.level}: {bad} not passing")
    return 1 if bad else 0


def _timed(argv: list[str], env: dict) -> tuple[float, float, int, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p.returncode, p.stderr


def hook_env(hook: str, node: str) -> dict:
    """What slurmd gives each hook (slurm.conf(5) 'Prolog and Epilog Scripts'):
    job variables for prolog/epilog, no PATH; the health check only the node."""
    env = {"SLURMD_NODENAME": node}
    if hook != "healthcheck":
        env.update({"SLURM_JOB_ID": "4242", "SLURM_JOBID": "4242", "SLURM_JOB_USER": "root", "SLURM_JOB_UID": "0",
                    "SLURM_JOB_GID": "0", "SLURM_JOB_NODELIST": node, "SLURM_JOB_PARTITION": "gpu",
                    "SLURM_SCRIPT_CONTEXT": f"{hook}_slurmd", "SLURM_CLUSTER_NAME": "device"})
    return env


def hooks(args) -> int:
    """Each hook through the wrapper `slurmqual install` writes (this venv's
    python -I), alternated with the same python's bare start; medians."""
    from slurmqual.nodeinstall.templates import wrapper_text

    node = os.uname().nodename.split(".")[0]
    cache = os.path.join(args.work, "cache")
    bare = [sys.executable, "-c", "pass"]
    bad = 0
    print(f"  {'':<12} {'wall median':>12} {'cpu median':>11} {'bare python':>12} {'ratio':>6} {'cpu ratio':>9}  exit")
    for hook in ("prolog", "epilog", "healthcheck"):
        wrapper = os.path.join(args.work, f"slurmqual-{hook}")
        with open(wrapper, "w", encoding="utf-8") as fh:
            fh.write(wrapper_text(hook, sys.executable, config=args.config, cache_dir=cache))
        os.chmod(wrapper, 0o755)
        env = hook_env(hook, node)
        first = _timed([wrapper], env)           # the first run after a config change validates it (pydantic)
        runs_h, runs_b, codes = [], [], {first[2]}
        for _ in range(args.runs):
            runs_b.append(_timed(bare, {}))
            h = _timed([wrapper], env)
            runs_h.append(h)
            codes.add(h[2])
        wall_h, cpu_h = statistics.median(r[0] for r in runs_h), statistics.median(r[1] for r in runs_h)
        wall_b, cpu_b = statistics.median(r[0] for r in runs_b), statistics.median(r[1] for r in runs_b)
        flag = "" if codes == {0} else "   <-- NOT PASSING"
        bad += bool(flag)
        print(f"  {hook:<12} {wall_h * 1000:9.1f} ms {cpu_h * 1000:8.1f} ms {wall_b * 1000:9.1f} ms "
              f"{wall_h / wall_b:6.2f} {cpu_h / cpu_b if cpu_b else float('nan'):9.2f}  "
              f"{','.join(map(str, sorted(codes)))}{flag}")
        if first[1] and first[3].strip():
            print(f"  {hook} stderr (first run): {first[3].strip()[-400:]}")
    print(f"  ({args.runs} runs each, alternated; first run after the config change not counted; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    log = os.path.join(args.work, "log", "slurmqual.log")
    if os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as fh:
            tail = fh.read().splitlines()[-8:]
        print("  hook log (last lines):")
        print("\n".join(f"    {ln[:300]}" for ln in tail))
        if any("cannot read node state from Slurm" in ln for ln in tail):
            print("  (no Slurm on this machine: the epilog and health check cannot ask it for the node's state; "
                  "they log it and exit 0, as on a node whose slurmctld is down)")
    return 1 if bad else 0


def tools(args) -> int:
    """The tools in --tools-dir through the task's own runners for this node:
    gputask.run_gpu_tests (gpu_burn, dcgmproftester, nvbandwidth; one srun step)
    and task.run_batch (the intra-node nccl-tests run); their measurement lines
    as a task writes them, and `slurmqual burnin parse` of each log."""
    from slurmqual.config import load

    from slurmqual.burnin.run import gputask, task

    config = load(args.config, use_cache=False)
    node = os.uname().nodename.split(".")[0]
    gpus = config["node"]["gpus"]
    if not gpus:
        print(f"  node.gpus = {gpus} in the config init wrote: no GPU to run the tools on (not run)")
        return 0
    cfg = dict(config["burnin"], gpu_tools_dir=args.tools_dir, gpu_test_s=args.seconds, gpus_per_node=gpus,
               nccl_tests_dir=args.nccl_tests_dir or args.tools_dir, launcher="srun", srun_mpi="none",
               min_bytes="8M", max_bytes=args.max_bytes, test_time_limit="00:03:00")
    present = [t for t in gputask.BINARIES if gputask.binary(cfg, t)]
    cfg["gpu_tests"] = list(gputask.BINARIES)   # a tool not built is reported untested, as a task does
    logs = os.path.join(args.work, "logs")
    os.makedirs(logs, exist_ok=True)
    lines = gputask.run_gpu_tests(cfg, [node], logs, task=0)
    nccl = os.path.join(cfg["nccl_tests_dir"], "all_reduce_perf")
    if os.access(nccl, os.X_OK):
        lines += task.run_batch(cfg, "all_reduce_perf", [[node]], logs, "intra", 0)
    else:
        lines.append({"nodes": [node], "test": "all_reduce", "ok": False, "busbw": None,
                      "error": f"all_reduce_perf: not built in {cfg['nccl_tests_dir']} (untested)"})
    with open(os.path.join(args.work, "measurements.jsonl"), "w", encoding="utf-8") as fh:
        for d in lines:
            fh.write(json.dumps(d) + "\n")
    print(f"  tools found in {args.tools_dir}: {', '.join(present) or 'none'}; "
          f"all_reduce_perf {'found' if os.access(nccl, os.X_OK) else 'not built'}")
    print("  measurement lines (as the burn-in task writes them):")
    bad = 0
    for d in lines:
        if "gpu" in d:
            what = f"GPU {d['gpu']} {d['test']:<22} {d.get('value')} {d.get('unit', '')}"
        else:
            what = f"{d['test']:<28} busbw {d.get('busbw')} GB/s at {d.get('size')} B"
        untested = "untested" in str(d.get("error", ""))
        no_peer = gpus == 1 and d.get("test") == "nvlink" and not d.get("ok")   # nvbandwidth waives d2d on one GPU
        state = "ok" if d.get("ok") else "untested" if untested else "n/a (one GPU: no peer)" if no_peer else "NOT OK"
        if gpus == 1 and d.get("test") == "all_reduce" and d.get("ok"):
            state += " (one GPU: all_reduce bus bandwidth is 0 by definition)"
        print(f"    {d.get('tool', 'nccl-tests'):<15} {what}  {state}" + (f"  ({d['error']})" if d.get("error") else ""))
        bad += not d.get("ok") and not untested and not no_peer
    slurmqual = os.path.join(os.path.dirname(sys.executable), "slurmqual")
    for log in sorted(os.listdir(logs)):
        if log.endswith(".log"):
            p = subprocess.run([slurmqual, "burnin", "parse", os.path.join(logs, log)], capture_output=True, text=True)
            print(f"  $ slurmqual burnin parse {log}   (exit {p.returncode})")
            print("\n".join(f"    {ln}" for ln in (p.stdout + p.stderr).strip().splitlines()[:40]))
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("runconfig")
    a.add_argument("init")
    a.add_argument("out")
    a.add_argument("--work", required=True)
    a.add_argument("--root", default="/")
    a = sub.add_parser("checks")
    a.add_argument("--config", required=True)
    a.add_argument("--level", required=True, choices=("fast", "standard", "slow"))
    a.add_argument("--work", required=True)
    a = sub.add_parser("hooks")
    a.add_argument("--config", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--runs", type=int, default=20)
    a = sub.add_parser("tools")
    a.add_argument("--config", required=True)
    a.add_argument("--work", required=True)
    a.add_argument("--tools-dir", required=True)
    a.add_argument("--nccl-tests-dir", default=None)
    a.add_argument("--seconds", type=int, default=20)
    a.add_argument("--max-bytes", default="1G")
    args = ap.parse_args()
    return {"runconfig": runconfig, "checks": checks, "hooks": hooks, "tools": tools}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
