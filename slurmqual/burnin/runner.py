"""Submitting a burn-in run and turning its task results into actions:
verdicts, drains (through the Slurm adapter, with the hooks' ownership
rules), the store, metrics and analysis.json. Only the analysis writes the store."""

from __future__ import annotations

import glob
import json
import os
import secrets
import sys
import time

from .analyze import Analysis, Measurement, Params, analyze
from .plan import groups


class BurninError(Exception):
    pass


def params(cfg: dict) -> Params:
    return Params(cfg["threshold"], cfg["reference_size"], cfg["guard_fraction"], cfg["guard_min"], cfg["baseline_drop"])


# -- submit -------------------------------------------------------------------

def submit(config, adapter, nodes: list[str], partition: str | None, reservation: str | None,
           explicit_rounds: list[list[list[str]]] | None = None) -> dict:
    cfg = config["burnin"]
    if len(nodes) < 2:
        raise BurninError("a burn-in needs at least 2 nodes")
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
    run_dir = os.path.join(cfg["run_dir"], run_id)
    os.makedirs(os.path.join(run_dir, "logs"), exist_ok=True)
    # Explicit rounds (requalify) need every pair inside one task: one group.
    plan = [sorted(nodes)] if explicit_rounds else groups(sorted(nodes), cfg["group_size"])
    with open(os.path.join(run_dir, "plan.json"), "w") as fh:
        json.dump({"run_id": run_id, "scope": sorted(nodes), "groups": plan, "time": time.time(),
                   "config_digest": config.digest, "rounds": explicit_rounds}, fh)
    sizes = sorted({len(g) for g in plan})
    common = []
    partition = partition or cfg["partition"]
    reservation = reservation or cfg["reservation"]
    if partition:
        common.append(f"--partition={partition}")
    if reservation:
        common.append(f"--reservation={reservation}")
    if cfg["account"]:
        common.append(f"--account={cfg['account']}")
    from ..slurm import compress

    exe = f"{sys.executable} -m slurmqual"
    env_cfg = f"--export=ALL,SLURMQUAL_CONFIG={config.path}" if config.path else "--export=ALL"
    if len(plan) == 1:
        where = [f"--nodelist={compress(sorted(nodes))}"]
    else:
        outside = _outside(adapter, nodes)
        where = [f"--exclude={outside}"] if outside else []
    array = adapter.submit([
        f"--job-name=slurmqual-burnin-{run_id}", f"--array=0-{len(plan) - 1}",
        f"--nodes={sizes[0]}-{sizes[-1]}" if len(sizes) > 1 else f"--nodes={sizes[0]}", "--exclusive", *where,
        f"--time={cfg['task_time_limit']}", f"--output={run_dir}/logs/task-%a.out", env_cfg, *common,
    ], script=f"{exe} burnin task {run_dir}")
    from ..slurm import SlurmError

    try:
        analysis = adapter.submit([
            f"--job-name=slurmqual-analysis-{run_id}", f"--dependency=afterany:{array}", "--nodes=1",
            f"--output={run_dir}/logs/analysis.out", "--time=00:30:00", env_cfg,
            *[c for c in common if not c.startswith("--reservation")],
        ], script=f"{exe} burnin analyze {run_dir}")
    except SlurmError:
        adapter.cancel([array])  # an array nobody analyses would test for nothing
        raise
    with open(os.path.join(run_dir, "jobs.json"), "w") as fh:
        json.dump({"array": array, "analysis": analysis}, fh)
    return {"run_id": run_id, "run_dir": run_dir, "array_job": array, "analysis_job": analysis, "groups": len(plan)}


def _outside(adapter, nodes: list[str]) -> str:
    """Nodes of the cluster not in scope, so array tasks land only inside it."""
    from ..slurm import compress

    rest = sorted({n.name for n in adapter.node_info()} - set(nodes))
    return compress(rest) if rest else ""


# -- analyze ------------------------------------------------------------------

