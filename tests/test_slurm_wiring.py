"""slurm.conf wired exactly as config/slurm.conf.snippet says, on a real Slurm:
a multi-node job never starts its batch script on a broken node; a failed
prolog requeues the job without holding it; a bad pin pushed to every node
drains at most the hook-drain guard's limit."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster

pytestmark = pytest.mark.slurm

REPO = pathlib.Path(__file__).resolve().parent.parent
NODES = 6


def snippet_settings() -> dict[str, str]:
    """The snippet's PrologFlags and SchedulerParameters, as an admin would paste them."""
    out = {}
    for line in (REPO / "config" / "slurm.conf.snippet").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("PrologFlags", "SchedulerParameters"):
            out[key] = value
    return out


@pytest.fixture(scope="module")
def cluster():
    s = snippet_settings()
    assert s["PrologFlags"] == "Alloc,DeferBatch" and "nohold_on_prolog_fail" in s["SchedulerParameters"]
    # The harness already sets SchedulerParameters=sched_interval=1; a later line replaces it, so merge.
    extra = f"PrologFlags={s['PrologFlags']}\nSchedulerParameters=sched_interval=1,{s['SchedulerParameters']}\n"
    # gpu_count only in the prolog, so the prolog (not the periodic healthcheck) meets the broken node.
    c = start_cluster("wiring", NODES, extra_conf=extra,
                      sq_extra='[checks]\nhealthcheck = ["peermem", "nic_link", "dcqcn", "gpu_nic_affinity", '
                               '"pcie_link", "ib_counters", "versions"]\n')
    yield c
    stop_cluster(c)


def reasons(cluster) -> dict[str, str]:
    return {n["name"]: n.get("reason", "") for n in cluster.nodes().values() if "DRAIN" in n.get("state_flags", [])}


def sq(cluster, *args):
    return subprocess.run([sys.executable, "-m", "slurmqual", *args], env=cluster.env, capture_output=True,
                          text=True, timeout=120)


def test_snippet_flags_are_live_in_slurmctld(cluster):
    conf = cluster.run("scontrol", "show", "config").stdout
    flags = [ln for ln in conf.splitlines() if ln.startswith("PrologFlags")][0]
    sched = [ln for ln in conf.splitlines() if ln.startswith("SchedulerParameters")][0]
    assert "Alloc" in flags and "DeferBatch" in flags, flags
    assert "nohold_on_prolog_fail" in sched, sched


