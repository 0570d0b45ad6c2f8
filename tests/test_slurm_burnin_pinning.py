"""Burn-in tasks on a real local Slurm run on exactly their planned groups:
on a busy partition a task waits for its own nodes instead of landing on
free ones; a task that never checkpointed leaves its nodes untested; a dry
run submits and writes nothing."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("pin", 6)
    # Groups of 2: n1,n2 / n3,n4 / n5,n6 (config beside the cluster's, same sections).
    with open(c.sq_config) as fh:
        text = fh.read()
    c.pin_config = os.path.join(c.base, "etc", "pinning.toml")
    with open(c.pin_config, "w") as fh:
        fh.write(text.replace("[burnin]\n", "[burnin]\ngroup_size = 2\n", 1))
    os.chmod(c.pin_config, 0o644)
    c.fabric({"base": 400, "noise": 0.01, "seed": 7})
    yield c
    stop_cluster(c)


def sq(cluster, *args, timeout=180):
    return subprocess.run([sys.executable, "-m", "slurmqual", *args, "--config", cluster.pin_config],
                          env=cluster.env, capture_output=True, text=True, timeout=timeout, cwd=cluster.base)


def squeue(cluster) -> dict[str, dict]:
    """job id -> {name, state, nodes (allocated), req (requested)}."""
    out = cluster.run("squeue", "-h", "-o", "%i|%j|%T|%N|%n").stdout
    jobs = {}
    for line in out.splitlines():
        jid, name, state, nodes, req = line.split("|")
        jobs[jid] = {"name": name, "state": state, "nodes": nodes, "req": req}
    return jobs


def wait(cond, what, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def occupy(cluster, node: str) -> str:
    """A user's job holding `node` until cancelled."""
    jid = cluster.run("sbatch", "--parsable", f"--nodelist={node}", "--exclusive", "--job-name=user-job",
                      "--output=/dev/null", "--wrap", "sleep 300").stdout.strip()
    wait(lambda: squeue(cluster).get(jid, {}).get("state") == "RUNNING", f"user job on {node}")
    return jid


def submit(cluster) -> tuple[str, dict]:
    p = sq(cluster, "burnin", "submit")
    assert p.returncode == 0, p.stderr
    run_dir = re.search(r"run dir (\S+)", p.stdout).group(1)
    with open(os.path.join(run_dir, "jobs.json")) as fh:
        return run_dir, json.load(fh)


def analysis(cluster, run_dir: str) -> dict:
    """analysis.json, once the analysis job (run after every task job) wrote it."""
    path = os.path.join(run_dir, "analysis.json")
    wait(lambda: os.path.exists(path), "the analysis job", timeout=240)
    with open(path) as fh:
        return json.load(fh)

def test_busy_partition_each_task_waits_for_its_own_group(cluster):
    user = occupy(cluster, "n3")
    run_dir, jobs = submit(cluster)
    with open(os.path.join(run_dir, "plan.json")) as fh:
        groups = json.load(fh)["groups"]
    assert groups == [["n1", "n2"], ["n3", "n4"], ["n5", "n6"]]
    tasks = jobs["tasks"]
    # Task 1's group is busy: it waits; nothing of the run lands on n4 meanwhile
    # (an unpinned array would have put a task on the free n4 and a second one anywhere).
    seen_running: dict[str, set[str]] = {}

    def others_done():
        q = squeue(cluster)
        for t, jid in tasks.items():
            if q.get(jid, {}).get("state") == "RUNNING":
                seen_running.setdefault(t, set()).add(q[jid]["nodes"])
        return all(tasks[t] not in q for t in ("0", "2")) and q.get(tasks["1"], {}).get("state") == "PENDING"

    wait(others_done, "tasks 0 and 2 to finish while task 1 waits")
    q = squeue(cluster)
    assert q[tasks["1"]]["state"] == "PENDING" and q[tasks["1"]]["req"] == "n[3-4]"
    assert not os.path.exists(os.path.join(run_dir, "results", "task-1.json"))
    cluster.run("scancel", user)
    a = analysis(cluster, run_dir)
    assert seen_running.get("0", {"n[1-2]"}) <= {"n[1-2]"} and seen_running.get("2", {"n[5-6]"}) <= {"n[5-6]"}
    # Every node tested exactly once on its own (intra) and within its group only.
    intra: dict[str, int] = {}
    for i, group in enumerate(groups):
        with open(os.path.join(run_dir, "results", f"task-{i}.json")) as fh:
            res = json.load(fh)
        assert res["complete"] and res["nodes"] == group
        for m in res["measurements"]:
            assert set(m["nodes"]) <= set(group) and m["task"] == i and m["test"] == "all_reduce"
            assert m["gpu_model"] == "NVIDIA H100 80GB HBM3" and m["nccl_version"] == "2.21.5"
            assert m["round"] == (0 if len(m["nodes"]) == 2 else None)
            if len(m["nodes"]) == 1:
                intra[m["nodes"][0]] = intra.get(m["nodes"][0], 0) + 1
    assert intra == {n: 1 for g in groups for n in g}
    assert a["incomplete_tasks"] == [] and a["drain"] == []
    # Slurm's own record (jobcomp) of the nodes each task job ran on.
    from slurmqual.slurm import compress

    comp = open(os.path.join(cluster.log, "jobcomp.txt")).read()
    for i, group in enumerate(groups):
        rec = next(line for line in comp.splitlines() if line.startswith(f"JobId={tasks[str(i)]} "))
        assert re.search(r" NodeList=(\S+)", rec).group(1) == compress(group) and " JobState=COMPLETED " in rec

