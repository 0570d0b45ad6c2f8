"""requalify on a real local Slurm: pass, still broken, cancelled. Always ends
with no reservation left and no node stuck in 'pending'."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from slurmqual.nodetree import add_module, remove_module, set_dcgm_fail, set_gpu_serial

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("requalify", 5)
    c.fabric({"base": 400, "noise": 0.005, "seed": 9})
    p = sq(c, "burnin", "submit")
    run_dir = re.search(r"run dir (\S+)", p.stdout).group(1)
    assert sq(c, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "480").returncode == 0
    yield c
    stop_cluster(c)


def sq(cluster, *args, timeout=240):
    return subprocess.run([sys.executable, "-m", "slurmqual", *args], env=cluster.env, capture_output=True,
                          text=True, timeout=timeout, cwd=cluster.base)


def reservations(cluster) -> str:
    return cluster.run("scontrol", "show", "reservation").stdout.strip()


def drained(cluster) -> dict[str, str]:
    return {n: v.get("reason", "") for n, v in cluster.nodes().items() if "DRAIN" in v.get("state_flags", [])}


def test_repaired_node_requalifies_to_idle_with_new_baseline(cluster):
    remove_module(cluster.tree("n2"), "nvidia_peermem")
    sq(cluster, "drain", "n2", "--reason", "GPU swapped")
    add_module(cluster.tree("n2"), "nvidia_peermem")  # the repair
    before = json.loads(sq(cluster, "history", "n2", "--json").stdout)
    p = sq(cluster, "requalify", "n2", "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["n2"]["result"] == "pass"
    assert "n2" not in drained(cluster) and reservations(cluster) == "No reservations in the system"
    after = json.loads(sq(cluster, "history", "n2", "--json").stdout)
    pair = lambda h: [e for e in h["events"] if e["kind"] == "baseline" and "pair" in e["detail"]]  # noqa: E731
    assert len(pair(after)) == len(pair(before)) + 1
    assert any(e["kind"] == "requalify" and " pass" in e["detail"] for e in after["events"]), after
    assert any(e["kind"] == "drain" and "GPU swapped" in e["detail"] for e in after["events"])
    assert not os.path.exists(os.path.join(cluster.state_dir, "requalify", "n2.json"))


def test_still_broken_node_ends_drained_with_reason(cluster):
    remove_module(cluster.tree("n3"), "nvidia_peermem")
    try:
        sq(cluster, "drain", "n3", "--reason", "NIC swapped")
        p = sq(cluster, "requalify", "n3")
        assert p.returncode == 1
        assert drained(cluster).get("n3", "").startswith("slurmqual: peermem: nvidia_peermem not loaded")
        assert reservations(cluster) == "No reservations in the system"
    finally:
        add_module(cluster.tree("n3"), "nvidia_peermem")
        cluster.run("scontrol", "update", "nodename=n3", "state=resume", check=False)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupted_requalify_leaves_node_drained_and_no_reservation(cluster, sig):
    cluster.fabric({"base": 400, "hang": ["n4"]})  # the burn-in hangs on n4 until cancelled
    try:
        sq(cluster, "drain", "n4", "--reason", "cable swapped")
        proc = subprocess.Popen([sys.executable, "-m", "slurmqual", "requalify", "n4"], env=cluster.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cluster.base)
        cluster.wait_for(lambda: "slurmqual-requalify" in reservations(cluster), 30, "reservation")
        st = json.loads(sq(cluster, "status", "n4", "--json").stdout)
        assert st["nodes"][0]["qualification"] == "pending"
        cluster.wait_for(lambda: "slurmqual-burnin" in cluster.run("squeue", "-h", "-o", "%j").stdout, 60, "burn-in")
        # Everything requalify submitted runs inside its reservation, the analysis job included.
        jobs = cluster.run("squeue", "-h", "-o", "%j|%v").stdout.split()
        assert jobs and all(j.split("|")[1].startswith("slurmqual-requalify-") for j in jobs if "slurmqual" in j), jobs
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 2 and f"cancelled by signal {int(sig)}" in out, out
        assert reservations(cluster) == "No reservations in the system", out
        assert drained(cluster).get("n4") == f"slurmqual: requalify: cancelled by signal {int(sig)}", out
        assert not os.path.exists(os.path.join(cluster.state_dir, "requalify", "n4.json"))
        cluster.wait_for(lambda: "slurmqual" not in cluster.run("squeue", "-h", "-o", "%j").stdout, 30,
                         "burn-in jobs cancelled")
    finally:
        cluster.fabric({"base": 400})
        cluster.run("scontrol", "update", "nodename=n4", "state=resume", check=False)


def test_no_wait_returns_at_once_shows_pending_then_cleans_up(cluster):
    import time

    sq(cluster, "drain", "n5", "--reason", "GPU swapped")
    start = time.monotonic()
    p = sq(cluster, "requalify", "n5", "--no-wait")
    assert p.returncode == 0 and "pending" in p.stdout and time.monotonic() - start < 10, p.stdout + p.stderr
    marker = os.path.join(cluster.state_dir, "requalify", "n5.json")
    cluster.wait_for(lambda: os.path.exists(marker), 30, "pending marker")
    st = json.loads(sq(cluster, "status", "n5", "--json").stdout)
    assert st["nodes"][0]["qualification"] == "pending"
    cluster.wait_for(lambda: not os.path.exists(marker), 180, "background requalify to finish")
    assert "n5" not in drained(cluster) and reservations(cluster) == "No reservations in the system"


def test_requalify_without_an_analysis_ends_drained_with_why(cluster):
    """The analysis job dies (here: cancelled by someone) so no analysis.json is
    ever written: the node never passed, so it ends drained, saying why."""
    cluster.fabric({"base": 400, "hang": ["n4"]})
    try:
        sq(cluster, "drain", "n4", "--reason", "HCA swapped")
        proc = subprocess.Popen([sys.executable, "-m", "slurmqual", "requalify", "n4"], env=cluster.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cluster.base)
        names = lambda: cluster.run("squeue", "-h", "-o", "%i|%j").stdout.split()  # noqa: E731
        cluster.wait_for(lambda: any("|slurmqual-analysis-" in j for j in names()), 60, "analysis job queued")
        (analysis,) = [j.split("|")[0] for j in names() if "|slurmqual-analysis-" in j]
        cluster.run("scancel", analysis)
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode != 0 and "burn-in produced no analysis" in out, out
        reason = drained(cluster).get("n4", "")
        assert reason.startswith("slurmqual: requalify: burn-in produced no analysis"), (reason, out)
        assert reservations(cluster) == "No reservations in the system", out
        assert not os.path.exists(os.path.join(cluster.state_dir, "requalify", "n4.json"))
        st = json.loads(sq(cluster, "status", "n4", "--json").stdout)
        assert st["nodes"][0]["qualification"] != "qualified"
    finally:
        cluster.fabric({"base": 400})
        cluster.run("scontrol", "update", "nodename=n4", "state=resume", check=False)


def test_requalify_runs_dcgm_and_a_memory_fault_keeps_the_node_drained(cluster):
    """A GPU swap is when the long diagnostics run: DCGM's memory test fails on
    GPU 4, the node never reaches the burn-in and stays drained with the why."""
    set_dcgm_fail(cluster.tree("n3"), {4: "Error using CUDA API cudaMemcpy Check DCGM and system logs for errors."})
    try:
        sq(cluster, "drain", "n3", "--reason", "GPU 4 swapped")
        p = sq(cluster, "requalify", "n3")
        assert p.returncode == 1, p.stdout + p.stderr
        assert drained(cluster).get("n3", "").startswith("slurmqual: dcgm: dcgmi diag -r 2: "), p.stdout
        assert "n3: checks fail: dcgm:" in p.stdout
        assert reservations(cluster) == "No reservations in the system"
    finally:
        set_dcgm_fail(cluster.tree("n3"), {})
        cluster.run("scontrol", "update", "nodename=n3", "state=resume", check=False)


def test_borderline_swapped_node_is_retested_within_requalify_and_decided(cluster):
    """The swapped node is 15% slow: with its first two reference nodes that is
    below the line but inside the margin (retest). The burn-in's analysis pairs
    it with the two references it has not met, inside requalify's reservation
    and time, and the final analysis decides: slow, drained with the burn-in's reason."""
    cluster.fabric({"base": 400, "noise": 0.0, "nodes": {"n1": 0.86}})
    try:
        sq(cluster, "drain", "n1", "--reason", "NIC swapped")
        p = sq(cluster, "requalify", "n1", "--reference", "4", "--json")
        assert p.returncode == 1, p.stdout + p.stderr
        run_dir = os.path.join(cluster.base, "runs", re.search(r"burn-in (\S+): task job", p.stdout).group(1))
        with open(os.path.join(run_dir, "analysis.json")) as fh:
            a = json.load(fh)
        assert a["nodes"]["n1"]["verdict"] == "fail", (a["nodes"]["n1"], a["problems"], a["retest"], p.stdout)
        m = re.search(r"\nn1: FAIL: drained \((slurmqual: burnin: busbw \d+\.\d GB/s < 90% of median 39\d\.\d)\)\n", p.stdout)
        assert m and drained(cluster) == {"n1": m.group(1)}, p.stdout  # the burn-in's reason; references in service
        assert re.search(r"burn-in: retest round 1 of 2 submitted: task jobs \d+, analysis job \d+\n", p.stdout), \
            p.stdout
        result = json.loads(p.stdout.strip().splitlines()[-1])
        assert result["n1"]["result"] == "fail", result
        with open(os.path.join(run_dir, "plan.json")) as fh:
            first_refs = {q for rnd in json.load(fh)["rounds"] for _n, q in rnd}
        with open(os.path.join(run_dir, "retest-1.json")) as fh:
            stage1 = json.load(fh)
        assert stage1["suspects"] == ["n1"] and stage1["state"] == "submitted"
        new_refs = {q for rnd in stage1["rounds"] for _n, q in rnd}
        assert len(first_refs) == len(new_refs) == 2 and first_refs | new_refs == {"n2", "n3", "n4", "n5"}
        with open(os.path.join(run_dir, "results", "task-r1-0.json")) as fh:
            res = json.load(fh)
        assert res["complete"] and all(m["retest"] == 1 for m in res["measurements"])
        assert {tuple(m["nodes"]) for m in res["measurements"] if len(m["nodes"]) == 2} == \
            {tuple(p) for rnd in stage1["rounds"] for p in rnd}
        # The analysis leaves a node in requalify's maintenance reservation alone; requalify drains it.
        assert a["retest"]["round"] == 1 and a["retest"]["final"] is True and a["drain"] == []
        assert set(a["nodes"]) == {"n1"} and not [x for x in a["problems"] if re.match(r"n[2-5]: ", x)]  # evidence only
        assert reservations(cluster) == "No reservations in the system"
        assert not os.path.exists(os.path.join(cluster.state_dir, "requalify", "n1.json"))
    finally:
        cluster.fabric({"base": 400})
        cluster.run("scontrol", "update", "nodename=n1", "state=resume", check=False)


