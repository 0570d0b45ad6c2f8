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
  preflight --config C --work W --tools-dir D [--nccl-tests-dir N] [--time S]
                                              `slurmqual preflight --need 1` as a one-node job runs it (job
                                              variables, srun: bin/srun; --gpu-tools where tools were built)

Each prints report lines; exit 1 when something did not pass (a check failed or
errored, a hook exited non-zero), so the shell script can say so at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time


def set_keys(lines: list[str], table: str, keys: list[str]) -> list[str]:
    """`keys` (TOML lines) into [table]: right under its header where the file
    has one (a table may be declared once), else as a new table at the end."""
    header = f"[{table}]"
    at = next((i for i, ln in enumerate(lines) if ln.split("#")[0].strip() == header), None)
    if at is None:
        return lines + ["", header, *keys]
    names = {k.split("=")[0].strip() for k in keys}
    end = next((i for i in range(at + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    body = [ln for ln in lines[at + 1:end] if ln.split("=")[0].strip() not in names]
    return lines[:at + 1] + keys + body + lines[end:]


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


PREFLIGHT_FILES = ("hosts", "nodelist", "master", "exclude", "json")


def preflight(args) -> int:
    """`slurmqual preflight --need 1` as a user's one-node job runs it: the
    job's variables (SLURM_JOB_ID, SLURM_JOB_NODELIST = this node), srun on
    PATH (bin/srun runs the steps here), the site config of this run with the
    tools that were built as [burnin]'s, `--gpu-tools` when there are some.
    Slurm's own clients are out of reach (slurm.bin_dir points nowhere): the
    preflight must say so and go on. Prints its output, exit code, time and
    the files it wrote; exit 1 when it did not choose this node."""
    from slurmqual.burnin.run import gputask
    from slurmqual.config import load

    node = os.uname().nodename.split(".")[0]
    gpus = load(args.config, use_cache=False)["node"]["gpus"] or 0
    tools = [t for t in gputask.BINARIES if gputask.binary({"gpu_tools_dir": args.tools_dir}, t)]
    with open(args.config, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    w = args.work
    lines = set_keys(lines, "burnin", [
        f"gpu_tools_dir = {json.dumps(args.tools_dir)}", f"gpu_tests = {json.dumps(tools)}",
        f"nccl_tests_dir = {json.dumps(args.nccl_tests_dir or args.tools_dir)}", 'launcher = "srun"',
        'srun_mpi = "none"', 'test_time_limit = "00:03:00"'] + ([f"gpus_per_node = {gpus}"] if gpus else []))
    lines = set_keys(lines, "store", [f"path = {json.dumps(w + '/store/slurmqual.db')}"])
    lines = set_keys(lines, "hooks", [f"metrics_dir = {json.dumps(w + '/metrics')}"])
    cfg = os.path.join(w, "preflight.toml")
    with open(cfg, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    out = os.path.join(w, "preflight")
    os.makedirs(out, exist_ok=True)
    os.makedirs(os.path.join(w, "metrics"), exist_ok=True)
    job = "4343"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_"))}
    env.update(SLURM_JOB_ID=job, SLURM_JOBID=job, SLURM_JOB_NODELIST=node, SLURM_NODELIST=node,
               SLURM_JOB_NUM_NODES="1", SLURM_SUBMIT_DIR=out, SLURMQUAL_CACHE_DIR=os.path.join(w, "cache"))
    slurmqual = os.path.join(os.path.dirname(sys.executable), "slurmqual")
    argv = [slurmqual] if os.access(slurmqual, os.X_OK) else [sys.executable, "-m", "slurmqual"]
    argv += ["preflight", "--need", "1", "--config", cfg, "--out", out, "--time", str(args.time)]
    if tools:
        argv.append("--gpu-tools")
    print(f"  job {job} on {node}; tools: {', '.join(tools) or 'none built (checks only)'}; "
          f"srun: {shutil.which('srun', path=env.get('PATH')) or 'NOT ON PATH'}")
    print("  $ " + " ".join(argv))
    start = time.perf_counter()
    try:
        p = subprocess.run(argv, env=env, cwd=out, capture_output=True, text=True, timeout=args.time + 60)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, text = None, f"{exc.stdout or ''}{exc.stderr or ''}\nHUNG: still running {args.time + 60:.0f} s after start"
    secs = time.perf_counter() - start
    print("\n".join(f"    {ln}" for ln in str(text).strip().splitlines()[-40:]))
    bad = []
    if rc != 0:
        bad.append(f"exit {rc}")
    files = {k: os.path.join(out, f"slurmqual-preflight-{job}.{k}") for k in PREFLIGHT_FILES}
    for k, path in files.items():
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                body = fh.read()
            shown = body.strip() if k != "json" else f"{len(body)} bytes"
            print(f"  {os.path.basename(path)}: {shown or '(empty)'}")
        else:
            print(f"  {os.path.basename(path)}: not written")
    logs = os.path.join(out, f"slurmqual-preflight-{job}.logs")
    if os.path.isdir(logs):
        print(f"  {os.path.basename(logs)}/: {', '.join(sorted(os.listdir(logs))) or '(empty)'}")
    report = {}
    try:
        with open(files["json"], encoding="utf-8") as fh:
            report = json.load(fh)
    except (OSError, ValueError) as exc:
        bad.append(f"no readable report ({exc})")
    o = (report.get("outcomes") or {}).get(node) or {}
    if report:
        print(f"  report: {node} {o.get('verdict')} (checks {o.get('checks')}, speed {o.get('speed')})"
              f"{': ' + o['reason'] if o.get('reason') else ''}; chosen {report.get('chosen')}; "
              f"phases {report.get('phases_s')}; {len(report.get('measurements') or [])} measurements")
        for note in (report.get("notes") or []) + (o.get("notes") or []):
            print(f"    note: {note}")
        for m in report.get("measurements") or []:
            if "gpu" in m:
                print(f"    {m.get('tool', '?'):<15} GPU {m['gpu']} {m.get('test', ''):<8} {m.get('value')} "
                      f"{m.get('unit', '')}  {'ok' if m.get('ok') else 'NOT OK'}"
                      + (f"  ({m['error']})" if m.get("error") else ""))
        if o.get("verdict") != "pass":
            bad.append(f"{node}: {o.get('verdict')}")
    hosts = files["hosts"]
    if not os.path.exists(hosts) or open(hosts, encoding="utf-8").read().split() != [node]:
        bad.append(f"hosts file does not hold {node}")
    flag = f"   <-- NOT PASSING ({'; '.join(bad)})" if bad else ""
    print(f"  slurmqual preflight --need 1: exit {rc} in {secs:.1f} s{flag}")
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
    for name in ("tools", "preflight"):   # both run the built tools
        a = sub.add_parser(name)
        a.add_argument("--config", required=True)
        a.add_argument("--work", required=True)
        a.add_argument("--tools-dir", required=True)
        a.add_argument("--nccl-tests-dir", default=None)
        if name == "tools":
            a.add_argument("--seconds", type=int, default=20)
            a.add_argument("--max-bytes", default="1G")
        else:
            a.add_argument("--time", type=float, default=60)
    args = ap.parse_args()
    return {"runconfig": runconfig, "checks": checks, "hooks": hooks, "tools": tools,
            "preflight": preflight}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