def test_a_task_that_never_checkpointed_leaves_its_nodes_untested(cluster):
    baseline = json.loads(sq(cluster, "history", "n5", "--json").stdout)["baseline"]
    user = occupy(cluster, "n5")
    run_dir, jobs = submit(cluster)
    cancelled = jobs["tasks"]["2"]
    wait(lambda: squeue(cluster).get(cancelled, {}).get("state") == "PENDING", "task 2 pending on busy n5")
    cluster.run("scancel", cancelled)  # killed before its first checkpoint: no result file at all
    cluster.run("scancel", user)
    a = analysis(cluster, run_dir)
    assert not glob.glob(os.path.join(run_dir, "results", "task-2.json"))
    assert a["incomplete_tasks"] == ["2"]
    assert a["nodes"]["n5"]["verdict"] == "untested" and a["nodes"]["n6"]["verdict"] == "untested"
    assert {a["nodes"][n]["verdict"] for n in ("n1", "n2", "n3", "n4")} == {"pass"}
    assert json.loads(sq(cluster, "history", "n5", "--json").stdout)["baseline"] == baseline  # untested: kept


def test_dry_run_prints_the_plan_and_writes_nothing(cluster):
    runs = os.path.join(cluster.base, "runs")
    before = sorted(os.listdir(runs)) if os.path.isdir(runs) else []
    store = os.path.join(cluster.base, "slurmqual.db")
    store_before = os.stat(store).st_mtime_ns if os.path.exists(store) else None
    jobs_before = set(squeue(cluster))
    p = sq(cluster, "burnin", "submit", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "nothing submitted or written" in p.stdout
    for i, nodelist in enumerate(["n[1-2]", "n[3-4]", "n[5-6]"]):
        assert re.search(rf"task {i}: .*\n    sbatch .*--nodes=2 --nodelist={re.escape(nodelist)} ", p.stdout), p.stdout
    assert (sorted(os.listdir(runs)) if os.path.isdir(runs) else []) == before
    assert (os.stat(store).st_mtime_ns if os.path.exists(store) else None) == store_before
    assert set(squeue(cluster)) <= jobs_before  # no new job


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_submission_cancels_what_it_submitted(cluster, monkeypatch, how):
    """Ctrl-C or SIGTERM while the second group's sbatch runs: the first task
    job is cancelled (it would test for an analysis that never comes), the
    run directory says so, and no job of the run is left in the queue."""
    import signal

    from slurmqual.burnin.run.runner import submit as burnin_submit
    from slurmqual.config import load
    from slurmqual.slurm import get_adapter

    for k, v in cluster.env.items():
        monkeypatch.setenv(k, v)
    config = load(cluster.pin_config, use_cache=False)
    real = get_adapter(config)

    class Interrupting:
        """The real adapter; the interruption lands during the second sbatch."""
        calls = 0

        def __getattr__(self, name):
            return getattr(real, name)

        def submit(self, argv, script=None):
            Interrupting.calls += 1
            if Interrupting.calls == 2:
                if how == "sigterm":
                    os.kill(os.getpid(), signal.SIGTERM)  # the handler turns it into an interruption
                raise KeyboardInterrupt
            return real.submit(argv, script)

    before, handler = set(squeue(cluster)), signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        burnin_submit(config, Interrupting(), ["n1", "n2", "n3", "n4", "n5", "n6"], None, None)
    assert signal.getsignal(signal.SIGTERM) == handler  # the submission's own handler is gone
    runs = sorted(glob.glob(os.path.join(cluster.base, "runs", "*", "jobs.json")), key=os.path.getmtime)
    with open(runs[-1]) as fh:
        jobs = json.load(fh)
    assert jobs["cancelled"] is True and jobs["analysis"] is None and len(jobs["tasks"]) == 1
    first = jobs["tasks"]["0"]
    wait(lambda: squeue(cluster).get(first, {}).get("state") in (None, "CANCELLED", "COMPLETING"),
         "the first task job to be cancelled", timeout=60)
    left = {j for j, v in squeue(cluster).items() if v["name"].startswith("slurmqual-") and j not in before
            and v["state"] not in ("COMPLETING", "CANCELLED")}
    assert left == set()
    comp = os.path.join(cluster.log, "jobcomp.txt")
    wait(lambda: f"JobId={first} " in open(comp).read(), "Slurm's record of the cancelled job", 30)
    rec = next(line for line in open(comp).read().splitlines() if line.startswith(f"JobId={first} "))
    assert " JobState=CANCELLED " in rec, rec


def test_submission_killed_with_sigkill_leaves_no_drain_and_a_clear_way_out(cluster, tmp_path):
    """kill -9 (no handler runs) while the second group's sbatch hangs: the first
    task job was submitted and runs; there is no analysis job. Nothing drains,
    `watch` says what happened and how to clean up, and `analyze` on the run
    dir judges what was measured and leaves the never-submitted groups untested."""
    import signal

    slow_bin = tmp_path / "slurm-bin"
    shutil.copytree(cluster.bin_dir, slow_bin)
    count = tmp_path / "sbatch-calls"
    real = (slow_bin / "sbatch").read_text()
    (slow_bin / "sbatch").write_text(real.replace(
        "#!/bin/sh\n", f"#!/bin/sh\necho x >> {count}\n[ $(wc -l < {count}) -ge 2 ] && sleep 60\n", 1))
    cfg = tmp_path / "killed.toml"
    cfg.write_text(open(cluster.pin_config).read().replace(f'bin_dir = "{cluster.bin_dir}"', f'bin_dir = "{slow_bin}"'))
    os.chmod(cfg, 0o644)
    before_drained = {n for n, v in cluster.nodes().items() if "DRAIN" in v.get("state_flags", [])}
    proc = subprocess.Popen([sys.executable, "-m", "slurmqual", "burnin", "submit", "--config", str(cfg)],
                            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=cluster.base, start_new_session=True)
    wait(lambda: count.exists() and len(count.read_text().split()) >= 2, "the second sbatch", timeout=60)
    os.killpg(proc.pid, signal.SIGKILL)  # the submission and its hanging sbatch
    proc.communicate(timeout=30)
    run_dir = max(glob.glob(os.path.join(cluster.base, "runs", "*", "plan.json")), key=os.path.getmtime)
    run_dir = os.path.dirname(run_dir)
    run_id = json.load(open(os.path.join(run_dir, "plan.json")))["run_id"]
    assert not os.path.exists(os.path.join(run_dir, "jobs.json"))
    task0 = [j for j, v in squeue(cluster).items() if v["name"] == f"slurmqual-burnin-{run_id}"]
    assert len(task0) == 1  # the one sbatch that returned before the kill
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "5")
    assert w.returncode == 2, w.stdout + w.stderr
    assert "submission did not finish" in w.stderr and f"scancel --name=slurmqual-burnin-{run_id}" in w.stderr
    assert f"slurmqual burnin analyze {run_dir}" in w.stderr
    wait(lambda: glob.glob(os.path.join(run_dir, "results", "task-0.json")) and task0[0] not in squeue(cluster),
         "task 0 to finish on its own", timeout=180)
    a = sq(cluster, "burnin", "analyze", run_dir, "--json")
    assert a.returncode == 0, a.stderr  # judged; the untested nodes are listed with their reasons
    result = json.loads(a.stdout)
    assert result["incomplete_tasks"] == ["1", "2"] and result["drain"] == []
    assert {n: result["nodes"][n]["verdict"] for n in ("n3", "n4", "n5", "n6")} == dict.fromkeys(
        ("n3", "n4", "n5", "n6"), "untested")
    assert {"n3", "n4", "n5", "n6"} <= set(result["retest"]["untested"])
    assert {n for n, v in cluster.nodes().items() if "DRAIN" in v.get("state_flags", [])} == before_drained


