"""The repair ladder against a real Slurm (every version in the matrix):
slurmd runs our HealthCheckProgram; a reboot-class fault (Xid 79) makes the
hook ask `scontrol reboot ASAP nextstate=RESUME`; slurmd runs the cluster's
RebootProgram (tests/slurmcluster.py: the node's slurmd restarts with a new
boot in its tree); the health check slurmd runs at start re-checks the node
before it registers: all pass, Slurm gives it back; a check still failing
keeps it drained. Past the cap the same fault drains with the history in the
reason; a second reboot beyond the fleet limit is held. A GPU swap holds
its node drained and `requalify --swapped` picks it up."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from slurmqual.nodetree import add_kmsg
from slurmqual.nodetree import reboot as tree_reboot
from slurmqual.nodetree import set_gpu_serial

pytestmark = pytest.mark.slurm

XID79 = "NVRM: Xid (PCI:0000:18:00): 79, pid=0, name=python, GPU has fallen off the bus."


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("remediation", 5, reboot=True,
                      sq_extra='[checks]\nhealthcheck = ["peermem", "xid", "gpu_state"]\n\n'
                               '[remediation]\nenabled = true\nmax_auto = 1\n'
                               'reboot_guard_min = 1\nreboot_guard_fraction = 0.01\n')
    yield c
    stop_cluster(c)


def node(cluster, name) -> dict:
    return cluster.nodes().get(name, {})


def in_service(cluster, name) -> bool:
    n = node(cluster, name)
    return n.get("state") == "idle" and not n.get("state_flags")


def history(cluster, name) -> list[dict]:
    with open(os.path.join(cluster.state_dir, "nodes", f"{name}.json")) as fh:
        return json.load(fh).get("remediation", [])


def test_reboot_fault_reboots_comes_back_checked_and_past_the_cap_drains(cluster):
    add_kmsg(cluster.tree("n1"), XID79, 86000)
    cluster.wait_for(lambda: "n1" in cluster.reboots, 90, "n1 rebooted by the ladder")
    calls = [c for c in cluster.slurm_calls() if " n1 healthcheck scontrol reboot ASAP nextstate=RESUME" in c]
    assert calls and "reason=slurmqual: reboot: xid: Xid 79 on GPU 0000:18:00" in calls[0]
    # Back from the reboot: re-checked by the health check slurmd runs before it registers, then in service.
    cluster.wait_for(lambda: in_service(cluster, "n1"), 90, "n1 back in service after its checks passed")
    assert [h["action"] for h in history(cluster, "n1")] == ["reboot"]
    log = os.path.join(cluster.log, "slurmqual.log")
    assert "healthcheck n1: checks pass; node is idle+drain+reboot_issued; left alone" in open(log).read() \
        or "healthcheck n1: checks pass; node is down+drain+reboot_issued; left alone" in open(log).read()
    guard = os.path.join(cluster.state_dir, "guard", "reboots", "n1.json")
    cluster.wait_for(lambda: not os.path.exists(guard), 30, "the reboot guard's record of n1 ended")

    # The same fault again: the cap (max_auto = 1 in 7 days) is reached: drained, the history in the reason.
    add_kmsg(cluster.tree("n1"), XID79, 86100)
    cluster.wait_for(lambda: "DRAIN" in node(cluster, "n1").get("state_flags", []), 60, "n1 drained past the cap")
    reason = node(cluster, "n1")["reason"]
    assert reason.startswith("slurmqual: xid: after 1 reboot in 7d; Xid 79 on GPU 0000:18:00"), reason
    assert cluster.reboots.count("n1") == 1
    assert [h["action"] for h in history(cluster, "n1")] == ["reboot", "escalate"]
    # An escalated drain stays: a passing check no longer gives the node back (a person decides).
    tree_reboot(cluster.tree("n1"))  # the Xid is gone from the kernel log: xid passes again
    cluster.wait_for(lambda: "healthcheck n1: checks pass; drained after repeated automatic repairs" in open(log).read(),
                     30, "a passing health check keeping the escalated drain")
    assert node(cluster, "n1")["reason"] == reason


def test_second_reboot_beyond_the_fleet_limit_is_held_then_done(cluster):
    gate = threading.Event()
    cluster.on_reboot = lambda name: gate.wait(120) if name == "n2" else None
    try:
        add_kmsg(cluster.tree("n2"), XID79, 86000)
        guard = os.path.join(cluster.state_dir, "guard")
        cluster.wait_for(lambda: os.path.exists(os.path.join(guard, "reboots", "n2.json")), 60, "n2 rebooting")
        add_kmsg(cluster.tree("n3"), XID79, 86000)
        cluster.wait_for(lambda: os.path.exists(os.path.join(guard, "reboots-held", "n3.json")), 60, "n3 held")
        cluster.wait_for(lambda: node(cluster, "n3").get("reason", "").startswith("slurmqual: xid: Xid 79"), 30,
                         "n3 drained with its check's reason while held")
        assert "n3" not in cluster.reboots
    finally:
        gate.set()
    cluster.wait_for(lambda: in_service(cluster, "n2"), 90, "n2 back and resumed")
    # The guard frees: n3's next health check reboots it, and it comes back by itself too.
    cluster.wait_for(lambda: "n3" in cluster.reboots, 90, "n3 rebooted once n2 was back")
    cluster.wait_for(lambda: in_service(cluster, "n3"), 90, "n3 back and resumed")
    log = open(os.path.join(cluster.log, "slurmqual.log")).read()
    assert "healthcheck n3: reboot HELD by the fleet reboot guard: 1 nodes rebooting (limit 1 of 5 nodes)" in log


def test_fault_that_survives_the_reboot_keeps_the_node_out(cluster):
    """The fault is back in the fresh boot: the start-up health check fails
    while the node is still rebooting; the cap (1) is reached, so the hook
    drains it with the history, and it stays drained when it registers."""
    import shutil

    # The earlier tests' hook drains count in the hook drain guard's window (limit 2 of 4 nodes):
    # clear them as an admin would (`<state_dir>/guard`), so this drain is not held.
    shutil.rmtree(os.path.join(cluster.state_dir, "guard", "drains"), ignore_errors=True)
    cluster.on_reboot = lambda name: add_kmsg(cluster.tree(name), XID79, 86300) if name == "n4" else None
    try:
        add_kmsg(cluster.tree("n4"), XID79, 86000)
        cluster.wait_for(lambda: "n4" in cluster.reboots, 90, "n4 rebooted by the ladder")
        cluster.wait_for(lambda: node(cluster, "n4").get("reason", "").startswith("slurmqual: xid: after 1 reboot"),
                         60, "n4 drained with its history")
    finally:
        cluster.on_reboot = None
    import time

    time.sleep(cluster.health_interval * 2 + 2)  # registered, health checks ran: still out
    n = node(cluster, "n4")
    assert "DRAIN" in n["state_flags"] and n["reason"].startswith("slurmqual: xid: after 1 reboot in 7d;")
    assert cluster.reboots.count("n4") == 1


def test_gpu_serial_change_drains_as_swapped_and_requalify_swapped_picks_it_up(cluster):
    state = os.path.join(cluster.state_dir, "nodes", "n5.json")
    cluster.wait_for(lambda: os.path.exists(state) and "gpu:0000:4b:00.0" in json.load(open(state)).get("hardware", {}),
                     30, "n5's hardware identity recorded by its health check")
    set_gpu_serial(cluster.tree("n5"), 3, "1652399999999")   # GPU 3 replaced
    reason = "slurmqual: swap: GPU 3 serial 1652323000003 -> 1652399999999: requalify"
    cluster.wait_for(lambda: node(cluster, "n5").get("reason") == reason, 30, "n5 drained as swapped")
    assert "DRAIN" in node(cluster, "n5")["state_flags"]
    p = subprocess.run([*cluster.slurmqual_argv, "requalify", "--swapped"], env=cluster.env, capture_output=True,
                       text=True, timeout=120, cwd=cluster.base)
    # It finds n5; requalifying needs reference nodes from an earlier burn-in (none in this cluster).
    assert "swapped: n5" in p.stdout and p.returncode == 2, (p.stdout, p.stderr)
    assert "requalify needs reference nodes from an earlier burn-in" in p.stderr
    assert node(cluster, "n5").get("reason") == reason   # still held: only a passing requalify gives it back
