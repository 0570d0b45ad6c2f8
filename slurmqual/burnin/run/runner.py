"""Submitting a burn-in run and turning its task results into actions:
verdicts, drains (through the Slurm adapter, with the hooks' ownership
rules), the store, metrics and analysis.json. Only the analysis writes the store."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Collection

from ..results import rundir
from ..judge.analyze import Analysis, analyze
from ..judge.plan import groups
from ..records import Measurement, Params, from_dicts


class BurninError(Exception):
    pass


def params(cfg: dict) -> Params:
    return Params(cfg["threshold"], cfg["reference_size"], cfg["guard_fraction"], cfg["guard_min"], cfg["baseline_drop"])


# -- submit -------------------------------------------------------------------

def submission(config, nodes: list[str], partition: str | None, reservation: str | None,
               explicit_rounds: list[list[list[str]]] | None = None,
               switch_of: dict[str, str] | None = None) -> dict:
    """What `submit` would do, decided without touching anything: the run id
    and directory, the groups (aligned to switches with a `switch_of` map, and
    then each with its rounds), and the sbatch arguments of every task job and
    of the analysis job. `burnin submit --dry-run` prints this."""
    cfg = config["burnin"]
    if len(nodes) < 2:
        raise BurninError("a burn-in needs at least 2 nodes")
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
    run_dir = os.path.join(cfg["run_dir"], run_id)
    # Explicit rounds (requalify) need every pair inside one task: one group.
    plan = [sorted(nodes)] if explicit_rounds else groups(sorted(nodes), cfg["group_size"], switch_of)
    group_rounds = None
    if switch_of and not explicit_rounds:
        from ..judge.plan import rounds

        group_rounds = [[[list(p) for p in rnd] for rnd in rounds(g, cfg["rounds"], switch_of)] for g in plan]
    partition = partition or cfg["partition"]
    reservation = reservation or cfg["reservation"]
    jobs = JobLines(config, run_id, run_dir, partition, reservation, bool(explicit_rounds))
    return {"run_id": run_id, "run_dir": run_dir, "scope": sorted(nodes), "groups": plan,
            "rounds": explicit_rounds, "group_rounds": group_rounds, "partition": partition,
            "reservation": reservation, "gpu_runs": gpu_runs(config),
            "task_sbatch": [jobs.task(str(i), g) for i, g in enumerate(plan)],
            "task_scripts": [jobs.task_script(str(i)) for i in range(len(plan))],
            "analysis_sbatch": jobs.analysis(), "analysis_script": jobs.analysis_script()}


def gpu_runs(config) -> int:
    """Runs of each GPU tool in the first round (`burnin.gpu_runs`; "auto":
    sized from the GPU noise of the fleet's last full run in the store, 1
    without GPU tests, a store or such a run)."""
    from ..judge.gpus import first_runs
    from ..results.store import StoreError, existing

    cfg = config["burnin"]
    if not cfg.get("gpu_tests"):
        return 1
    configured = cfg.get("gpu_runs", "auto")
    noise: dict[str, float] = {}
    if configured == "auto":
        try:
            with existing(config["store"]["path"]) as store:
                noise = store.fleet_noise() if store else {}
        except (StoreError, OSError):
            noise = {}  # an unreadable store sizes nothing: one run, as on a fleet's first burn-in
    return first_runs(noise, cfg["threshold"], cfg["gpus_per_node"], configured)


class JobLines:
    """The sbatch arguments and scripts of a run's jobs: the first task jobs
    and analysis, and the follow-up retest rounds (same partition, reservation,
    account, environment and names, so `scancel --name` catches them all)."""

    def __init__(self, config, run_id: str, run_dir: str, partition: str | None, reservation: str | None,
                 inside_reservation: bool):
        from ...security import job_command, job_export

        cfg = config["burnin"]
        self.cfg, self.run_id, self.run_dir = cfg, run_id, run_dir
        self.common = []
        if partition:
            self.common.append(f"--partition={partition}")
        if reservation:
            self.common.append(f"--reservation={reservation}")
        if cfg["account"]:
            self.common.append(f"--account={cfg['account']}")
        # requalify (explicit rounds) runs everything inside its maintenance reservation
        self.analysis_common = [c for c in self.common if inside_reservation or not c.startswith("--reservation")]
        # Isolated interpreter, minimal named environment: never the submitter's
        # whole environment (a slurmrestd JWT would be stored with the job).
        self.exe = job_command()
        self.env = job_export(config.path)

    def task(self, task_id: str, group: list[str]) -> list[str]:
        """One job per group, pinned with --nodelist and an exact --nodes: an
        array's tasks land on whatever nodes are free, so a busy partition
        would test some nodes twice and others never. A pinned job waits for
        its own nodes instead."""
        from ...slurm import compress

        return [f"--job-name=slurmqual-burnin-{self.run_id}", f"--nodes={len(group)}",
                f"--nodelist={compress(group)}", "--exclusive", f"--time={self.cfg['task_time_limit']}",
                f"--output={rundir.logs_dir(self.run_dir)}/task-{task_id}.out", self.env, *self.common]

    def task_script(self, task_id: str) -> str:
        return f"SLURMQUAL_BURNIN_TASK={task_id} exec {self.exe} burnin task {self.run_dir}"

    def analysis(self, stage: int = 0) -> list[str]:
        log = "analysis.out" if not stage else f"analysis-r{stage}.out"
        return [f"--job-name=slurmqual-analysis-{self.run_id}", "--nodes=1", f"--output={rundir.logs_dir(self.run_dir)}/{log}",
                "--time=00:30:00", self.env, *self.analysis_common]

    def analysis_script(self, stage: int = 0) -> str:
        # --follow-up K: this job analyses round K and may submit round K+1
        return f"{self.exe} burnin analyze {self.run_dir} --follow-up {stage}"


def submit_jobs(adapter, tasks: list[tuple[list[str], str]], analysis: tuple[list[str], str],
                run_id: str) -> tuple[list[str], str]:
    """Submit the task jobs, then the analysis job that waits for all of
    them (afterany). If any submission fails or is interrupted (Ctrl-C,
    SIGTERM, a caller's own cancel), the jobs already submitted are cancelled
    and the exception goes on, with the ids submitted in its `submitted`."""
    jobs: list[str] = []
    try:
        for argv, script in tasks:
            jobs.append(adapter.submit(argv, script=script))
        argv, script = analysis
        return jobs, adapter.submit([*argv[:1], f"--dependency=afterany:{':'.join(jobs)}", *argv[1:]], script=script)
    except BaseException as exc:  # SlurmError, Ctrl-C, SIGTERM, or a caller's own cancel (requalify)
        exc.submitted = jobs  # type: ignore[attr-defined]
        try:  # tasks nobody analyses would test for nothing; by name too, for a
            adapter.cancel(jobs)  # job whose sbatch answer the interruption lost
            adapter.cancel_by_name(f"slurmqual-burnin-{run_id}")
        except BaseException as cleanup:
            cleanup.submitted = jobs  # type: ignore[attr-defined]
            raise
        raise


def sigterm_raises():
    """Context: SIGTERM raises KeyboardInterrupt('signal 15') (main thread
    only), so a submission it interrupts cleans up after itself."""
    import contextlib
    import signal

    @contextlib.contextmanager
    def ctx():
        def interrupted(signum, _frame):
            raise KeyboardInterrupt(f"signal {signum}")

        old = signal.signal(signal.SIGTERM, interrupted) if _main_thread() else None
        try:
            yield
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
    return ctx()


def submit(config, adapter, nodes: list[str], partition: str | None, reservation: str | None,
           explicit_rounds: list[list[list[str]]] | None = None, retest: bool = True,
           switch_of: dict[str, str] | None = None) -> dict:
    """Write the run's plan, submit one pinned job per group and the analysis
    job that waits for all of them. If any submission fails or is
    interrupted (Ctrl-C, SIGTERM), the jobs already submitted are cancelled:
    a partial run would test part of the fleet and be analysed as a whole.
    `retest`: the analysis submits up to `burnin.max_retest_rounds` retest
    rounds itself (False: it only prints the retest plan)."""
    sub = submission(config, nodes, partition, reservation, explicit_rounds, switch_of)
    run_dir = sub["run_dir"]
    rundir.write_plan(run_dir, {"run_id": sub["run_id"], "scope": sub["scope"], "groups": sub["groups"],
                                "time": time.time(), "config_digest": config.digest, "rounds": explicit_rounds,
                                "group_rounds": sub["group_rounds"], "partition": sub["partition"],
                                "reservation": sub["reservation"], "gpu_runs": sub["gpu_runs"],
                                "max_retest_rounds": config["burnin"]["max_retest_rounds"] if retest else 0})
    try:
        with sigterm_raises():
            jobs, analysis = submit_jobs(adapter, list(zip(sub["task_sbatch"], sub["task_scripts"])),
                                         (sub["analysis_sbatch"], sub["analysis_script"]), sub["run_id"])
    except BaseException as exc:
        rundir.write_jobs(run_dir, getattr(exc, "submitted", []), None, cancelled=True)
        raise
    rundir.write_jobs(run_dir, jobs, analysis)
    return {"run_id": sub["run_id"], "run_dir": run_dir, "task_jobs": jobs, "array_job": jobs[0],
            "analysis_job": analysis, "groups": len(sub["groups"])}


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def switch_map(config, log=None) -> dict[str, str] | None:
    """node -> leaf switch from `burnin.topology` (None without one). For
    the analysis (`log` given) a broken file is a problem, not a crash: the
    retest partners are then chosen without it."""
    from ..judge.topology import TopologyError, from_config, switch_of

    try:
        topo = from_config(config["burnin"]["topology"])
    except (TopologyError, OSError) as exc:
        if log is None:
            raise BurninError(f"burnin.topology: {exc}") from None
        log(f"burnin.topology unusable, retest partners chosen without it: {exc}")
        return None
    return switch_of(topo) if topo is not None else None


# -- analyze ------------------------------------------------------------------

def load_run(run_dir: str) -> tuple[dict, list[dict], dict]:
    """plan, raw measurement dicts, versions per node from a run directory
    (burnin/results/rundir.py reads and checks the files)."""
    try:
        plan = rundir.read_plan(run_dir)
    except rundir.RunDirError as exc:
        raise BurninError(f"{run_dir}: not a burn-in run directory ({exc})") from None
    results, bad = rundir.read_results(run_dir)
    if bad:
        raise BurninError(f"unreadable task result: {bad[0]}")
    measurements, versions = [], {}
    for path, res in results:
        measurements.extend(_measurement(d, path) for d in res["measurements"])
        for n, v in res.get("versions", {}).items():
            versions.setdefault(n, {}).update(v)
    return plan, measurements, versions


def incomplete_tasks(run_dir: str) -> list[str]:
    """Planned tasks that did not finish: killed after a checkpoint (their
    result says complete: false) or before their first one (no result file
    at all: never started, cancelled, killed during the first test)."""
    try:
        planned = rundir.planned_tasks(run_dir, rundir.read_plan(run_dir))
    except rundir.RunDirError:
        planned = []
    seen, out = set(), []
    for _path, res in rundir.read_results(run_dir)[0]:
        seen.add(str(res.get("task")))
        if res.get("complete") is not True:
            out.append(str(res.get("task")))
    out += [t for t in planned if t not in seen]
    return sorted(set(out), key=lambda t: (rundir.stage_of(t), not t.isdigit(), int(t) if t.isdigit() else 0, t))


def _measurement(d, where: str) -> dict:
    """A raw measurement checked in full and with its optional keys filled in,
    so nothing after parsing (the drain, the store) meets a surprise."""
    if not isinstance(d, dict):
        raise BurninError(f"{where}: bad measurement: not an object")
    try:
        return {**d, **Measurement.from_dict(d).to_dict()}
    except (ValueError, KeyError, TypeError) as exc:
        raise BurninError(f"{where}: bad measurement: {exc}") from None


def load_jsonl(path: str) -> list[dict]:
    from ...fsroot import load_json_text

    try:
        text = rundir.read_bytes(path).decode("utf-8")
    except rundir.RunDirError as exc:
        raise BurninError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise BurninError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    out = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            d = load_json_text(line)
        except ValueError as exc:
            raise BurninError(f"{path}:{lineno}: bad measurement: {exc}") from None
        out.append(_measurement(d, f"{path}:{lineno}"))
    return out


def judge(config, raw: list[dict], scope: list[str] | None, baselines: dict[str, dict[str, float]],
          topology=None, rounds=None) -> Analysis:
    """`rounds` (judge.plan.RoundState, retest.round_state): a run's earlier rounds and its nodes' states."""
    return analyze(from_dicts(raw), scope, params(config["burnin"]), baselines,
                   topology=topology, rounds=rounds)


def drain_failures(adapter, analysis: Analysis, log=print, leave: Collection[str] = ()) -> list[str]:
    """Drain failing nodes with our reason, never over someone else's drain.
    `leave`: a requalify run's swapped nodes. requalify decides them and
    drains a fail with this same reason. Leaving them to Slurm's
    MAINTENANCE flag (hands-off) made the owner depend on whether Slurm
    showed the flag at that moment (on 24.11 once not), so an admin read
    either line. One owner, whatever Slurm shows."""
    from ...policy import may_drain
    from ...slurm import SlurmError

    for node in analysis.drain:
        if node in leave:
            log(f"{node}: failing; left to requalify, which drains it with this verdict's reason")
    todo = [n for n in analysis.drain if n not in leave]
    if not todo:
        return []
    info = {n.name: n for n in adapter.node_info()}
    whole = analysis.to_dict()
    done = []
    for node in todo:
        i = info.get(node)
        score = analysis.nodes[node]["score"]
        reason = drain_reason(whole, node, score)
        decision = may_drain(i, reason, "burnin")  # the shared ownership rules (slurmqual/policy.py)
        if not decision:
            if decision.noop:
                done.append(node)  # re-analysis: already drained by this very verdict
            elif i is not None and i.hands_off:
                log(f"{node}: failing but {i.state} ({','.join(i.flags)}): left alone")
            else:
                log(f"{node}: {decision.why}")
            continue
        try:
            adapter.drain([node], reason)
            done.append(node)
        except SlurmError as exc:
            log(f"{node}: could not drain: {exc}")
    return done


def drain_reason(analysis: dict, node: str, score: float) -> str:
    """The burn-in's drain reason: the NIC to replace when a rail failed
    (``mlx5_3 (rail 3) 180 Gb/s < 90% of median 392``), the node when every
    rail did (``all 8 rails slow: ...``), else the key's busbw."""
    from ...slurm import reason as reasons
    from ..judge.analyze import median_for, rail_number
    from ..records import make_key, split_key

    threshold = analysis["threshold"]
    v = analysis["nodes"][node]
    nics = v.get("failed_nics") or []
    if v.get("corruption"):
        return reasons.make("burnin", f"data corruption: nccl-tests wrong results with {','.join(v['corruption'])}")
    if nics:
        rail_keys = {split_key(k)[2]: k for k in v["keys"] if split_key(k)[1] == "rail"}
        nic = nics[0]
        key = rail_keys.get(nic) or make_key("ib_write_bw", "rail", nic)
        got = v["keys"].get(key, {}).get("score")
        med = (analysis.get("median") or {}).get(key) or 0
        return reasons.make("burnin", f"{nic} (rail {rail_number(analysis, nic)}) {got or 0:.0f} Gb/s < "
                            f"{threshold:.0%} of median {med:.0f}", nics[1:])
    key, median = median_for(analysis, node)  # the one answer to "which median judged it"
    if key and split_key(key)[1] == "rail":  # slow on every rail (no NIC of its own to name)
        rails = sum(1 for k in v["keys"] if split_key(k)[1] == "rail")
        return reasons.make("burnin", f"all {rails} rails slow: {split_key(key)[2]} {score:.0f} Gb/s < "
                            f"{threshold:.0%} of median {median or 0:.0f}")
    if v.get("gpu") and v["gpu"].get("key") == key:
        from ..judge.gpus import drain_reason as gpu_reason

        return reasons.make("burnin", gpu_reason(v["gpu"], threshold))
    what = "busbw" if key in (None, "all_reduce:pair") else " ".join(key.split(":")[:2]) + " busbw"
    return reasons.make("burnin", f"{what} {score:.1f} GB/s < {threshold:.0%} of median {median or 0:.1f}")


def with_host_versions(config, versions: dict[str, dict]) -> dict[str, dict]:
    """Add driver and NIC firmware from the hooks' per-node state files to the
    NCCL versions the tasks captured, so each baseline says what it was taken under."""
    from ...inventory import read_state_versions

    state, _bad = read_state_versions(config["hooks"]["state_dir"])
    out = {n: dict(v) for n, v in versions.items()}
    for node, ver in state.items():
        for key in ("driver", "nic_fw"):
            if ver.get(key):
                out.setdefault(node, {}).setdefault(key, ver[key])
    return out


def record(config, run_id: str, when: float, scope: list[str], raw: list[dict], analysis: Analysis,
           versions: dict) -> None:
    from ..results.store import RunRecord, open_store

    store = open_store(config["store"]["path"])
    try:
        store.record_run(RunRecord(run_id, when, scope, config.digest), raw, analysis.to_dict(), versions)
    finally:
        store.close()


def baselines_from_store(config) -> dict[str, dict[str, float]]:
    from ..results.store import existing

    with existing(config["store"]["path"]) as store:
        return store.all_baselines() if store else {}