# -- without a cluster: the task's own guard and the incomplete-task list --

def _run_dir(tmp_path, groups):
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps({"run_id": "r", "scope": sorted(n for g in groups for n in g),
                                               "groups": groups}))
    return run


def test_a_job_on_other_nodes_than_planned_refuses_to_test(tmp_path, monkeypatch):
    from slurmqual.burnin.run.task import run_in_job

    run = _run_dir(tmp_path, [["n1", "n2"], ["n3", "n4"]])
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[2-3]")
    monkeypatch.setenv("SLURMQUAL_BURNIN_TASK", "1")
    said = []
    assert run_in_job(str(run), {}, log=said.append) == 2
    assert "task 1 was planned for n3,n4 but runs on n2,n3" in said[0]
    assert list((run / "results").iterdir()) == []
    monkeypatch.delenv("SLURM_JOB_NODELIST")
    assert run_in_job(str(run), {}, log=said.append) == 2 and "inside a Slurm job" in said[-1]


def test_incomplete_tasks_count_the_ones_that_never_wrote_a_result(tmp_path):
    from slurmqual.burnin.run.runner import incomplete_tasks
    from slurmqual.burnin.results.rundir import write_result

    run = _run_dir(tmp_path, [["n1", "n2"], ["n3", "n4"], ["n5", "n6"], ["n7", "n8"]])
    write_result(str(run), {"task": "0", "nodes": ["n1", "n2"], "complete": True, "measurements": []})
    write_result(str(run), {"task": "1", "nodes": ["n3", "n4"], "complete": False, "measurements": []})
    (run / "results" / "task-3.json").write_text("{truncated")  # unreadable: as good as none
    assert incomplete_tasks(str(run)) == ["1", "2", "3"]