def load_run(run_dir: str) -> tuple[dict, list[dict], dict]:
    """plan, raw measurement dicts, versions per node from a run directory."""
    try:
        with open(os.path.join(run_dir, "plan.json")) as fh:
            plan = json.load(fh)
    except (OSError, ValueError) as exc:
        raise BurninError(f"{run_dir}: not a burn-in run directory ({exc})") from None
    measurements, versions = [], {}
    for path in sorted(glob.glob(os.path.join(run_dir, "results", "task-*.json"))):
        try:
            with open(path) as fh:
                res = json.load(fh)
            measurements.extend(res["measurements"])
            for n, v in res.get("versions", {}).items():
                versions.setdefault(n, {}).update(v)
        except (OSError, ValueError, KeyError) as exc:
            raise BurninError(f"{path}: unreadable task result ({exc})") from None
    return plan, measurements, versions


def incomplete_tasks(run_dir: str) -> list[str]:
    """Tasks whose result file is a checkpoint (the task was killed mid-way)."""
    out = []
    for path in sorted(glob.glob(os.path.join(run_dir, "results", "task-*.json"))):
        try:
            with open(path) as fh:
                res = json.load(fh)
        except (OSError, ValueError):
            continue
        if res.get("complete") is False:
            out.append(str(res.get("task")))
    return out


def load_jsonl(path: str) -> list[dict]:
    out = []
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise BurninError(f"{path}: {exc.strerror}") from None
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                if not isinstance(d, dict):
                    raise ValueError("not an object")
                Measurement.from_dict(d)
            except (ValueError, KeyError) as exc:
                raise BurninError(f"{path}:{lineno}: bad measurement: {exc}") from None
            out.append(d)
    return out


def judge(config, raw: list[dict], scope: list[str] | None, baselines: dict[str, float]) -> Analysis:
    return analyze([Measurement.from_dict(d) for d in raw], scope, params(config["burnin"]), baselines)


def drain_failures(adapter, analysis: Analysis, log=print) -> list[str]:
    """Drain failing nodes with our reason, never over someone else's drain."""
    from ..slurm import SlurmError
    from ..slurm import reason as reasons

    if not analysis.drain:
        return []
    info = {n.name: n for n in adapter.node_info()}
    median = next((v for k, v in analysis.median.items() if k.endswith(":pair")), None) or \
        next(iter(analysis.median.values()), 0.0)
    done = []
    for node in analysis.drain:
        i = info.get(node)
        if i is not None and i.drained and not reasons.is_ours(i.reason):
            log(f"{node}: already drained by someone else ({i.reason!r}); left alone")
            continue
        if i is not None and i.hands_off and not i.drained:
            log(f"{node}: failing but {i.state} ({','.join(i.flags)}): left alone")
            continue
        score = analysis.nodes[node]["score"]
        reason = reasons.make("burnin", f"busbw {score:.1f} GB/s < {analysis.threshold:.0%} of median {median:.1f}")
        if i is not None and i.reason == reason:
            done.append(node)  # re-analysis: already drained by this very verdict
            continue
        try:
            adapter.drain([node], reason)
            done.append(node)
        except SlurmError as exc:
            log(f"{node}: could not drain: {exc}")
    return done


def with_host_versions(config, versions: dict[str, dict]) -> dict[str, dict]:
    """Add driver and NIC firmware from the hooks' per-node state files to the
    NCCL versions the tasks captured, so each baseline says what it was taken under."""
    from ..inventory import read_state_versions

    state, _bad = read_state_versions(config["hooks"]["state_dir"])
    out = {n: dict(v) for n, v in versions.items()}
    for node, ver in state.items():
        for key in ("driver", "nic_fw"):
            if ver.get(key):
                out.setdefault(node, {}).setdefault(key, ver[key])
    return out


def record(config, run_id: str, when: float, scope: list[str], raw: list[dict], analysis: Analysis,
           versions: dict) -> None:
    from .store import RunRecord, open_store

    store = open_store(config["store"]["path"])
    try:
        store.record_run(RunRecord(run_id, when, scope, config.digest), raw, analysis.to_dict(), versions)
    finally:
        store.close()


def baselines_from_store(config) -> dict[str, float]:
    from .store import existing

    with existing(config["store"]["path"]) as store:
        return store.baselines() if store else {}
