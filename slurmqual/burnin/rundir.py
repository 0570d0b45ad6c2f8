"""A burn-in run directory, read and written in one place: the first round's
plan.json / jobs.json / results, and one retest-<k>.json per retest round
(burnin/retest.py submits them). Each file is written whole (atomic); a
reader compares the latest round with its jobs' states, so a cancelled run
leaves every file consistent, only unfinished."""


from __future__ import annotations

import glob
import json
import os
import time

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
    try:
        with open(path) as fh:
            d = json.load(fh)
    except (OSError, ValueError):
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
    from ..atomic import write_text

    write_text(stage_path(run_dir, stage["round"]), json.dumps(stage))


def submitted(run_dir: str) -> list[dict]:
    return [s for s in stages(run_dir) if s.get("state") == "submitted"]


def task_plan(run_dir: str, task: str) -> tuple[list[str] | None, list[list[list[str]]] | None]:
    """(nodes, explicit pair rounds) of one task: from plan.json for the first
    round (requalify's explicit rounds, or a switch-aware plan's per-group
    rounds), from retest-<k>.json for a retest round. (None, None): unknown."""
    k = stage_of(task)
    index = task.rsplit("-", 1)[-1] if k else task
    src = _load(os.path.join(run_dir, "plan.json")) if k == 0 else _load(stage_path(run_dir, k))
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
    plan = _load(os.path.join(run_dir, "plan.json")) or {}
    jobs = _load(os.path.join(run_dir, "jobs.json")) or {}
    latest = {"round": 0, "of": int(plan.get("max_retest_rounds") or 0), "tasks": dict(jobs.get("tasks") or {}),
              "analysis": jobs.get("analysis"), "state": "cancelled" if jobs.get("cancelled") else "submitted",
              "groups": plan.get("groups") or []}
    if not jobs.get("tasks") and jobs.get("array"):
        latest["tasks"] = {"0": jobs["array"]}
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
