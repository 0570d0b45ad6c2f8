"""What one task job runs: per node an intra-node test, then rounds of pairs
(concurrently within a round), optionally one run over the whole group; a
retest round's task runs its intra-node tests and pairs. Each
test's raw log is kept; one result file per task is written atomically.

Building a command (`test_argv`) is separate from running it and from judging
its output (`parse`), so each can be tested on its own.

Each measurement line carries what judges it later: `test` (the binary name
without `_perf`), `gpu_model` (the device name of the rank lines when the run
saw one model), `nccl_version`, `task` and `round` (pair rounds; null for the
intra-node and group runs). When the nccl-tests binary can write JSON (`-J`,
nccl-tests 2.17.x on) its document is read instead of scraping the text.
"""

from __future__ import annotations

import os
import time

from ...command import reap, start_logged
from ...slurm.schema.numbers import time_limit_seconds
from ..read.parse import parse_run
from ..judge.plan import rounds


def size_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


_JSON_SUPPORT: dict[str, bool] = {}


def writes_json(binary: str) -> bool:
    """Whether this nccl-tests build knows `-J,--output_file` (2.17.x on):
    its usage text is in the binary, so no run is needed to find out (an
    older build would reject the unknown option and fail every test)."""
    if binary not in _JSON_SUPPORT:
        found = False
        try:
            with open(binary, "rb") as fh:
                tail = b""
                while not found:
                    chunk = fh.read(1 << 20)
                    if not chunk:
                        break
                    found = b"--output_file" in tail + chunk
                    tail = chunk[-16:]
        except OSError:
            found = False
        _JSON_SUPPORT[binary] = found
    return _JSON_SUPPORT[binary]


def test_argv(cfg: dict, test: str, nodes: list[str], json_path: str | None = None) -> list[str]:
    """The launcher command for one nccl-tests run over `nodes` (with
    `-J json_path` when given: the build writes JSON)."""
    binary = os.path.join(cfg["nccl_tests_dir"], test)
    gpus = cfg["gpus_per_node"]
    bench = [binary, "-b", cfg["min_bytes"], "-e", cfg["max_bytes"], "-f", "2", "-g", "1"]
    if json_path:
        bench += ["-J", json_path]
    if cfg["launcher"] == "mpirun":
        hosts = ",".join(f"{n}:{gpus}" for n in nodes)
        return ["mpirun", "-np", str(gpus * len(nodes)), "-H", hosts, "--bind-to", "numa", *bench]
    argv = ["srun", f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}", f"--ntasks-per-node={gpus}",
            f"--time={cfg['test_time_limit']}"]
    if cfg["srun_mpi"] != "none":
        argv.append(f"--mpi={cfg['srun_mpi']}")
    if gpus > 1:
        argv.append("--gpus-per-task=1")
    return [*argv, *bench]


def run_batch(cfg: dict, test: str, node_sets: list[list[str]], log_dir: str, tag: str,
              task: int | None = None, round_: int | None = None, deadline: float | None = None) -> list[dict]:
    """Run the tests over disjoint node sets concurrently; judge each log.
    `deadline` (monotonic): end them there instead (preflight's own budget)."""
    timeout = time_limit_seconds(cfg["test_time_limit"]) + 30
    if deadline is not None:
        timeout = max(1, round(deadline - time.monotonic()))
    use_json = writes_json(os.path.join(cfg["nccl_tests_dir"], test))
    started = []
    for nodes in node_sets:
        log = os.path.join(log_dir, f"{tag}-{test}-{'-'.join(nodes)}.log")
        json_path = log[:-4] + ".json" if use_json else None
        if json_path and os.path.exists(json_path):
            os.unlink(json_path)  # nccl-tests never overwrites: it would write <path>.0
        try:
            proc, fh = start_logged(test_argv(cfg, test, nodes, json_path), log)
        except OSError as exc:
            started.append((nodes, None, None, log, f"could not start: {exc}"))
            continue
        started.append((nodes, proc, fh, log, None))
    out = []
    deadline = time.monotonic() + timeout
    for nodes, proc, fh, log, err in started:
        if proc is not None and reap(proc, fh, deadline):
            err = f"timed out after {timeout}s"
        out.append(_measurement(cfg, test, nodes, log, err, proc.returncode if proc else None, task, round_))
    return out


def _run_problems(parsed: list[str], err: str | None, rc: int | None) -> list[str]:
    """A run's problems: how it ended (could not start, timed out, exit code) first."""
    problems = list(parsed)
    if err:
        problems.insert(0, err)
    elif rc:
        problems.insert(0, f"exit code {rc}")
    return problems