def test_multi_node_batch_script_never_starts_on_a_broken_node(cluster, tmp_path):
    marker = tmp_path / "started"
    os.chmod(tmp_path, 0o777)
    gpu = os.path.join(cluster.tree("n2"), "sys/bus/pci/devices/0000:18:00.0")
    target = os.readlink(gpu)
    os.unlink(gpu)  # GPU 0 of n2 fell off the bus: only the prolog's gpu_count sees it
    # n2's prolog takes 8 s (a slow node, a slow check): without DeferBatch the
    # batch script would run on n1 meanwhile and write "ran" after 12 s (12, not
    # less: slurmctld's late kill below must be later than that to pass a
    # script that ran, and CI runs several clusters side by side on 2 cores;
    # at 5 s both attempts failed once at load 35, newest).
    prolog = os.path.join(cluster.bin, "prolog.sh")
    original = open(prolog).read()
    with open(prolog, "w") as fh:
        fh.write(original.replace("#!/bin/sh\n", '#!/bin/sh\n[ "$SLURMD_NODENAME" = n2 ] && sleep 8\n', 1))
    job = None
    try:
        for attempt in (1, 2):
            if marker.exists():
                marker.unlink()
            job = cluster.run("sbatch", "--parsable", "-N2", "-w", "n1,n2", "-o", "/dev/null",
                              "--wrap", f"echo started-on-$(hostname) >> {marker}; sleep 12; echo ran >> {marker}"
                              ).stdout.strip()
            cluster.wait_for(lambda: "n2" in reasons(cluster), 60, "n2 drained by its prolog")
            assert reasons(cluster)["n2"] == "slurmqual: gpu_count: 7 GPUs on PCI, expected 8"
            time.sleep(14)  # give a batch script (12 s) every chance to have run on n1
            # Seen on 22.05, 24.11 and 26.05: once n2's prolog has *failed*, slurmctld may
            # still launch the batch script on n1 and kill it within milliseconds as the
            # job is requeued ("Launching batch job" 2 ms after "Prolog launch failure").
            # What DeferBatch guarantees, and this checks: the script never runs on.
            # Once in some forty runs (22.05, a full CI run) the kill came late and the
            # script finished: slurmctld's requeue race, not a hook's; a second
            # attempt must then hold (a real regression fails both).
            ran = "ran" in (marker.read_text() if marker.exists() else "")
            if not ran or attempt == 2:
                break
            cluster.run("scancel", job, check=False)
            cluster.wait_for(lambda: not cluster.run("squeue", "-h", "-j", job, check=False).stdout.strip(), 60,
                             "the first attempt's job gone")
            cluster.run("scontrol", "update", "nodename=n2", "state=resume", check=False)
            cluster.wait_for(lambda: "n2" not in reasons(cluster), 60, "n2 resumed for the second attempt")
        assert not ran, marker.read_text()
        state = cluster.run("squeue", "-h", "-j", job, "-o", "%T|%r", check=False).stdout.strip()
        # Requeued and pending (it asked for n2 by name), never held: nohold_on_prolog_fail.
        assert state.startswith("PENDING") and "held" not in state.lower(), state
    finally:
        with open(prolog, "w") as fh:
            fh.write(original)
        if job:
            cluster.run("scancel", job, check=False)
        os.symlink(target, gpu)
        cluster.run("scontrol", "update", "nodename=n2", "state=resume", check=False)


def _pin(cluster, driver: str | None) -> None:
    text = open(cluster.sq_config).read().split("\n# test pin\n")[0]
    if driver:
        text += f'\n# test pin\n[checks.versions]\ndriver = "{driver}"\n'
    cluster.set_sq_config(text)


def test_bad_pin_on_every_node_drains_at_most_the_guard_limit(cluster):
    state_nodes = os.path.join(cluster.state_dir, "nodes")
    cluster.wait_for(lambda: len([e for e in os.listdir(state_nodes) if e.endswith(".json")]) == NODES, 60,
                     "every node recorded its state")
    cluster.wait_for(lambda: not reasons(cluster), 60, "no drained node")
    shutil.rmtree(os.path.join(cluster.state_dir, "guard"), ignore_errors=True)  # earlier tests' drains
    limit = max(2, NODES // 10)
    _pin(cluster, "999.99.99")  # a wrong driver pin pushed to the whole fleet
    try:
        def all_held() -> bool:
            st = json.loads(sq(cluster, "status", "--json", "--summary").stdout)
            return st["guard"]["tripped"] and len(st["guard"]["held"]) == NODES - limit
        cluster.wait_for(all_held, 300, "every other node's drain held by the guard")
        time.sleep(cluster.health_interval * 2 + 2)  # more healthcheck rounds drain nothing more
        drained = reasons(cluster)
        assert len(drained) == limit, drained
        assert all(r.startswith("slurmqual: versions: driver") for r in drained.values()), drained
        out = sq(cluster, "status").stdout
        assert "CRITICAL: hook-drain guard tripped" in out and f"limit {limit} of {NODES} nodes" in out, out
        log = open(os.path.join(cluster.log, "slurmqual.log")).read()
        assert "CRITICAL" in log and "drain HELD by the fleet guard" in log
        held_node = json.loads(sq(cluster, "status", "--json", "--summary").stdout)["guard"]["held"][0]
        hist = json.loads(sq(cluster, "history", held_node, "--json").stdout)
        assert any(e["kind"] == "guard_hold" for e in hist["events"]), hist
    finally:
        _pin(cluster, None)
    # The pin fixed: the drained nodes come back by themselves.
    cluster.wait_for(lambda: not reasons(cluster), 180, "drained nodes resumed after the pin was fixed")
