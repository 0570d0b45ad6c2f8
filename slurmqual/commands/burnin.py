"""`slurmqual burnin parse|submit|watch|analyze|task|report`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def register(p: argparse.ArgumentParser, _name: str) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    a = sub.add_parser("parse", help="parse nccl-tests output")
    a.add_argument("file")
    a.add_argument("--json", action="store_true")
    a = sub.add_parser("submit", help="submit the burn-in job array and its analysis job")
    a.add_argument("--nodes", default=None, help="hostlist (default: every node not drained)")
    a.add_argument("--partition", default=None)
    a.add_argument("--reservation", default=None)
    a.add_argument("--config", default=None)
    a = sub.add_parser("watch", help="show a run's progress until its analysis ends")
    a.add_argument("run")
    a.add_argument("--config", default=None)
    a.add_argument("--interval", type=float, default=5.0)
    a.add_argument("--timeout", type=float, default=None)
    a = sub.add_parser("analyze", help="judge a run (or a JSONL of measurements), drain, record")
    a.add_argument("run", nargs="?", default=None)
    a.add_argument("--measurements", default=None, help="JSONL: one {nodes,busbw,size,test,ok} per line")
    a.add_argument("--json", action="store_true")
    a.add_argument("--dry-run", action="store_true", help="judge only: no drain, no store")
    a.add_argument("--config", default=None)
    a = sub.add_parser("task", help="(inside the job array) run this task's tests")
    a.add_argument("run")
    a.add_argument("--config", default=None)
    a = sub.add_parser("report", help="self-contained HTML report of a run")
    a.add_argument("run")
    a.add_argument("--html", required=True)


def _err(msg: str) -> int:
    print(f"slurmqual: {msg}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    if args.action == "parse":
        return _parse(args)
    if args.action == "report":
        from ..burnin.report import main as report_main

        return report_main(args)
    from ..burnin.runner import BurninError
    from ..burnin.store import StoreError
    from ..config import ConfigError, load
    from ..slurm import SlurmError

    try:
        config = load(args.config)
        return {"submit": _submit, "watch": _watch, "analyze": _analyze, "task": _task}[args.action](args, config)
    except (ConfigError, SlurmError, BurninError, StoreError) as exc:
        return _err(str(exc))


def _parse(args) -> int:
    from ..burnin.parse import parse

    try:
        with open(args.file, errors="replace") as fh:
            result = parse(fh.read())
    except OSError as exc:
        return _err(f"{args.file}: {exc.strerror}")
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        state = "ok" if result.ok else "NOT OK (test error, not a measurement)"
        print(f"{args.file}: {state}; hosts {','.join(result.hosts) or '-'}; {len(result.rows)} rows; "
              f"avg busbw {result.avg_busbw}")
        for p in result.problems:
            print(f"  problem: {p}")
    return 0 if result.ok else 1


def _submit(args, config) -> int:
    from ..burnin.runner import submit
    from ..slurm import expand, get_adapter

    adapter = get_adapter(config)
    if args.nodes:
        nodes = expand(args.nodes)
    else:
        nodes = [n.name for n in adapter.node_info() if not n.drained and not n.hands_off]
    out = submit(config, adapter, nodes, args.partition, args.reservation)
    print(f"run {out['run_id']}: {len(nodes)} nodes in {out['groups']} group(s)")
    print(f"array job {out['array_job']}, analysis job {out['analysis_job']}")
    print(f"run dir {out['run_dir']}")
    return 0


def _run_dir(config, run: str) -> str:
    return run if os.path.isdir(run) else os.path.join(config["burnin"]["run_dir"], run)


def _watch(args, config) -> int:
    import glob

    from ..slurm import get_adapter

    from ..burnin.runner import BurninError

    run_dir = _run_dir(config, args.run)
    try:
        with open(os.path.join(run_dir, "jobs.json")) as fh:
            jobs = json.load(fh)
        with open(os.path.join(run_dir, "plan.json")) as fh:
            plan = json.load(fh)
    except (OSError, ValueError) as exc:
        raise BurninError(f"{run_dir}: not a submitted burn-in run ({exc})") from None
    adapter = get_adapter(config)
    end = time.monotonic() + args.timeout if args.timeout else None
    while True:
        states = adapter.job_states([jobs["array"], jobs["analysis"]])
        tasks = {k: v for k, v in states.items() if k.startswith(f"{jobs['array']}_") or k == jobs["array"]}
        done = sum(1 for v in tasks.values() if v in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"))
        running = sum(1 for v in tasks.values() if v == "RUNNING")
        results = glob.glob(os.path.join(run_dir, "results", "task-*.json"))
        measured = 0
        for path in results:
            try:
                with open(path) as fh:
                    measured += len(json.load(fh)["measurements"])
            except (OSError, ValueError, KeyError):
                pass
        analysis_state = states.get(jobs["analysis"], "DONE" if os.path.exists(os.path.join(run_dir, "analysis.json")) else "?")
        print(f"{time.strftime('%H:%M:%S')} tasks: {len(plan['groups'])} total, {done} done, {running} running; "
              f"{measured} measurements; analysis {analysis_state}", flush=True)
        if analysis_state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "?"):
            break
        if end is not None and time.monotonic() > end:
            print("watch: timed out (the run goes on)")
            return 1
        time.sleep(args.interval)
    path = os.path.join(run_dir, "analysis.json")
    if os.path.exists(path):
        with open(path) as fh:
            print(_summary(json.load(fh)))
        return 0
    print(f"no analysis.json: see {run_dir}/logs/analysis.out")
    return 1


def _summary(a: dict) -> str:
    counts: dict[str, int] = {}
    for v in a["nodes"].values():
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    med = ", ".join(f"{k} {v:.1f}" for k, v in a["median"].items())
    lines = [f"median: {med or '-'}; threshold {a['threshold']:.0%}; " +
             " ".join(f"{k}={v}" for k, v in sorted(counts.items()))]
    for n, v in sorted(a["nodes"].items()):
        if v["verdict"] != "pass":
            lines.append(f"  {n}: {v['verdict']} score {v['score']}")
    for link in a["suspect_links"]:
        lines.append(f"  suspect link {link[0]} <-> {link[1]} (drains nothing)")
    if a["guard_tripped"]:
        lines.append(f"  GUARD TRIPPED: would drain {','.join(a.get('would_drain', []))}; drained none: "
                     "suspect a fabric-wide problem")
    elif a["drain"]:
        lines.append(f"  drained: {','.join(a['drain'])}")
    if a.get("fleet_slowdown"):
        lines.append(f"  FLEET-WIDE SLOWDOWN: {len(a['below_baseline'])} nodes more than 10% below their own "
                     "baselines; baselines not updated: suspect the fabric, a driver/NCCL change or a bug")
    for n, b in sorted(a.get("below_baseline", {}).items()):
        lines.append(f"  {n}: {b['score']} GB/s, more than 10% below its baseline {b['baseline']}")
    return "\n".join(lines)


def _analyze(args, config) -> int:
    from ..atomic import write_text
    from ..burnin import runner

    if bool(args.run) == bool(args.measurements):
        return _err("give a run directory or --measurements FILE.jsonl")
    if args.measurements:
        raw = runner.load_jsonl(args.measurements)
        scope, versions, run_dir = None, {}, None
        import hashlib

        with open(args.measurements, "rb") as fh:
            run_id = "jsonl-" + hashlib.sha256(fh.read()).hexdigest()[:12]
        when = time.time()
    else:
        run_dir = _run_dir(config, args.run)
        plan, raw, versions = runner.load_run(run_dir)
        scope, run_id, when = plan["scope"], plan["run_id"], plan["time"]
    analysis = runner.judge(config, raw, scope, runner.baselines_from_store(config))
    if run_dir:
        analysis.problems += [f"task {t} did not finish: its untested nodes are reported untested"
                              for t in runner.incomplete_tasks(run_dir)]
    if not args.dry_run:
        from ..slurm import get_adapter

        drained = runner.drain_failures(get_adapter(config), analysis, log=lambda m: print(m, file=sys.stderr))
        analysis.drain = drained
        runner.record(config, run_id, when, scope or sorted(analysis.nodes), raw, analysis,
                      runner.with_host_versions(config, versions))
        if config["hooks"]["metrics_dir"]:
            from ..metrics import write_burnin_metrics

            write_burnin_metrics(config["hooks"]["metrics_dir"], analysis.to_dict(), time.time())
    if run_dir:
        write_text(os.path.join(run_dir, "analysis.json"), json.dumps(analysis.to_dict()))
    print(json.dumps(analysis.to_dict()) if args.json else _summary(analysis.to_dict()))
    return 3 if analysis.guard_tripped or analysis.fleet_slowdown else 0


def _task(args, config) -> int:
    from ..burnin.task import run_task, write_result
    from ..slurm import expand

    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodelist:
        return _err("burnin task runs inside a Slurm job (no SLURM_JOB_NODELIST)")
    task_id = os.environ.get("SLURM_ARRAY_TASK_ID", "0")
    run_dir = _run_dir(config, args.run)
    result = run_task(run_dir, task_id, expand(nodelist), config["burnin"],
                      checkpoint=lambda partial: write_result(run_dir, partial))
    path = write_result(run_dir, result)
    bad = sum(1 for m in result["measurements"] if not m["ok"])
    print(f"task {task_id}: {len(result['measurements'])} tests ({bad} test errors) -> {path}")
    return 0
