"""A burn-in run directory, read and written in one place (nothing else
opens these files):

    <run_dir>/plan.json            run_id, scope, groups (one per task), rounds, group_rounds, ...
    <run_dir>/jobs.json            {"tasks": {"0": job id, ...}, "analysis": job id | null, "cancelled"?}
    <run_dir>/retest-<k>.json      one per retest round (burnin/run/retest.py submits them)
    <run_dir>/results/task-N.json  what task N measured (written at every checkpoint)
    <run_dir>/analysis.json        the analysis (Analysis.to_dict)
    <run_dir>/logs/                sbatch outputs and per-task tool logs

Each file is written whole (atomic). Every read takes a regular file only (a
FIFO would hang, /dev/zero never ends), at most MAX_BYTES, and checks the
shape of what it reads: a malformed file is a RunDirError naming it (or, for
the progress readers, left out), never a crash further on and never
half-trusted. A reader compares the latest round with its jobs' states, so a
cancelled run leaves every file consistent, only unfinished."""


from __future__ import annotations

import glob
import json
import os

MAX_BYTES = 256 << 20  # far above any run's results; a bound so /dev/zero cannot eat the memory


class RunDirError(Exception):
    """A run directory file is unreadable or malformed; the message names it."""


def plan_path(run_dir: str) -> str:
    return os.path.join(run_dir, "plan.json")


def jobs_path(run_dir: str) -> str:
    return os.path.join(run_dir, "jobs.json")


def analysis_path(run_dir: str) -> str:
    return os.path.join(run_dir, "analysis.json")


def results_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "results")


def logs_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "logs")


def task_log_dir(run_dir: str, task_id: str) -> str:
    """Where task `task_id` keeps its tools' outputs (created)."""
    path = os.path.join(logs_dir(run_dir), f"task-{task_id}")
    os.makedirs(path, exist_ok=True)
    return path


def read_bytes(path: str) -> bytes:
    """A run (or measurements) file: a regular file of at most MAX_BYTES. RunDirError otherwise."""
    from ...fsroot import read_regular

    try:
        return read_regular(path, MAX_BYTES)
    except OSError as exc:
        raise RunDirError(f"{path}: {exc.strerror or exc}") from None


def read_json(path: str) -> object:
    """A run file's JSON (read_bytes). RunDirError when it is not JSON."""
    from ...fsroot import load_json_text

    raw = read_bytes(path)
    try:
        return load_json_text(raw)
    except ValueError as exc:
        raise RunDirError(f"{path}: not JSON ({exc})") from None


def _write(path: str, doc: object) -> None:
    from ...atomic import ensure_dir, write_text

    ensure_dir(os.path.dirname(path))
    write_text(path, json.dumps(doc))


def _names(value: object, what: str) -> list[str]:
    from ...names import check_all

    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return check_all(value, f"node name in {what}")


def _check_rounds(rounds: object, what: str) -> None:
    if not isinstance(rounds, list) or not all(isinstance(r, list) for r in rounds):
        raise ValueError(f"{what} is not a list of rounds")
    for i, rnd in enumerate(rounds):
        for pair in rnd:
            if len(_names(pair, f"{what}[{i}] pair")) != 2:
                raise ValueError(f"{what}[{i}] has a pair of {len(pair)} nodes")


# -- plan ----------------------------------------------------------------------

def write_plan(run_dir: str, plan: dict) -> None:
    os.makedirs(logs_dir(run_dir), exist_ok=True)
    _write(plan_path(run_dir), plan)


def read_plan(run_dir: str) -> dict:
    """plan.json with its node names checked: scope, groups (lists of names),
    rounds and group_rounds (None, or rounds of [a, b] pairs)."""
    path = plan_path(run_dir)
    plan = read_json(path)
    try:
        if not isinstance(plan, dict):
            raise ValueError("not an object")
        _names(plan.get("scope"), "scope")
        groups = plan.get("groups", [])
        if not isinstance(groups, list):
            raise ValueError("groups is not a list")
        for i, g in enumerate(groups):
            _names(g, f"groups[{i}]")
        if plan.get("rounds") is not None:
            _check_rounds(plan["rounds"], "rounds")
        per = plan.get("group_rounds")
        if per is not None:
            if not isinstance(per, list):
                raise ValueError("group_rounds is not a list")
            for i, rounds in enumerate(per):
                if rounds:
                    _check_rounds(rounds, f"group_rounds[{i}]")
    except ValueError as exc:   # BadNodeName included
        raise RunDirError(f"{path}: {exc}") from None
    return plan


