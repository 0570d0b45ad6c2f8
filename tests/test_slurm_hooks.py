"""Hooks against a real Slurm 22.05: slurmd runs our HealthCheckProgram and
Prolog; we watch what sinfo shows. Needs root and Debian's slurm packages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from slurmcluster import WAIT_SCALE
from slurmqual.nodetree import add_module, record_mlxconfig, remove_module
from slurmqual.policy import HookGuard

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster():
    # The healthcheck skips gpu_count here, so the prolog test can break a node
    # that only the prolog notices (no race with the periodic healthcheck).
    c = start_cluster("hooks", 4, sq_extra='[checks]\nhealthcheck = ["peermem", "nic_link", "dcqcn", '
                      '"gpu_nic_affinity", "pcie_link", "ib_counters", "versions"]\n')
    yield c
    stop_cluster(c)


def reasons(cluster) -> dict[str, str]:
    return {n["name"]: n.get("reason", "") for n in cluster.nodes().values()
            if "DRAIN" in n.get("state_flags", [])}


def _jobs(cluster) -> list[str]:
    return cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split()


@pytest.fixture(autouse=True)
def _idle_cluster(cluster):
    """Each test starts on an idle cluster, whatever the one before left (a
    failure must not cascade: a node it left drained, its hook drains still
    counted by the fleet guard, which then holds the next test's drain): no
    job, no drained node, no guard record. The tests repair their trees."""
    left = {"jobs": _jobs(cluster), "drained": reasons(cluster)}
    if left["jobs"]:
        cluster.run("scancel", *left["jobs"], check=False)
    if left["drained"]:
        cluster.run("scontrol", "update", f"nodename={','.join(left['drained'])}", "state=resume", check=False)
    shutil.rmtree(os.path.join(cluster.state_dir, "guard"), ignore_errors=True)
    if left["jobs"] or left["drained"]:
        print(f"restored before this test: {left}")
        cluster.wait_for(lambda: not _jobs(cluster) and not reasons(cluster) and all(
            n["state"] == "idle" for n in cluster.nodes().values()), 60, "an idle cluster")
    yield


def _checked_since(cluster, node: str, check: str, since: float) -> bool:
    """A hook run that started after `since` passed `check` on `node` (slurmd
    runs a node's hooks one at a time, so none that read the tree before is
    still running)."""
    try:
        state = json.load(open(os.path.join(cluster.state_dir, "nodes", f"{node}.json")))
    except (OSError, ValueError):
        return False
    return any(c["name"] == check and c["status"] == "pass" and c["time"] > since for c in state["checks"])


def test_healthcheck_drains_only_the_broken_node_and_resumes_after_repair(cluster):
    remove_module(cluster.tree("n2"), "nvidia_peermem")
    try:
        cluster.wait_for(lambda: "n2" in reasons(cluster), 30, "n2 drained by healthcheck")
        drained = reasons(cluster)
        assert list(drained) == ["n2"]
        assert drained["n2"].startswith("slurmqual: peermem: nvidia_peermem not loaded")
        sinfo_r = cluster.run("sinfo", "-R", "-h", "-o", "%n|%E").stdout
        assert sinfo_r.strip().startswith("n2|slurmqual: peermem:")
    finally:
        add_module(cluster.tree("n2"), "nvidia_peermem")
    cluster.wait_for(lambda: "n2" not in reasons(cluster), 30, "n2 resumed after repair")
    state = json.load(open(os.path.join(cluster.state_dir, "nodes", "n2.json")))
    assert state["node"] == "n2" and state["status"] == "pass" and state["hook"] == "healthcheck"
    assert state["versions"]["driver"] == "550.54.15"


def test_admin_drain_is_never_resumed_or_rereasoned(cluster):
    cluster.run("scontrol", "update", "nodename=n3", "state=drain", "reason=admin: RMA")
    try:
        time.sleep(cluster.health_interval * 2 + 2)  # at least two healthcheck runs with passing checks
        assert reasons(cluster).get("n3") == "admin: RMA"
        # Even a failing check must not replace the admin's reason.
        remove_module(cluster.tree("n3"), "nvidia_peermem")
        time.sleep(cluster.health_interval + 2)
        assert reasons(cluster).get("n3") == "admin: RMA"
    finally:
        repaired = time.time()
        add_module(cluster.tree("n3"), "nvidia_peermem")
        # As an admin would: resume once a check saw the repair. A health check
        # that read the tree before the repair and asks Slurm after the resume
        # drains n3 (rightly, for what it saw): with load, 2 runs in 10 here.
        cluster.wait_for(lambda: _checked_since(cluster, "n3", "peermem", repaired), 60, "peermem passing on n3")
        cluster.run("scontrol", "update", "nodename=n3", "state=resume")


def _job_state(cluster, job: str) -> str:
    out = cluster.run("squeue", "-h", "-j", job, "-o", "%T|%r", check=False).stdout.strip()
    if out:
        return out
    return cluster.run("sacct", "-c", "-n", "-j", job, "-o", "state", check=False).stdout.strip() or "GONE"


def test_prolog_requeues_job_on_broken_node_and_is_silent_on_healthy(cluster, tmp_path):
    calls_before = len(cluster.slurm_calls())
    out = tmp_path / "ok.out"
    job = cluster.run("sbatch", "--parsable", "-w", "n1", "-o", str(out), "--wrap", "echo ran-on-$(hostname)").stdout.strip()
    cluster.wait_for(lambda: out.exists() and "ran-on-" in out.read_text(), 30, "healthy job output")
    prolog_calls = [c for c in cluster.slurm_calls()[calls_before:] if " prolog " in c]
    assert prolog_calls == []  # a passing prolog never talks to slurmctld

    gpu = os.path.join(cluster.tree("n4"), "sys/bus/pci/devices/0000:18:00.0")
    target = os.readlink(gpu)
    os.unlink(gpu)  # GPU 0 fell off the bus
    job = None
    try:
        job = cluster.run("sbatch", "--parsable", "-w", "n4", "-o", "/dev/null", "--wrap", "true").stdout.strip()
        cluster.wait_for(lambda: "n4" in reasons(cluster), 60, "n4 drained")
        assert reasons(cluster)["n4"] == "slurmqual: gpu_count: 7 GPUs on PCI, expected 8"
        cluster.wait_for(lambda: "requeued held" in _job_state(cluster, job).lower(), 60, "job requeued held")
        assert [c for c in cluster.slurm_calls() if " n4 prolog scontrol update" in c]
        # slurmd runs the epilog of the failed launch too: let it see the broken GPU
        # before the repair below (else it rightly resumes the repaired node itself).
        end = time.monotonic() + 20
        while time.monotonic() < end and not [c for c in cluster.slurm_calls() if " n4 epilog " in c]:
            time.sleep(0.2)
        time.sleep(1)
        assert "n4" in reasons(cluster)  # the epilog, failing too, kept our drain
    finally:
        if job:
            cluster.run("scancel", job, check=False)
        os.symlink(target, gpu)
    # The periodic healthcheck here does not run gpu_count: its pass says nothing
    # about the check that drained n4, so it keeps the drain ...
    log = os.path.join(cluster.log, "slurmqual.log")
    cluster.wait_for(lambda: "gpu_count (which drained the node) is not run by this hook; kept drained"
                     in open(log).read(), 30, "healthcheck keeping n4 drained")
    assert "n4" in reasons(cluster)
    # ... and the epilog, which does run it, gives the node back.
    p, _ = _hook(cluster, "epilog", "n4")
    assert p.returncode == 0
    cluster.wait_for(lambda: "n4" not in reasons(cluster), 30, "n4 resumed by the epilog")


def test_prolog_held_by_the_fleet_guard_lets_the_job_run_and_slurm_never_drains(cluster, tmp_path):
    # Two other nodes drained by hooks within the window: the guard's limit on
    # 4 nodes (max(2, 10%)). A failing prolog that exited 1 here made slurmd
    # drain n4 "Prolog error" all the same (the flake on 25.11 under load: a
    # stale health check drain had filled the guard).
    guard = HookGuard(cluster.state_dir, 3600.0, 0.1, 2)
    for node in ("n1", "n2"):
        assert guard.request_drain(node, "slurmqual: peermem: nvidia_peermem not loaded").allowed
    gpu = os.path.join(cluster.tree("n4"), "sys/bus/pci/devices/0000:18:00.0")
    target = os.readlink(gpu)
    os.unlink(gpu)
    out = tmp_path / "held.out"
    slurmd_log = os.path.join(cluster.log, "slurmd-n4.log")
    before = os.path.getsize(slurmd_log)
    try:
        cluster.run("sbatch", "--parsable", "-w", "n4", "-o", str(out), "--wrap", "echo ran-on-$(hostname)")
        cluster.wait_for(lambda: out.exists() and "ran-on-" in out.read_text(), 60, "the job ran on n4")
        log = os.path.join(cluster.log, "slurmqual.log")
        assert "prolog n4: drain HELD by the fleet guard" in open(log).read()
        # The job's epilog fails gpu_count too, and is held the same way.
        cluster.wait_for(lambda: "epilog n4: drain HELD by the fleet guard" in open(log).read(), 30, "epilog held")
        assert os.path.exists(os.path.join(cluster.state_dir, "guard", "held", "n4.json"))
        assert "n4" not in reasons(cluster)
        with open(slurmd_log) as fh:
            fh.seek(before)
            assert "prolog failed" not in fh.read()
    finally:
        os.symlink(target, gpu)
        shutil.rmtree(os.path.join(cluster.state_dir, "guard"), ignore_errors=True)


def _hook(cluster, hook, node, extra_env=None, config=None, timeout=60):
    env = dict(cluster.env, SLURMD_NODENAME=node, **(extra_env or {}))
    if config:
        env["SLURMQUAL_CONFIG"] = config
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "slurmqual", "hook", hook], env=env, capture_output=True,
                       text=True, timeout=timeout)
    return p, time.monotonic() - start


def test_hanging_command_errors_within_deadline_and_does_not_drain(cluster, tmp_path):
    # n1's mlxconfig hangs (recorded in its tree: a tree never runs the host's
    # own tools; the kill of a real hung process is command.py's test).
    record_mlxconfig(cluster.tree("n1"), "", hang=True)
    try:
        cfg = tmp_path / "sq.toml"
        cfg.write_text(open(cluster.sq_config).read().replace("deadline_s = 20", "deadline_s = 4")
                       .replace("command_timeout_s = 5", "command_timeout_s = 1"))
        p, took = _hook(cluster, "healthcheck", "n1", {}, str(cfg))
        # The hook's own bound (deadline 4 s + one command's 1 s) plus the interpreter's
        # start, which the CPUs' load stretches: the harness's load factor, as for its waits
        # (at load 30 on 2 cores, without it: 16-17 s).
        assert p.returncode == 0 and took < (4 + 5) * WAIT_SCALE
        state = json.load(open(os.path.join(cluster.state_dir, "nodes", "n1.json")))
        dcqcn = [c for c in state["checks"] if c["name"] == "dcqcn"][0]
        assert dcqcn["status"] == "error" and "timed out" in dcqcn["message"]
        assert "n1" not in reasons(cluster)
    finally:  # the tree records no mlxconfig again (a tree without it: dcqcn skips the firmware query)
        for f in os.listdir(os.path.join(cluster.tree("n1"), "var/lib/slurmqual-recorded")):
            if f.startswith("mlxconfig_"):
                os.unlink(os.path.join(cluster.tree("n1"), "var/lib/slurmqual-recorded", f))


def test_internal_exception_logs_traceback_and_never_drains(cluster):
    p, _ = _hook(cluster, "healthcheck", "../n1")  # an unusable node name makes the hook itself raise
    assert p.returncode == 0
    log = open(os.path.join(cluster.log, "slurmqual.log")).read()
    assert "internal error in hook healthcheck" in log and "Traceback (most recent call last)" in log
    assert "ValueError: unusable node name" in log
    p, _ = _hook(cluster, "prolog", "../n1")
    assert p.returncode == 0
    assert reasons(cluster) == {}


def test_admin_drain_and_resume_commands_respect_ownership(cluster):
    run = lambda *a: subprocess.run([sys.executable, "-m", "slurmqual", *a], env=cluster.env,  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    cluster.run("scontrol", "update", "nodename=n3", "state=drain", "reason=admin: RMA")
    try:
        p = run("resume", "n3")
        assert p.returncode == 1 and "drained by someone else" in p.stdout
        assert reasons(cluster)["n3"] == "admin: RMA"
        p = run("drain", "n[1-2]", "--reason", 'bad "cable"\nswap')
        assert p.returncode == 0
        assert reasons(cluster)["n1"] == "slurmqual: admin: bad cable swap"
        p = run("resume", "n[1-2]")
        assert p.returncode == 0 and "n1" not in reasons(cluster) and "n2" not in reasons(cluster)
        p = run("resume", "n3", "--force")
        assert p.returncode == 0 and "n3" not in reasons(cluster)
    finally:
        cluster.run("scontrol", "update", "nodename=n[1-3]", "state=resume", check=False)
