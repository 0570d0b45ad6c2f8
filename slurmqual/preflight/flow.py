"""`slurmqual preflight` in a user's batch script: checks on every node of
the allocation (one srun step), rounds of node pairs (whole-node nccl-tests
and, with `burnin.rails`, per-rail perftest; optionally the per-GPU tools),
all within one time budget; the burn-in's analysis judges them (judge.py),
the best N are written for the launcher (choose.py); bad nodes are reported
and, with drain on, drained under the hooks' ownership rules and guard.

Every step is bounded by the budget: a hung step is killed at its share of
it and its nodes are `untested`; SIGTERM (scancel, the job's time limit)
stops the steps and writes the report, never a hostfile."""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field

from ..command import CommandError, reap, start_logged
from . import judge as judging
from .choose import choose, rank, remove_outputs, write_exclude, write_outputs, write_report
from .judge import EXIT_INTERRUPTED, EXIT_NOT_ENOUGH, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE

CHECK_LEVEL_HOOK = {"fast": "prolog", "standard": "healthcheck"}  # whose check list a level runs


class PreflightError(Exception):
    pass


@dataclass
class Request:
    need: int | None = None
    level: str | None = None          # None: the prolog's
    time_s: float | None = None       # None: [preflight] time_s
    drain: bool | None = None         # None: [preflight] drain
    out_dir: str | None = None        # None: the job's working directory
    gpu_tools: bool | None = None     # None: [preflight] gpu_tools


@dataclass
class Run:
    """What one preflight found and did (the report is its to_dict)."""
    job: str
    nodes: list[str]
    level: str
    budget_s: float
    need: int | None
    started: float = field(default_factory=time.time)
    reports: dict[str, dict] = field(default_factory=dict)
    raw: list[dict] = field(default_factory=list)
    analysis: dict | None = None
    mode: str = ""
    notes: list[str] = field(default_factory=list)
    outcomes: dict = field(default_factory=dict)
    chosen: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    drained: dict[str, str] = field(default_factory=dict)
    not_drained: dict[str, str] = field(default_factory=dict)
    pairs: dict[str, list[str]] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    exit_code: int = EXIT_OK
    interrupted: str = ""
    switch_of: dict[str, str] | None = None
    retest_plan: list = field(default_factory=list)

    def to_dict(self) -> dict:
        a = self.analysis or {}
        return {"job": self.job, "nodes": self.nodes, "level": self.level, "budget_s": self.budget_s,
                "need": self.need, "started": self.started, "elapsed_s": round(time.time() - self.started, 2),
                "phases_s": self.phases, "speed": self.mode, "notes": self.notes,
                "outcomes": {n: o.to_dict() for n, o in self.outcomes.items()},
                "passed": sorted(n for n, o in self.outcomes.items() if o.verdict == "pass"),
                "chosen": self.chosen, "files": self.files, "drained": self.drained,
                "not_drained": self.not_drained, "partners": self.pairs, "retest_round": self.retest_plan, "exit_code": self.exit_code,
                "interrupted": self.interrupted,
                "analysis": {k: a.get(k) for k in ("median", "suspect_links", "suspect_switches", "problems",
                                                   "guard_tripped", "would_drain", "keys")} if a else None,
                "measurements": self.raw}


def allocation(env=None) -> tuple[str, list[str]]:
    """(job id, node names) of the job this runs in."""
    from ..slurm import expand

    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise PreflightError("preflight runs inside a Slurm job (no SLURM_JOB_ID / SLURM_JOB_NODELIST): "
                             "call it from the batch script, before the workload")
    return job, expand(nodelist)


def settings(config, req: Request) -> dict:
    """The preflight's burn-in settings: the site's [burnin] tools, launcher,
    rails and sizes, with the [preflight] overrides (one size, short rails)."""
    pf = config["preflight"]
    cfg = dict(config["burnin"])
    size = str(cfg["reference_size"])
    cfg.update(min_bytes=size, max_bytes=size,  # only the size that is judged (and that the store's medians are at)
               rail_duration_s=pf["rail_duration_s"], gpu_test_s=pf["gpu_test_s"],
               tests=list(pf["tests"] or cfg["tests"]), rail_server_wait_s=min(cfg["rail_server_wait_s"], 1.0))
    if not (req.gpu_tools if req.gpu_tools is not None else pf["gpu_tools"]):
        cfg["gpu_tests"] = []
    return cfg


