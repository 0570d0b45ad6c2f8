"""`slurmqual burnin parse|submit|watch|analyze|task|report`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..burnin.results import rundir


def register(p: argparse.ArgumentParser, _name: str) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    a = sub.add_parser("parse", help="parse nccl-tests, gpu_burn, dcgmproftester or nvbandwidth output")
    a.add_argument("file")
    a.add_argument("--json", action="store_true")
    a = sub.add_parser("submit", help="submit the burn-in job array and its analysis job")
    a.add_argument("--nodes", default=None, help="hostlist (default: every node not drained)")
    a.add_argument("--partition", default=None)
    a.add_argument("--reservation", default=None)
    a.add_argument("--config", default=None)
    a.add_argument("--dry-run", action="store_true", help="print the plan; submit nothing, write nothing")
    a.add_argument("--no-retest", action="store_true",
                   help="the analysis only prints its retest plan (default: it submits up to "
                        "burnin.max_retest_rounds retest rounds as part of the run)")
    a = sub.add_parser("watch", help="show a run's progress until its analysis ends")
    a.add_argument("run")
    a.add_argument("--config", default=None)
    a.add_argument("--interval", type=float, default=5.0)
    a.add_argument("--timeout", type=float, default=None)
    a = sub.add_parser("analyze", help="judge a run (or a JSONL of measurements), drain, record")
    a.add_argument("run", nargs="?", default=None)
    a.add_argument("--measurements", default=None, help="JSONL: one {nodes,busbw,size,test,ok} or per-GPU {nodes,gpu,test,value,unit,errors} per line")
    a.add_argument("--json", action="store_true")
    a.add_argument("--dry-run", action="store_true", help="judge only: no drain, no store")
    a.add_argument("--topology", default=None, metavar="FILE",
                   help="topology.conf, topology.yaml or fabric map CSV (default: burnin.topology)")
    a.add_argument("--follow-up", type=int, default=None, metavar="ROUND",
                   help="(the run's analysis job of retest round ROUND, 0 first) submit the next retest "
                        "round when nodes need one")
    a.add_argument("--config", default=None)
    a = sub.add_parser("task", help="(inside the job array) run this task's tests")
    a.add_argument("run")
    a.add_argument("--config", default=None)
    a = sub.add_parser("accept-baseline", help="accept nodes' latest burn-in level as their new baseline")
    a.add_argument("nodes", help="hostlist")
    a.add_argument("--test", default=None, help="only this test (all_reduce) or key (all_reduce:pair)")
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
        from ..burnin.results.report import main as report_main

        return report_main(args)
    from ..burnin.run.runner import BurninError
    from ..burnin.results.store import StoreError
    from ..config import ConfigError, load
    from ..slurm import SlurmError

    try:
        config = load(args.config)
        return {"submit": _submit, "watch": _watch, "analyze": _analyze, "task": _task,
                "accept-baseline": _accept}[args.action](args, config)
    except (ConfigError, SlurmError, BurninError, StoreError) as exc:
        return _err(str(exc))


def _parse(args) -> int:
    from ..burnin.read.parse import parse

    from ..fsroot import read_regular

    try:  # a regular file only, bounded: a FIFO would hang, /dev/zero never ends
        text = read_regular(args.file, 256 << 20).decode("utf-8", "replace")
    except OSError as exc:
        return _err(f"{args.file}: {exc.strerror or exc}")
    from ..burnin.read import gpuparse

    if gpuparse.detect(text):  # gpu_burn, dcgmproftester, nvbandwidth: per-GPU readings
        gres = gpuparse.parse(text)
        if args.json:
            print(json.dumps(gres.to_dict()))
        else:
            print(f"{args.file}: {gres.tool}: {'ok' if gres.ok else 'NOT OK (test error, not a measurement)'}")
            for r in gres.readings:
                print(f"  GPU {r.gpu} {r.test} {r.value} {r.unit}" + (f" errors {r.errors}" if r.errors else ""))
            for p in gres.problems:
                print(f"  problem: {p}")
        return 0 if gres.ok else 1
    result = parse(text)
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
    from ..burnin.run.runner import submit
    from ..slurm import expand, get_adapter

    adapter = get_adapter(config)
    if args.nodes:
        nodes = expand(args.nodes)
    else:
        nodes = [n.name for n in adapter.node_info() if not n.drained and not n.hands_off]
    from ..burnin.run.runner import switch_map

    switches = switch_map(config)  # groups and rounds follow the switches when the topology is known
    if args.dry_run:
        from ..burnin.run.runner import submission

        plan = submission(config, nodes, args.partition, args.reservation, switch_of=switches)
        print(f"dry run: {len(nodes)} nodes in {len(plan['groups'])} group(s); nothing submitted or written")
        for i, (group, argv) in enumerate(zip(plan["groups"], plan["task_sbatch"])):
            print(f"  task {i}: {','.join(group)}\n    sbatch {' '.join(argv)}")
        print(f"  analysis after all tasks: sbatch {' '.join(plan['analysis_sbatch'])}")
        return 0
    out = submit(config, adapter, nodes, args.partition, args.reservation, retest=not args.no_retest,
                 switch_of=switches)
    rounds = 0 if args.no_retest else config["burnin"]["max_retest_rounds"]
    print(f"run {out['run_id']}: {len(nodes)} nodes in {out['groups']} group(s); "
          + (f"up to {rounds} retest round(s) submitted by the analysis" if rounds else "no retest rounds"))
    print(f"task jobs {','.join(out['task_jobs'])} (one per group, pinned), analysis job {out['analysis_job']}")
    print(f"run dir {out['run_dir']}")
    return 0


def _run_dir(config, run: str) -> str:
    return run if os.path.isdir(run) else os.path.join(config["burnin"]["run_dir"], run)


def _watch(args, config) -> int:
    from ..slurm import get_adapter

    from ..burnin.run.runner import BurninError

    run_dir = _run_dir(config, args.run)
    try:
        plan = rundir.read_plan(run_dir)
    except rundir.RunDirError as exc:
        raise BurninError(f"{run_dir}: not a submitted burn-in run ({exc})") from None
    try:
        jobs = rundir.read_jobs(run_dir)
    except rundir.RunDirError as exc:
        raise BurninError(f"{run_dir}: unreadable jobs.json ({exc})") from None
    if jobs is None:
        # The submission was killed (kill -9, a lost session) before it wrote the
        # job list: some task jobs may run, no analysis job will come.
        raise BurninError(
            f"{run_dir}: the submission did not finish (killed before it wrote jobs.json); no analysis job "
            f"was submitted and nothing will be drained. Task jobs it submitted may still run: cancel them "
            f"with `scancel --name=slurmqual-burnin-{plan.get('run_id', '?')}`, or let them finish and judge "
            f"what they measured with `slurmqual burnin analyze {run_dir}` (the other groups stay untested)")
    adapter = get_adapter(config)
    end = time.monotonic() + args.timeout if args.timeout else None
    stage = rundir.current(run_dir)
    while True:
        ids = list(stage["tasks"].values())
        analysis_job = stage["analysis"]
        records = adapter.jobs([*ids, analysis_job] if analysis_job else ids)
        tasks = [r for k, r in records.items() if k != analysis_job]
        done = sum(1 for r in tasks if not r.active)
        running = sum(1 for r in tasks if r.state == "RUNNING")
        judged = _judged_round(run_dir)
        analysis = records.get(analysis_job) if analysis_job else None
        if analysis is not None:
            analysis_state = analysis.state
        else:
            analysis_state = "DONE" if judged is not None and judged >= stage["round"] else "?"
        what = "tasks" if not stage["round"] else f"retest round {stage['round']} of {stage['of']}: tasks"
        print(f"{time.strftime('%H:%M:%S')} {what}: {len(stage['groups'])} total, {done} done, {running} running; "
              f"{_measured(run_dir)} measurements; analysis {analysis_state}", flush=True)
        if analysis_state != "?" and (analysis is None or not analysis.active):
            nxt = rundir.current(run_dir)
            if nxt["round"] > stage["round"]:  # the analysis submitted the next retest round: follow it
                print(f"  {rundir.describe(nxt)}", flush=True)
                stage = nxt
                continue
            break
        if end is not None and time.monotonic() > end:
            print("watch: timed out (the run goes on)")
            return 1
        time.sleep(args.interval)
    try:
        a = rundir.read_analysis(run_dir)
    except rundir.RunDirError as exc:
        raise BurninError(str(exc)) from None
    if a is None:
        print(f"no analysis.json: see {rundir.logs_dir(run_dir)}/analysis.out")
        return 1
    print(_summary(a))
    judged = (a.get("retest") or {}).get("round", 0)
    if judged < stage["round"] or (a.get("retest") or {}).get("final") is False:
        print(f"the run did not finish: the analysis of retest round {stage['round']} (job {stage['analysis']}) "
              f"ended {analysis_state} without judging it; nodes shown as retest are not decided and were not "
              f"drained. `slurmqual burnin analyze {run_dir}` judges everything measured")
        return 1
    return 0


def _judged_round(run_dir: str) -> int | None:
    """The stage the latest analysis.json judged (None: no analysis yet, or unreadable)."""
    try:
        a = rundir.read_analysis(run_dir)
        return None if a is None else int((a.get("retest") or {}).get("round", 0))
    except (rundir.RunDirError, ValueError, TypeError, AttributeError):
        return None


def _measured(run_dir: str) -> int:
    return sum(len(res["measurements"]) for _path, res in rundir.read_results(run_dir)[0])


def _summary(a: dict) -> str:
    from ..burnin.judge.analyze import median_for

    counts: dict[str, int] = {}
    for v in a["nodes"].values():
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    noise = a.get("noise") or {}
    med = ", ".join(f"{k} {v:.1f}" + (f" (noise {noise[k]:.1%})" if k in noise else "") for k, v in a["median"].items())
    lines = [f"median: {med or '-'}; threshold {a['threshold']:.0%}; " +
             " ".join(f"{k}={v}" for k, v in sorted(counts.items()))]
    interim = (a.get("retest") or {}).get("interim")
    if interim:
        lines.insert(0, f"INTERIM ANALYSIS: the run is not finished ({interim}); verdicts may still change and "
                        "untested nodes may yet be measured: the run's own analysis gives its end; nothing drained or "
                        "recorded")
    for n, v in sorted(a["nodes"].items()):
        if v["verdict"] != "pass":
            key, m = median_for(a, n)
            vs = f" = {v['score'] / m:.0%} of the {key} median" if v["score"] is not None and m else ""
            nics = f"; failed NIC(s) {','.join(v['failed_nics'])}" if v.get("failed_nics") else ""
            why = f" ({v['why']})" if v.get("why") else ""
            lines.append(f"  {n}: {v['verdict']} score {v['score']}{vs}{nics}{why}")
    for link in a["suspect_links"]:
        on = f" on {link[2]}" if len(link) > 2 else ""
        lines.append(f"  suspect link {link[0]} <-> {link[1]}{on} (a cable or route: drains nothing)")
    by_switch: dict[tuple[str, str], list[dict]] = {}
    for f in a.get("switch_findings", []):  # one line per switch, every key that showed it
        by_switch.setdefault((f["switch"], f["kind"]), []).append(f)
    for (switch, kind), found in by_switch.items():
        what = "pairs leaving it (uplinks)" if kind == "uplinks" else "every path through it"
        keys = ", ".join(f"{f['key']} {f['factor']:.0%}" for f in found)
        lines.append(f"  SUSPECT SWITCH {switch}: {what} slow ({keys} of the fleet), "
                     f"{max(f['nodes'] for f in found)} nodes behind it; none drained for it")
    if a["guard_tripped"]:
        lines.append(f"  GUARD TRIPPED: would drain {','.join(a.get('would_drain', []))}; drained none: "
                     "suspect a fabric-wide problem")
    elif a["drain"]:
        lines.append(f"  drained: {','.join(a['drain'])}")
    if a.get("fleet_slowdown"):
        lines.append(f"  FLEET-WIDE SLOWDOWN: {len(a['below_baseline'])} nodes more than 10% below their own "
                     "baselines; baselines not updated: suspect the fabric, a driver/NCCL change or a bug")
    for n, b in sorted(a.get("below_baseline", {}).items()):
        if "gpu" in b:  # a GPU below its own (serial's) baseline
            from ..burnin.judge.gpus import entry_label

            lines.append(f"  {n}: {entry_label(b)} {b['key']} {b['score']}, more than "
                         f"10% below its own baseline {b['baseline']}")
            continue
        lines.append(f"  {n}: {b['score']} GB/s, more than 10% below its baseline {b['baseline']}"
                     + (f" ({b['key']}); keeps it until `slurmqual burnin accept-baseline {n}`" if b.get("key") else ""))
    for t in a.get("incomplete_tasks", []):
        lines.append(f"  task {t} did not finish: its untested nodes are reported untested")
    rt = a.get("retest") or {}
    nxt = rt.get("next")
    if nxt:
        lines.append(f"  retest round {nxt['round']} of {rt['max_rounds']} submitted: task jobs "
                     f"{','.join(nxt['tasks'].values())}, analysis job {nxt['analysis']}; pairs: " +
                     "; ".join(" ".join(f"{x}+{y}" for x, y in rnd) for rnd in a["retest_plan"]))
    elif a.get("retest_plan"):
        lines.append(f"  retest plan: {len(a['retest_plan'])} round(s): " +
                     "; ".join(" ".join(f"{x}+{y}" for x, y in rnd) for rnd in a["retest_plan"]))
    if rt.get("round") and not nxt and not rt.get("interim"):
        lines.append(f"  decided after {rt['round']} retest round(s) of {rt['max_rounds']}")
    from ..burnin.results.report import ended_untested

    untested = ended_untested(a)
    if untested:
        lines.append(f"  RUN ENDED WITH {len(untested)} NODE(S) UNTESTED (neither passed nor drained; "
                     f"burn them in again): " + "; ".join(f"{n}: {why}" for n, why in untested.items()))
    return "\n".join(lines)


def _accept(args, config) -> int:
    from ..burnin.results.store import open_store
    from ..slurm import expand

    nodes = expand(args.nodes)
    store = open_store(config["store"]["path"], create=False)
    try:
        done = store.accept_baseline(nodes, args.test, who=os.environ.get("SUDO_USER") or os.environ.get("USER") or "admin")
    finally:
        store.close()
    rc = 0
    for d in done:
        if d["accepted"]:
            print(f"{d['node']}: {d['key']} baseline {d['old']} -> {d['new']} GB/s (recorded in history)")
        else:
            rc = 1
            print(f"{d['node']}: {d['key'] or '-'}: not accepted: {d['why']}")
    if not done:
        print(f"no burn-in score to accept for {args.nodes}" + (f" (test {args.test})" if args.test else ""))
        return 1
    return rc


def _analyze(args, config) -> int:
    from ..burnin.run import runner

    if bool(args.run) == bool(args.measurements):
        return _err("give a run directory or --measurements FILE.jsonl")
    if args.measurements:
        raw = runner.load_jsonl(args.measurements)
        scope, versions, run_dir, plan = None, {}, None, {}
        import hashlib

        with open(args.measurements, "rb") as fh:
            run_id = "jsonl-" + hashlib.sha256(fh.read()).hexdigest()[:12]
        when = time.time()
    else:
        run_dir = _run_dir(config, args.run)
        plan, raw, versions = runner.load_run(run_dir)
        scope, run_id, when = plan["scope"], plan["run_id"], plan["time"]
    if not args.dry_run:
        # Before the first side effect (a drain): the store must be usable (created or
        # migrated, not corrupted, not newer than us), so a run never drains and then
        # fails to be recorded. The inputs were checked in full when loaded.
        from ..burnin.results.store import open_store

        open_store(config["store"]["path"]).close()
    requalify = bool(run_dir and plan.get("rounds"))
    refs: set[str] = set()
    topology = None
    from ..slurm import get_adapter

    adapters: list = []

    def adapter():
        if not adapters:
            adapters.append(get_adapter(config))
        return adapters[0]

    early: list[str] = []  # problems found before the analysis exists
    if requalify:
        # A few swapped nodes and their references are no fleet: judge them
        # against the medians of the last full run (or, without one, each other).
        from ..burnin.judge.analyze import analyze
        from ..burnin.records import Measurement
        from ..burnin.results.store import existing

        with existing(config["store"]["path"]) as store:
            level = store.fleet_medians() if store else {}
        # requalify pairs each swapped node with reference nodes: (swapped, reference); the
        # references its first round did not pair are the retest rounds' unmet partners
        refs = rundir.reference_nodes(plan)
        state = _round_state(run_dir, plan, scope, adapter, runner.switch_map(config, log=early.append), early)
        analysis = analyze([Measurement.from_dict(d) for d in raw], scope, runner.params(config["burnin"]),
                           runner.baselines_from_store(config), fleet_level=level, trusted=refs, rounds=state)
        analysis.run_kind = "requalify"
        if not level:
            analysis.problems.append("requalify without an earlier full burn-in: nodes judged against each other")
    else:
        from ..burnin.judge.topology import TopologyError, from_config

        try:
            topology = from_config(args.topology or config["burnin"].get("topology"))
        except TopologyError as exc:
            raise runner.BurninError(f"topology: {exc}") from None
        from ..burnin.judge.topology import switch_of

        state = _round_state(run_dir, plan, scope, adapter, switch_of(topology) if topology is not None else None,
                             early)
        analysis = runner.judge(config, raw, scope, runner.baselines_from_store(config), topology, state)
    analysis.problems += early
    if run_dir:
        analysis.incomplete_tasks = [str(t) for t in runner.incomplete_tasks(run_dir)]
        analysis.problems += [f"task {t} did not finish: its untested nodes are reported untested"
                              for t in analysis.incomplete_tasks]
    from contextlib import nullcontext

    follow_up = args.follow_up if run_dir and not args.dry_run else None
    rc = 0
    # The run's analysis job: SIGTERM (scancel of the run) raises, so a retest
    # round it had submitted is cancelled with it and the run dir says so.
    with runner.sigterm_raises() if follow_up is not None else nullcontext():
        try:
            if run_dir:
                from ..burnin.run import retest

                # By hand while the run's jobs still run: an interim look, never the run's end.
                interim = _still_running(run_dir, adapter) if args.follow_up is None else None
                # the round submitted is analysis.retest_plan: the plan printed (--json) by hand too
                analysis.retest = retest.settle(config, run_dir, plan, raw, analysis, follow_up, adapter,
                                                trusted=refs if requalify else None,
                                                log=lambda m: print(m, file=sys.stderr), state=state,
                                                interim=interim)
                rc = 1 if analysis.retest.get("failed") else 0
            _act(args, config, adapter, analysis, run_id, when, scope, raw, versions, run_dir, plan)
        except BaseException:
            nxt = (analysis.retest or {}).get("next")
            if nxt:
                from ..burnin.run import retest

                record = rundir.load_stage(run_dir, nxt["round"]) or dict(nxt)
                retest.cancel_round(adapter(), run_dir, record, "the analysis that submitted it was interrupted")
            raise
    print(json.dumps(analysis.to_dict()) if args.json else _summary(analysis.to_dict()))
    return exit_code(analysis.to_dict()) or rc  # 1: a retest round could not be submitted


def _still_running(run_dir: str, adapter) -> str | None:
    """Why the run is not finished, for an analysis by hand: its latest stage
    (rundir.current: the first round from jobs.json, else the last retest
    round submitted) has jobs Slurm still lists as pending or running (task
    jobs still measuring, or the analysis job that judges the stage and may
    submit the next round). None when every one ended, or none was
    submitted: then this analysis is the run's last word. Slurm unreadable:
    the run dir decides (_ended_on_record), else interim, saying why."""
    from ..slurm import SlurmError

    stage = rundir.current(run_dir)
    judge = stage.get("analysis")
    ids = [*stage["tasks"].values(), *([judge] if judge else [])]
    if not ids:
        return None
    where = "first round" if not stage["round"] else f"retest round {stage['round']} of {stage['of']}"
    try:
        records = adapter().jobs(ids)
    except SlurmError as exc:
        if _ended_on_record(run_dir, stage["round"]):
            return None
        return f"could not ask Slurm whether the run's jobs ({where}) still run: {exc}"
    tasks = sorted({r.key for k, r in records.items() if r.active and k != judge and r.job_id != judge})
    judging = judge is not None and any(r.active for k, r in records.items() if k == judge or r.job_id == judge)
    if not tasks and not judging:
        return None
    parts = [f"task job(s) {','.join(tasks)} still pending or running"] if tasks else []
    if judging:
        parts.append(f"its analysis job {judge} has not judged it yet (it may submit a retest round)")
    return f"{where}: " + "; ".join(parts)


def _ended_on_record(run_dir: str, stage: int) -> bool:
    """The run dir says the run ended: its analysis.json judged the latest
    stage (the run's analysis job runs after that stage's tasks) and called
    itself final, not an interim look by hand."""
    try:
        rt = (rundir.read_analysis(run_dir) or {}).get("retest") or {}
        return rt.get("final") is True and not rt.get("interim") and int(rt.get("round", 0)) >= stage
    except (rundir.RunDirError, ValueError, TypeError, AttributeError):
        return False


def _round_state(run_dir, plan, scope, adapter, switches, problems):
    """What the run's next round is planned from (retest.round_state): the
    same for the run's analysis job and an analysis by hand, so both print
    the plan the run submits. Slurm is asked for node states only in a run
    with retest rounds."""
    if not run_dir:
        return None
    from ..burnin.run import retest

    asks = adapter if int(plan.get("max_retest_rounds") or 0) > 0 else None
    return retest.round_state(run_dir, asks, switches, scope or [], problems, int(plan.get("max_retest_rounds") or 0))


def _act(args, config, adapter, analysis, run_id, when, scope, raw, versions, run_dir, plan) -> None:
    """Drain, record, write analysis.json and metrics (nothing but analysis.json under --dry-run,
    or in an interim look by hand while the run's jobs still run: its verdicts may still change,
    and the run's own analysis drains and records at its end)."""
    from ..burnin.run import runner

    interim = (analysis.retest or {}).get("interim")
    if interim and not args.dry_run:
        print("slurmqual: interim analysis (the run is not finished): nothing drained or recorded; the run's own "
              "analysis drains and records at its end (scancel the run's jobs to make an analysis by hand its end)",
              file=sys.stderr)
    hold = args.dry_run or bool(interim)
    if not hold:
        # A requalify run's swapped nodes are requalify's to drain (runner.drain_failures).
        leave = rundir.swapped_nodes(plan)
        drained = runner.drain_failures(adapter(), analysis, log=lambda m: print(m, file=sys.stderr), leave=leave)
        analysis.drain = drained
        runner.record(config, run_id, when, scope or sorted(analysis.nodes), raw, analysis,
                      runner.with_host_versions(config, versions))
    if run_dir:
        rundir.write_analysis(run_dir, analysis.to_dict())
    if not hold and config["hooks"]["metrics_dir"]:
        from ..metrics import write_burnin_metrics

        try:  # after analysis.json: metrics are nice to have, the analysis is not
            # A requalify run (explicit rounds) judges a few nodes: it never rewrites the fleet median.
            write_burnin_metrics(config["hooks"]["metrics_dir"], analysis.to_dict(), time.time(),
                                 fleet=not (run_dir and plan.get("rounds")))
        except Exception as exc:  # noqa: BLE001
            print(f"slurmqual: could not write metrics: {exc}", file=sys.stderr)


# `burnin analyze` exit codes: 0 judged (nodes drained or not), 2 bad input,
# 3 the blast-radius guard or a fleet-wide slowdown held the drains,
# 4 a switch, not nodes: suspect switches named (their nodes not drained).
# A run that ends with nodes untested exits 0 (judged): the codes are the
# analysis interface issue 22 keeps; the summary's last line and the report
# name those nodes and why.
EXIT_GUARD, EXIT_SWITCH = 3, 4


def exit_code(a: dict) -> int:
    if a.get("guard_tripped") or a.get("fleet_slowdown"):
        return EXIT_GUARD
    return EXIT_SWITCH if a.get("suspect_switches") else 0


def _task(args, config) -> int:
    from ..burnin.run.task import run_in_job

    return run_in_job(_run_dir(config, args.run), config["burnin"])