def _measurement(cfg: dict, test: str, nodes: list[str], log: str, err: str | None, rc: int | None,
                 task: int | None = None, round_: int | None = None) -> dict:
    json_path = log[:-4] + ".json"
    try:
        result = parse_run(log, json_path if os.path.exists(json_path) else None)
    except OSError as exc:
        from ..read.parse import Result

        result = Result(ok=False, problems=[f"unreadable log: {exc.strerror}"])
    problems = _run_problems(result.problems, err, rc)
    size = cfg["reference_size"]
    busbw = result.busbw_at(size)
    if busbw is None and result.rows:
        size, busbw = result.rows[-1].size, result.rows[-1].busbw
    ok = result.ok and not problems and busbw is not None
    name = test.removesuffix("_perf")
    if result.test and result.test != name:
        problems.append(f"output is of {result.test}, not {name}")
        ok = False
    out = {"nodes": nodes, "busbw": busbw if ok else None, "size": size, "test": name, "ok": ok,
           "wrong": any(bool(r.wrong) for r in result.rows),  # data corruption when with 2+ partners (gpus.corrupt_nodes)
           "gpu_model": result.gpu_models[0] if len(result.gpu_models) == 1 else None,
           "nccl_version": result.nccl_version, "task": task, "round": round_,
           "problems": problems, "log": os.path.basename(log), "nccl": result.nccl_version}
    if not ok:
        out["error"] = "; ".join(problems)[:300] or "no bus bandwidth at any size"
    return out


def run_rail_batch(cfg: dict, pairs: list[list[str]], log_dir: str, tag: str,
                   task: int | None = None, round_: int | None = None, deadline: float | None = None) -> list[dict]:
    """Per-rail perftest over disjoint pairs: for every pair and every rail a
    server step on the first node and a client step on the second, all at
    once (rail N on its own port). The client's log is judged; the servers
    are stopped once their clients are done. `deadline` (monotonic): end
    them there instead (preflight's own budget)."""
    from ..read import perftest

    timeout = time_limit_seconds(cfg["test_time_limit"]) + 30
    if deadline is not None:
        timeout = max(1, round(deadline - time.monotonic() - cfg["rail_server_wait_s"]))
    servers: list = []
    clients: list = []
    for side, into in (("server", servers), ("client", clients)):
        if side == "client" and cfg["rail_server_wait_s"]:
            time.sleep(cfg["rail_server_wait_s"])  # every server listening before the first client
        for a, b in pairs:
            for i, rail in enumerate(cfg["rails"]):
                log = os.path.join(log_dir, f"{tag}-rail-{rail}-{a}-{b}.{side}.log")
                argv = perftest.server_argv(cfg, rail, i, a) if side == "server" else \
                    perftest.client_argv(cfg, rail, i, a, b)
                try:
                    proc, fh = start_logged(argv, log)
                except OSError as exc:
                    into.append(((a, b), rail, None, None, log, f"could not start: {exc}"))
                    continue
                into.append(((a, b), rail, proc, fh, log, None))
    deadline = time.monotonic() + timeout
    out = []
    for (a, b), rail, proc, fh, log, err in clients:
        rc = None
        if proc is not None:
            if reap(proc, fh, deadline):
                err = f"timed out after {timeout}s"
            else:
                rc = proc.returncode
        out.append(_rail_measurement(cfg, [a, b], rail, log, err, rc, task, round_))
    for _pair, _rail, proc, fh, _log, _err in servers:
        if proc is not None:
            reap(proc, fh, time.monotonic() + 5)
    return out


def _rail_measurement(cfg: dict, nodes: list[str], rail: str, log: str, err: str | None, rc: int | None,
                      task: int | None, round_: int | None) -> dict:
    from ..read.perftest import PerftestResult, parse as parse_perftest

    try:
        with open(log, encoding="utf-8", errors="replace") as fh:
            result = parse_perftest(fh.read(16 << 20))
    except OSError as exc:
        result = PerftestResult(ok=False, problems=[f"unreadable log: {exc.strerror}"])
    problems = _run_problems(result.problems, err, rc)
    if result.ok and result.device and result.device != rail:
        problems.append(f"output is of device {result.device}, not {rail}")
    at = result.gbps(cfg["rail_bytes"])
    ok = result.ok and not problems and at is not None
    out = {"nodes": nodes, "busbw": at[1] if ok else None, "size": at[0] if at else cfg["rail_bytes"],
           "test": result.test or "ib_write_bw", "rail": rail, "ok": ok, "task": task, "round": round_,
           "problems": problems, "log": os.path.basename(log)}
    if not ok:
        out["error"] = "; ".join(problems)[:300] or "no bandwidth in the output"
    return out


def planned_rounds(run_dir: str, nodes: list[str], count: int, task_id: str = "0") -> list[list[tuple[str, str]]]:
    """The task's explicit rounds (requalify's swapped-with-reference pairs, a
    switch-aware plan's rounds, a retest round's pairs), else round-robin over
    its nodes."""
    from ..results.rundir import task_plan

    _nodes, explicit = task_plan(run_dir, str(task_id))
    if not explicit:
        return rounds(nodes, count)
    mine = set(nodes)
    return [[(a, b) for a, b in rnd if a in mine and b in mine] for rnd in explicit]