def rounds_for(nodes: list[str], switch_of: dict[str, str] | None, minimum: int) -> list[list[tuple[str, str]]]:
    """Rounds of pairs in which every node meets at least `minimum` (>= 2)
    different partners where the allocation allows (an odd count sits one
    node out each round: one more round). The switch-aware plan (within
    leaves first, then across) where it gives everyone that many, with a
    round more if needed; else the plain circle, which always does."""
    from ..burnin.judge.plan import circle, rounds

    want = min(minimum, len(nodes) - 1)
    count = minimum + (len(nodes) % 2)
    if switch_of:
        for extra in range(3):
            plan = rounds(nodes, count + extra, switch_of)
            met = partners(plan)
            if all(len(set(met.get(n, ()))) >= want for n in nodes):
                return plan
    return circle(nodes, count)


def partners(plan: list[list[tuple[str, str]]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rnd in plan:
        for a, b in rnd:
            out.setdefault(a, []).append(b)
            out.setdefault(b, []).append(a)
    return out


# -- the steps -------------------------------------------------------------------

def check_argv(config, nodes: list[str], level: str) -> list[str]:
    """One srun step, one task per node: the hooks' checks for that level
    (`slurmqual check --json`, printed in short tagged lines)."""
    from ..security import job_command
    from ..slurm import compress

    argv = ["srun", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
            f"--nodelist={compress(nodes)}", "--kill-on-bad-exit=0", *shlex.split(job_command()),
            "preflight", "--node-report", "--level", level]
    hook = CHECK_LEVEL_HOOK.get(level)
    if hook:
        argv += ["--only", ",".join(config.checks_for(hook))]
    if config.path:
        argv += ["--config", config.path]
    return argv


REPORT_TAG = "slurmqual-preflight-report"
REPORT_PIECE = 700  # srun forwards output in pieces of about 1 KiB: a whole line each


def report_lines(node: str, text: str) -> list[str]:
    """One node's check report as lines short enough that srun never splits
    them: `<tag> <node> <i>/<n> <piece>` (JSON text has no newline)."""
    pieces = [text[i:i + REPORT_PIECE] for i in range(0, len(text), REPORT_PIECE)] or [""]
    return [f"{REPORT_TAG} {node} {i + 1}/{len(pieces)} {p}" for i, p in enumerate(pieces)]


def read_check_reports(text: str, nodes: list[str]) -> dict[str, dict]:
    """node -> its `check --json` object, from the step's merged output: the
    tagged pieces of each node put together (other lines, a node with a
    piece missing or not JSON, a node not in the allocation are left out)."""
    import json

    wanted = set(nodes)
    pieces: dict[str, dict[int, str]] = {}
    count: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith(REPORT_TAG + " "):
            continue
        parts = line.split(" ", 3)
        if len(parts) < 3 or parts[1] not in wanted:
            continue
        i, _, n = parts[2].partition("/")
        if not (i.isdigit() and n.isdigit()):
            continue
        pieces.setdefault(parts[1], {})[int(i)] = parts[3] if len(parts) > 3 else ""
        count[parts[1]] = int(n)
    out = {}
    for node, got in pieces.items():
        if sorted(got) != list(range(1, count[node] + 1)):
            continue
        try:
            d = json.loads("".join(got[i] for i in sorted(got)))
        except ValueError:
            continue
        if isinstance(d, dict) and d.get("node") == node:
            out[node] = d
    return out


def run_checks(config, nodes: list[str], level: str, log_dir: str, deadline: float) -> tuple[dict[str, dict], bool]:
    """(node -> its check report, whether the step had to be killed)."""
    log = os.path.join(log_dir, "checks.log")
    try:
        proc, fh = start_logged(check_argv(config, nodes, level), log)
    except OSError as exc:
        raise PreflightError(f"cannot start the checks step: {exc}") from None
    killed = reap(proc, fh, deadline)
    if killed:
        with open(log, "a") as out:
            out.write("# slurmqual: checks step killed at its share of the time budget\n")
    with open(log, encoding="utf-8", errors="replace") as fh:
        return read_check_reports(fh.read(8 << 20), nodes), killed


def network_batches(cfg: dict, rounds: int, gpu: bool = True) -> int:
    return int(gpu and bool(cfg.get("gpu_tests"))) + rounds * (len(cfg["tests"]) + int(bool(cfg.get("rails"))))


def gpu_batch_need(cfg: dict) -> float:
    """Seconds the GPU tools need with their start-up: TOOL_STARTUP_S + 10 s
    each (10 s of load, or 5 s and the time to free the GPU's memory)."""
    from ..burnin.run.gputask import TOOL_STARTUP_S

    return len(cfg.get("gpu_tests") or []) * (TOOL_STARTUP_S + 10.0)


def run_network(cfg: dict, nodes: list[str], plan, log_dir: str, deadline: float, tag: str = "round",
                gpu: bool = True, after_kill=None) -> list[dict]:
    """GPU tools (optional), then every test's rounds, then every rail's
    rounds; each batch gets an even share of the time left. `after_kill()`
    runs after a batch that had a step killed (its Slurm step may live on,
    holding its nodes' CPUs and GPUs from the next round)."""
    from ..burnin.run.task import run_batch, run_rail_batch

    batches = []
    if gpu and cfg.get("gpu_tests"):
        batches.append(("gpu", None, None))
    for test in cfg["tests"]:
        batches += [("nccl", test, (r, pairs)) for r, pairs in enumerate(plan)]
    if cfg.get("rails"):
        batches += [("rail", None, (r, pairs)) for r, pairs in enumerate(plan)]
    raw: list[dict] = []
    for i, (kind, test, what) in enumerate(batches):
        left = deadline - time.monotonic()
        share = left / (len(batches) - i)
        if kind == "gpu" and len(batches) > 1:
            # each GPU tool needs its start-up besides its load (gpu_burn ~15 s on an
            # H200): up to half the time, rather than an even share it cannot start in
            share = max(share, min(gpu_batch_need(cfg), left / 2))
        if share < 1:
            break  # out of time: the rest is untested
        until = time.monotonic() + share
        done = len(raw)
        if kind == "gpu":
            from ..burnin.run.gputask import load_seconds, run_gpu_tests

            secs = load_seconds(share, len(cfg["gpu_tests"]), cfg["gpu_test_s"])
            raw += run_gpu_tests(dict(cfg, gpu_test_s=secs), nodes, log_dir, None, deadline=until)
        elif kind == "nccl":
            r, pairs = what
            raw += run_batch(cfg, test, [list(p) for p in pairs], log_dir, f"{tag}{r}", None, r, deadline=until)
        else:
            r, pairs = what
            raw += run_rail_batch(cfg, [list(p) for p in pairs], log_dir, f"{tag}{r}", None, r, deadline=until)
        if after_kill is not None and any("timed out" in str(m.get("problems")) for m in raw[done:]):
            after_kill()
    return raw


def _tool(config, name: str) -> str:
    """A Slurm client tool: from slurm.bin_dir when set, else PATH."""
    d = config["slurm"]["bin_dir"]
    return os.path.join(d, name) if d else name


SLURM_CALL_S = 15.0  # one squeue/scancel call at most, and never past the preflight's own end


def _call_s(until: float | None) -> float:
    """A Slurm call's time limit: SLURM_CALL_S, cut to what is left before
    `until` (a slow slurmctld must not push the preflight past --time), at
    least 1 s so a cleanup is still tried at the very end."""
    if until is None:
        return SLURM_CALL_S
    return max(1.0, min(SLURM_CALL_S, until - time.monotonic()))


def job_steps(config, job: str, problems: list[str] | None = None, until: float | None = None) -> set[str] | None:
    """The job's running step ids (None when squeue cannot say; why goes
    into `problems`)."""
    from ..command import run as run_command

    squeue = _tool(config, "squeue")
    try:
        out = run_command([squeue, "-h", "-s", "-j", job, "-o", "%i"], timeout=_call_s(until))
    except CommandError as exc:
        if problems is not None:
            problems.append(str(exc))
        return None
    return {s for s in out.stdout.split() if s.startswith(f"{job}.") and s.split(".")[1].isdigit()}


def end_leftover_steps(config, job: str, before: set[str] | None, log, wait_s: float = 20.0,
                       until: float | None = None) -> list[str]:
    """Cancel the steps this preflight started that still run (a killed srun
    leaves its step behind, holding the nodes the workload needs) and wait
    until Slurm has ended them, so the workload's step starts at once. With
    `until` (a time.monotonic() deadline) no call or wait runs past it by
    more than a second per call."""
    if before is None:
        return []
    now = job_steps(config, job, until=until)
    left = sorted((now or set()) - before)
    if left:
        from ..command import run as run_command

        try:
            run_command([_tool(config, "scancel"), *left], timeout=_call_s(until))
            log(f"preflight: cancelled leftover step(s) {','.join(left)}")
        except CommandError as exc:
            log(f"preflight: could not cancel leftover step(s) {','.join(left)}: {exc}")
            return left
        t0 = time.monotonic()
        wait_until = t0 + wait_s if until is None else min(t0 + wait_s, until)
        still: set[str] = set(left)
        while time.monotonic() < wait_until:
            still = job_steps(config, job, until=wait_until) or set()
            if not still & set(left):
                break
            time.sleep(0.5)
        else:
            log(f"preflight: step(s) {','.join(sorted(still & set(left)))} still ending after "
                f"{time.monotonic() - t0:.0f}s")
    return left


# -- judging -----------------------------------------------------------------------

def stored_levels(config, nodes: list[str], notes: list[str]) -> tuple[dict[str, float], dict]:
    """(fleet medians of the last full burn-in, baselines of these nodes) from
    the store; an unreadable store is a note, not a failure."""
    from ..burnin.results.store import existing

    try:
        with existing(config["store"]["path"]) as store:
            if store is None:
                return {}, {}
            return store.fleet_medians(), store.all_baselines(nodes)
    except Exception as exc:  # noqa: BLE001 - a store the user cannot read leaves speed to the allocation
        notes.append(f"burn-in store {config['store']['path']} unreadable: {exc}")
        return {}, {}


def speed_reason(analysis: dict, node: str) -> str:
    """The burn-in's own drain reason, after its 'slurmqual: burnin: '."""
    from ..burnin.run.runner import drain_reason

    score = (analysis["nodes"].get(node) or {}).get("score")
    text = drain_reason(analysis, node, score or 0.0)
    return text.split(": ", 2)[2] if text.count(": ") >= 2 else text


def judge(config, run: Run, net_nodes: list[str], topology) -> None:
    from ..burnin.run.runner import params

    levels, baselines = stored_levels(config, run.nodes, run.notes)
    analysis = None
    if run.raw:
        analysis, run.mode, notes = judging.analyse(run.raw, net_nodes, params(config["burnin"]), baselines, levels,
                                                    topology, config["preflight"]["min_own_median"])
        run.notes += notes
    else:
        run.mode = "none"
        if len(run.nodes) == 1:
            run.notes.append("one node: no link to measure")
        elif net_nodes:
            run.notes.append("no network measurement (out of time, or too few nodes passed their checks)")
    run.analysis = analysis
    run.outcomes = judging.outcomes(run.nodes, run.reports, run.raw, analysis, speed_reason)
    if len(net_nodes) == 2:
        run.notes.append("2 nodes: one pair, one partner each; a slow node cannot be told from a slow link")


# -- acting --------------------------------------------------------------------------

def drain_bad(config, run: Run, adapter, log) -> None:
    """Drain under the hooks' rules: never over someone else's drain
    (policy.may_drain as a hook), and only while the hook-drain guard allows."""
    from ..policy import HookGuard, may_drain
    from ..slurm import SlurmError, compress
    from ..slurm import reason as reasons

    bad = judging.drainable(run.outcomes, run.analysis)
    if not bad:
        return
    try:
        info = {i.name: i for i in adapter.node_info(compress(bad))}
    except SlurmError as exc:
        run.not_drained.update({n: f"cannot ask Slurm: {exc}" for n in bad})
        return
    guard = HookGuard.from_config(config)
    for n in bad:
        reason = reasons.make("preflight", run.outcomes[n].reason)
        decision = may_drain(info.get(n), reason, "hook")
        if not decision:
            run.not_drained[n] = decision.why
            continue
        try:
            verdict = guard.request_drain(n, reason)
        except OSError as exc:
            run.not_drained[n] = f"hook-drain guard unusable ({exc.strerror or exc}): not drained"
            continue
        if not verdict.allowed:
            run.not_drained[n] = (f"held by the hook-drain guard ({verdict.recent} drains in its window, "
                                  f"limit {verdict.limit})")
            continue
        try:
            adapter.drain([n], reason)
            run.drained[n] = reason
        except SlurmError as exc:
            guard.release(n)
            run.not_drained[n] = f"drain refused by Slurm: {exc}"
    for n, why in run.not_drained.items():
        log(f"preflight: {n}: not drained: {why}")


def record(config, run: Run, log) -> None:
    """Each node's outcome into its history (event spool), its state file
    (`status`) and the metrics. The state dir is the site's; a user without
    write access to it gets a note, not a failure."""
    from .. import events, nodestate

    state_dir = config["hooks"]["state_dir"]
    now = time.time()
    problems = []
    for n, o in run.outcomes.items():
        detail = f"job {run.job}: {o.verdict}" + (f": {o.reason}" if o.reason else "") + \
            (f" (score {o.score:.2f} of median)" if o.score is not None else "")
        entry = {"time": now, "job": run.job, "verdict": o.verdict, "reason": o.reason, "score": o.score,
                 "drained": n in run.drained}
        try:
            events.record(state_dir, n, "preflight", detail, when=now, source="preflight")
            if n in run.drained:
                events.record(state_dir, n, "drain", run.drained[n], when=now, source="preflight")
            nodestate.update(state_dir, n, lambda st, e=entry: setattr(st, "preflight", e), durable=False)
        except (OSError, ValueError) as exc:
            problems.append(f"{n}: {exc}")
    if problems:
        run.notes.append(f"outcomes not recorded in {state_dir} (history, status): {problems[0]}"
                         + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    metrics_dir = config["hooks"]["metrics_dir"]
    if metrics_dir:
        try:
            from ..metrics import write_preflight_metrics

            write_preflight_metrics(metrics_dir, run.job, {n: o.to_dict() for n, o in run.outcomes.items()}, now)
        except Exception as exc:  # noqa: BLE001 - metrics are nice to have
            run.notes.append(f"metrics not written: {exc}")
    for note in run.notes:
        log(f"preflight: {note}")


# -- the whole preflight ---------------------------------------------------------------

def preflight(config, req: Request, adapter_factory, log=print, env=None) -> Run:
    """Run it; the Run says what happened (exit_code included). Raises
    PreflightError before anything ran (not in a job, bad arguments)."""
    from ..burnin.run.runner import sigterm_raises

    pf = config["preflight"]
    job, nodes = allocation(env)
    level = req.level or pf["level"] or "fast"
    budget = float(req.time_s or pf["time_s"])
    if req.need is not None and not 1 <= req.need <= len(nodes):
        raise PreflightError(f"--need {req.need}: the allocation has {len(nodes)} nodes")
    out_dir = os.path.abspath(req.out_dir or os.getcwd())
    if not os.path.isdir(out_dir):
        raise PreflightError(f"--out {out_dir}: not a directory")
    run = Run(job, nodes, level, budget, req.need)
    remove_outputs(out_dir, job)
    log_dir = os.path.join(out_dir, f"slurmqual-preflight-{job}.logs")
    os.makedirs(log_dir, exist_ok=True)
    start = time.monotonic()
    # The analysis, drains and files need a few seconds at the end.
    end = start + budget - min(10.0, budget * 0.1)
    why: list[str] = []
    before = job_steps(config, job, why, until=end)
    if before is None:
        run.notes.append(f"Slurm's steps of job {job} cannot be listed ({'; '.join(why)[:200]}): "
                         "a step this preflight has to kill may be left running, not cancelled")
    with sigterm_raises():
        try:
            _steps(config, req, run, nodes, level, log_dir, start, end, log, before)
        except KeyboardInterrupt as exc:
            import signal

            if threading_main():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
            # scancel gives KillWait seconds (30 by default) before SIGKILL: the report first
            run.interrupted = str(exc) or "interrupted"
            run.exit_code = EXIT_INTERRUPTED
            run.files["report"] = write_report(out_dir, job, run.to_dict())
        finally:
            t = time.monotonic()
            end_leftover_steps(config, job, before, log, until=start + budget)
            run.phases["cleanup"] = round(time.monotonic() - t, 2)
    if not run.interrupted:
        _act(config, req, run, adapter_factory, out_dir, log)
    run.files["report"] = write_report(out_dir, job, run.to_dict())
    return run


def _steps(config, req: Request, run: Run, nodes: list[str], level: str, log_dir: str, start: float, end: float,
           log, before: set[str] | None = None) -> None:
    from ..burnin.run.runner import switch_map
    from ..burnin.judge.topology import TopologyError, from_config

    t = time.monotonic()
    checks_until = min(end, t + max(15.0, config["hooks"]["deadline_s"] + 10.0), t + (end - t) * 0.4)
    run.reports, killed = run_checks(config, nodes, level, log_dir, checks_until)
    if killed:  # a node whose checks hung keeps its task: ended before the pair rounds
        end_leftover_steps(config, run.job, before, log, until=end)
    run.phases["checks"] = round(time.monotonic() - t, 2)
    net_nodes = [n for n in nodes if judging.check_outcome(run.reports.get(n))[0] not in ("fail", "missing")]
    topology = None
    try:
        topology = from_config(config["burnin"]["topology"])
    except (TopologyError, OSError) as exc:
        run.notes.append(f"burnin.topology unusable, judged without it: {exc}")
    switch_of = switch_map(config, log=run.notes.append) if topology is not None else None
    plan = rounds_for(net_nodes, switch_of, config["preflight"]["partners"]) if len(net_nodes) >= 2 else []
    run.pairs = partners(plan)
    t = time.monotonic()
    cfg = settings(config, req)
    if plan:
        # one retest round's share is kept back: nodes the first pass cannot
        # decide meet new, proven partners (the burn-in's retest plan)
        first, again = network_batches(cfg, len(plan)), network_batches(cfg, 1, gpu=False)
        run.raw = run_network(cfg, net_nodes, plan, log_dir, t + (end - t) * first / (first + again),
                              after_kill=lambda: end_leftover_steps(config, run.job, before, log, until=end))
    elif len(nodes) == 1 and net_nodes and cfg.get("gpu_tests"):
        # one node: no pair to measure, but its per-GPU tools run (all the time left)
        run.raw = run_network(cfg, net_nodes, [], log_dir, end,
                              after_kill=lambda: end_leftover_steps(config, run.job, before, log, until=end))
    run.phases["network"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    judge(config, run, net_nodes, topology)
    run.switch_of = switch_of
    retest = (run.analysis or {}).get("retest_plan") or []
    if retest and end - time.monotonic() >= 3:
        run.retest_plan = retest
        run.phases["judge"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        more = run_network(cfg, net_nodes, [[tuple(p) for p in rnd] for rnd in retest], log_dir, end, "retest",
                           gpu=False, after_kill=lambda: end_leftover_steps(config, run.job, before, log, until=end))
        run.raw += [dict(m, retest=1) for m in more]
        for rnd in retest:
            for a, b in rnd:
                run.pairs.setdefault(a, []).append(b)
                run.pairs.setdefault(b, []).append(a)
        run.phases["retest"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        judge(config, run, net_nodes, topology)
    run.phases["judge"] = round(time.monotonic() - t, 2)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _act(config, req: Request, run: Run, adapter_factory, out_dir: str, log) -> None:
    passing = {n: o.score for n, o in run.outcomes.items() if o.verdict == "pass"}
    switch_of = run.switch_of
    if run.need is not None:
        run.chosen = choose(passing, run.need, switch_of)
        run.exit_code = EXIT_OK if len(run.chosen) == run.need else EXIT_NOT_ENOUGH
    else:
        run.chosen = rank(passing)
        run.exit_code = EXIT_OK if len(passing) == len(run.nodes) else EXIT_SOME_FAILED
    if run.chosen and run.exit_code != EXIT_NOT_ENOUGH:
        run.files = write_outputs(out_dir, run.job, run.chosen)
    run.files["exclude"] = write_exclude(out_dir, run.job, [n for n, o in run.outcomes.items() if o.verdict != "pass"])
    drain = req.drain if req.drain is not None else config["preflight"]["drain"]
    if drain:
        try:
            drain_bad(config, run, adapter_factory(), log)
        except Exception as exc:  # noqa: BLE001 - a failed drain never loses the report
            run.notes.append(f"drain failed: {exc}")
    record(config, run, log)


def summary(run: Run) -> str:
    """What the batch script's log shows."""
    from ..slurm import compress

    lines = []
    for n, o in run.outcomes.items():
        if o.verdict != "pass":
            why = o.reason or "; ".join(o.notes) or o.speed
            lines.append(f"{n}: {o.verdict.upper()}: {why}" + (" (drained)" if n in run.drained else ""))
    passed = sum(1 for o in run.outcomes.values() if o.verdict == "pass")
    if run.interrupted:
        lines.append(f"preflight interrupted ({run.interrupted}): no node list written")
    else:
        lines.append(f"preflight: {passed} of {len(run.nodes)} nodes passed (speed: {run.mode or 'none'}), "
                     f"{run.to_dict()['elapsed_s']:.0f}s")
    if run.need is not None and not run.interrupted:
        if run.exit_code == EXIT_OK:
            lines.append(f"chose {run.need}: {compress(run.chosen)}; rendezvous host {run.chosen[0]}")
        else:
            lines.append(f"NOT ENOUGH: {passed} passed, {run.need} needed (exit {EXIT_NOT_ENOUGH}); no node list written")
    for kind in ("hosts", "nodelist", "master", "exclude", "report"):
        if kind in run.files:
            lines.append(f"  {kind}: {run.files[kind]}")
    return "\n".join(lines)