def swap_gpu(cluster, name: str, serial: str) -> str:
    """Replace GPU 3 of `name` (its recorded nvidia-smi report); the health check
    (every few seconds) holds the node drained as swapped. Returns that reason.
    The earlier tests' hook drains count in the fleet guard's window (limit 2):
    cleared as an admin would (`<state_dir>/guard/drains`), so this one is not held."""
    import shutil

    shutil.rmtree(os.path.join(cluster.state_dir, "guard", "drains"), ignore_errors=True)
    state = os.path.join(cluster.state_dir, "nodes", f"{name}.json")
    cluster.wait_for(lambda: os.path.exists(state) and "gpu:0000:4b:00.0" in json.load(open(state)).get("hardware", {}),
                     30, f"{name}'s hardware identity recorded by its health check")
    old = json.load(open(state))["hardware"]["gpu:0000:4b:00.0"]["serial"]
    set_gpu_serial(cluster.tree(name), 3, serial)
    reason = f"slurmqual: swap: GPU 3 serial {old} -> {serial}: requalify"
    cluster.wait_for(lambda: drained(cluster).get(name) == reason, 30, f"{name} drained as swapped")
    return reason


def test_requalify_swapped_passes_a_swapped_node_clears_the_swap_and_resumes_it(cluster):
    swap_gpu(cluster, "n1", "1652399999901")
    p = sq(cluster, "requalify", "--swapped", "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "swapped: n1" in p.stdout
    assert json.loads(p.stdout.strip().splitlines()[-1])["n1"]["result"] == "pass"
    state = json.load(open(os.path.join(cluster.state_dir, "nodes", "n1.json")))
    assert state["swap"] is None and state["hardware"]["gpu:0000:4b:00.0"]["serial"] == "1652399999901"
    assert "n1" not in drained(cluster) and reservations(cluster) == "No reservations in the system"
    time.sleep(cluster.health_interval * 2 + 1)   # health checks ran since: the node stays in service
    assert "n1" not in drained(cluster)
    again = sq(cluster, "requalify", "--swapped")
    assert again.returncode == 0 and "no swapped node waits for requalify" in again.stdout


def test_requalify_swapped_that_fails_keeps_the_node_drained_with_the_failure(cluster):
    swap_reason = swap_gpu(cluster, "n2", "1652399999902")
    remove_module(cluster.tree("n2"), "nvidia_peermem")   # the new GPU's node has another fault
    try:
        p = sq(cluster, "requalify", "--swapped")
        assert p.returncode == 1, p.stdout + p.stderr
        failure = drained(cluster).get("n2", "")
        assert failure.startswith("slurmqual: peermem: nvidia_peermem not loaded"), (failure, p.stdout)
        time.sleep(cluster.health_interval * 2 + 1)   # health checks ran since: the failure's reason holds
        assert drained(cluster).get("n2") == failure and failure != swap_reason
        state = json.load(open(os.path.join(cluster.state_dir, "nodes", "n2.json")))
        assert state["swap"]["failed"]["reason"] == failure
        # The timer's next run leaves it to an admin: no burn-in of a known-broken node every 15 minutes.
        again = sq(cluster, "requalify", "--swapped")
        assert again.returncode == 0 and "n2: swapped, but its requalify failed" in again.stdout, again.stdout
        assert reservations(cluster) == "No reservations in the system"
    finally:
        add_module(cluster.tree("n2"), "nvidia_peermem")
    # Fixed, the admin names it: a pass settles the swap.
    assert sq(cluster, "requalify", "n2").returncode == 0
    assert json.load(open(os.path.join(cluster.state_dir, "nodes", "n2.json")))["swap"] is None
    assert "n2" not in drained(cluster)