def first_gpu_runs(run_dir: str) -> int:
    """Runs of each GPU tool in the first round: plan.json's `gpu_runs`
    (sized at submit, runner.gpu_runs); 1 for a plan without it (a run
    submitted by an older version) or with anything but 1-8."""
    from ..results.rundir import RunDirError, read_plan

    try:
        runs = read_plan(run_dir).get("gpu_runs", 1)
    except (RunDirError, OSError):
        return 1
    return runs if type(runs) is int and 1 <= runs <= 8 else 1


def run_task(run_dir: str, task_id: str, nodes: list[str], cfg: dict, checkpoint=None) -> dict:
    """The whole task: intra, pair rounds, optional group; returns the result dict.
    `checkpoint(result)` is called after every batch, so a task killed at its
    time limit still leaves what it measured (the rest is reported untested)."""
    from ..results.rundir import task_log_dir

    log_dir = task_log_dir(run_dir, task_id)
    result = {"task": task_id, "nodes": nodes, "started": time.time(), "finished": None, "complete": False,
              "measurements": [], "versions": {}}

    def add(batch: list[dict]) -> None:
        result["measurements"] += batch
        for m in batch:
            if m.get("nccl"):
                for n in m["nodes"]:
                    result["versions"].setdefault(n, {})["nccl"] = m["nccl"]
        if checkpoint is not None:
            checkpoint(result)

    from ..results.rundir import stage_of

    task = int(task_id) if str(task_id).isdigit() else None
    stage = stage_of(str(task_id))  # a retest round: its pairs only, each measurement says which round
    if cfg.get("gpu_tests") and not stage:  # every GPU of every node at once, before the pair rounds
        from .gputask import run_gpu_tests

        runs = first_gpu_runs(run_dir)
        for i in range(runs):
            add(run_gpu_tests(cfg, nodes, log_dir, task, tag=f"-run{i + 1}" if runs > 1 else ""))
    elif cfg.get("gpu_tests"):  # a retest round: the GPUs left retest run their tools again
        from .gputask import run_gpu_retests
        from ..results.rundir import load_stage

        wanted = (load_stage(run_dir, stage) or {}).get("gpu") or {}
        if any(n in wanted for n in nodes):
            add(run_gpu_retests(cfg, wanted, nodes, log_dir, stage))
    for test in cfg["tests"]:
        # A retest round runs the intra-node test again too: one intra run
        # never convicts a node (a straggler could put it there), two do.
        batch = run_batch(cfg, test, [[n] for n in nodes], log_dir, "intra", task)
        add([dict(m, retest=stage) for m in batch] if stage else batch)
        for r, pairs in enumerate(planned_rounds(run_dir, nodes, cfg["rounds"], task_id)):
            batch = run_batch(cfg, test, [list(p) for p in pairs], log_dir, f"round{r}", task, r)
            add([dict(m, retest=stage) for m in batch] if stage else batch)
        if cfg["all_node_run"] and len(nodes) > 2 and not stage:
            add(run_batch(cfg, test, [nodes], log_dir, "group", task))
    if cfg.get("rails"):  # per-rail NIC tests: the same pairs, every rail at once
        for r, pairs in enumerate(planned_rounds(run_dir, nodes, cfg["rounds"], task_id)):
            batch = run_rail_batch(cfg, [list(p) for p in pairs], log_dir, f"round{r}", task, r)
            add([dict(m, retest=stage) for m in batch] if stage else batch)
    result["finished"] = time.time()
    result["complete"] = True
    return result


def planned_group(run_dir: str, task_id: str) -> list[str] | None:
    """The nodes the run's plan gives this task (None: an older run without groups)."""
    from ..results.rundir import task_plan

    return task_plan(run_dir, str(task_id))[0]


def run_in_job(run_dir: str, cfg: dict, log=print) -> int:
    """`burnin task` inside its Slurm job: run this task's plan on exactly
    its planned group. A job that got other nodes (a hand-made sbatch, an
    admin's update) refuses to test them: it writes no result, so the
    analysis reports the task incomplete and its nodes untested."""
    from ...slurm import expand
    from ..results.rundir import write_result

    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodelist:
        log("slurmqual: burnin task runs inside a Slurm job (no SLURM_JOB_NODELIST)")
        return 2
    task_id = os.environ.get("SLURMQUAL_BURNIN_TASK") or os.environ.get("SLURM_ARRAY_TASK_ID") or "0"
    allocated = expand(nodelist)
    planned = planned_group(run_dir, task_id)
    if planned is not None and sorted(planned) != sorted(allocated):
        log(f"slurmqual: task {task_id} was planned for {','.join(planned)} but runs on {','.join(allocated)}: "
            "not testing (the task is reported incomplete)")
        return 2
    result = run_task(run_dir, task_id, planned or allocated, cfg,
                      checkpoint=lambda partial: write_result(run_dir, partial))
    path = write_result(run_dir, result)
    bad = sum(1 for m in result["measurements"] if not m["ok"])
    log(f"task {task_id}: {len(result['measurements'])} tests ({bad} test errors) -> {path}")
    return 0