def swapped_nodes(plan: dict) -> set[str]:
    """A requalify run's swapped nodes (the first of each explicit pair): the
    nodes requalify decides and drains; empty for a fleet run."""
    return {pair[0] for rnd in plan.get("rounds") or [] for pair in rnd}


def reference_nodes(plan: dict) -> set[str]:
    """A requalify run's reference nodes: every node of its scope that is not a
    swapped one (the first of each explicit pair), those its first round left
    unpaired included: they are the retest rounds' new partners. Empty for a
    fleet run (no explicit rounds)."""
    swapped = swapped_nodes(plan)
    return set(plan.get("scope") or []) - swapped if swapped else set()


def _plan_or_none(run_dir: str) -> dict | None:
    try:
        return read_plan(run_dir)
    except RunDirError:
        return None


# -- jobs ----------------------------------------------------------------------

def write_jobs(run_dir: str, tasks: list[str], analysis: str | None, cancelled: bool = False) -> None:
    doc: dict = {"tasks": {str(i): j for i, j in enumerate(tasks)}, "analysis": analysis}
    if cancelled:
        doc["cancelled"] = True
    _write(jobs_path(run_dir), doc)


def read_jobs(run_dir: str) -> dict | None:
    """jobs.json as {"tasks": {task: job id}, "analysis": id | None, "cancelled": bool};
    None when there is none (the submission never finished). Runs before
    pinning had one array: {"array": id}."""
    path = jobs_path(run_dir)
    if not os.path.lexists(path):
        return None
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise RunDirError(f"{path}: not an object")
    tasks = doc.get("tasks")
    if not tasks and isinstance(doc.get("array"), str):
        tasks = {"0": doc["array"]}
    elif tasks is None:
        tasks = {}
    if not isinstance(tasks, dict) or not all(isinstance(v, str) and v.isdigit() for v in tasks.values()):
        raise RunDirError(f"{path}: 'tasks' is not a map of task -> job id")
    analysis = doc.get("analysis")
    if analysis is not None and not (isinstance(analysis, str) and analysis.isdigit()):
        raise RunDirError(f"{path}: 'analysis' is not a job id")
    return {"tasks": {str(k): v for k, v in tasks.items()}, "analysis": analysis,
            "cancelled": doc.get("cancelled") is True}


def _jobs_or_empty(run_dir: str) -> dict:
    try:
        return read_jobs(run_dir) or {"tasks": {}, "analysis": None, "cancelled": False}
    except RunDirError:
        return {"tasks": {}, "analysis": None, "cancelled": False}


# -- results -------------------------------------------------------------------

def write_result(run_dir: str, result: dict) -> str:
    path = os.path.join(results_dir(run_dir), f"task-{result['task']}.json")
    _write(path, result)
    return path


def read_results(run_dir: str) -> tuple[list[tuple[str, dict]], list[str]]:
    """Task results ((path, result) in file order) and "path: why" for those
    unreadable or malformed. A result has a task, a list of measurements
    (each checked by the analysis) and a map of versions per node."""
    good, bad = [], []
    for path in sorted(glob.glob(os.path.join(results_dir(run_dir), "task-*.json"))):
        try:
            res = read_json(path)
            if not isinstance(res, dict) or not isinstance(res.get("measurements"), list):
                raise RunDirError(f"{path}: not a task result (no 'measurements' list)")
            versions = res.get("versions", {})
            if not isinstance(versions, dict) or not all(isinstance(v, dict) for v in versions.values()):
                raise RunDirError(f"{path}: 'versions' is not a map of node -> versions")
        except RunDirError as exc:
            bad.append(str(exc))
            continue
        good.append((path, res))
    return good, bad


# -- analysis ------------------------------------------------------------------

def write_analysis(run_dir: str, analysis: dict) -> None:
    _write(analysis_path(run_dir), analysis)


def read_analysis(path: str) -> dict | None:
    """analysis.json of a run directory (or the file itself); None when there
    is none yet. RunDirError when it is unreadable or not an analysis."""
    if os.path.isdir(path):
        path = analysis_path(path)
    if not os.path.lexists(path):
        return None
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise RunDirError(f"{path}: not a burn-in analysis (no 'nodes' map)")
    return doc


# -- retest rounds -------------------------------------------------------------

STATES = ("submitting", "submitted", "failed", "cancelled")


def task_id(stage: int, index: int) -> str:
    return str(index) if stage == 0 else f"r{stage}-{index}"


def stage_of(task: str) -> int:
    """The retest round a task id belongs to (0: the first round)."""
    if task.startswith("r") and "-" in task:
        try:
            return int(task[1:].split("-", 1)[0])
        except ValueError:
            return 0
    return 0


def stage_path(run_dir: str, stage: int) -> str:
    return os.path.join(run_dir, f"retest-{stage}.json")


def load_stage(run_dir: str, stage: int) -> dict | None:
    return _load(stage_path(run_dir, stage))


def _load(path: str) -> dict | None:
    """A retest round file, None when missing, unreadable or not an object."""
    try:
        d = read_json(path)
    except RunDirError:
        return None
    return d if isinstance(d, dict) else None


def stages(run_dir: str) -> list[dict]:
    """The run's retest rounds on record, by round number (unreadable ones left out)."""
    out = []
    for path in glob.glob(os.path.join(run_dir, "retest-*.json")):
        d = _load(path)
        if d is not None and isinstance(d.get("round"), int):
            out.append(d)
    return sorted(out, key=lambda d: d["round"])


def write_stage(run_dir: str, stage: dict) -> None:
    from ...atomic import write_text

    write_text(stage_path(run_dir, stage["round"]), json.dumps(stage))


def submitted(run_dir: str) -> list[dict]:
    return [s for s in stages(run_dir) if s.get("state") == "submitted"]


def task_plan(run_dir: str, task: str) -> tuple[list[str] | None, list[list[list[str]]] | None]:
    """(nodes, explicit pair rounds) of one task: from plan.json for the first
    round (requalify's explicit rounds, or a switch-aware plan's per-group
    rounds), from retest-<k>.json for a retest round. (None, None): unknown."""
    k = stage_of(task)
    index = task.rsplit("-", 1)[-1] if k else task
    src = _plan_or_none(run_dir) if k == 0 else _load(stage_path(run_dir, k))
    if src is None:
        return None, None
    try:
        i = int(index)
        nodes = list(src["groups"][i])
    except (KeyError, ValueError, TypeError, IndexError):
        return None, None
    if src.get("rounds"):
        mine = set(nodes)
        return nodes, [[p for p in rnd if p[0] in mine and p[1] in mine] for rnd in src["rounds"]]
    per = src.get("group_rounds")
    if isinstance(per, list) and i < len(per) and per[i]:
        return nodes, per[i]
    return nodes, None


def planned_tasks(run_dir: str, plan: dict) -> list[str]:
    """Every task the run planned and submitted: the first round's groups and
    the groups of each retest round that was submitted."""
    out = [str(i) for i in range(len(plan.get("groups") or []))]
    for s in submitted(run_dir):
        out += [task_id(s["round"], i) for i in range(len(s.get("groups") or []))]
    return out


# -- reading a run's progress ---------------------------------------------------------

def current(run_dir: str) -> dict:
    """The run's latest stage: {round, of, tasks (ids -> job), analysis (job),
    state}. Stage 0 comes from jobs.json."""
    plan = _plan_or_none(run_dir) or {}
    jobs = _jobs_or_empty(run_dir)
    latest = {"round": 0, "of": int(plan.get("max_retest_rounds") or 0), "tasks": dict(jobs.get("tasks") or {}),
              "analysis": jobs.get("analysis"), "state": "cancelled" if jobs.get("cancelled") else "submitted",
              "groups": plan.get("groups") or []}
    for s in stages(run_dir):
        if s.get("analysis"):  # a round whose jobs were all submitted (maybe cancelled since)
            latest = {"round": s["round"], "of": s.get("of", latest["of"]), "tasks": dict(s.get("tasks") or {}),
                      "analysis": s.get("analysis"), "state": s.get("state"), "groups": s.get("groups") or [],
                      "error": s.get("error")}
    return latest


def describe(stage: dict) -> str:
    """'retest round 1 of 2 submitted: task jobs 12,13, analysis job 14' (or failed/cancelled)."""
    if stage["round"] == 0:
        return "first round"
    what = f"retest round {stage['round']} of {stage['of']} {stage['state']}"
    if stage["state"] == "submitted":
        return f"{what}: task jobs {','.join(stage['tasks'].values())}, analysis job {stage['analysis']}"
    return f"{what}: {stage.get('error') or '?'}"
