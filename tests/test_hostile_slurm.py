"""Hostile cases on a real local Slurm (slurmctld + slurmd + munge started by
tests/slurmcluster.py): a refused config writes and drains nothing while
slurmd keeps running our healthcheck; burn-in jobs never carry the slurmrestd
token and are not hijacked by modules in the submit directory; a measurement
whose node name is many nodes drains nothing."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from slurmqual.nodetree import add_module, remove_module

pytestmark = pytest.mark.slurm
SECRET = "sq-hostile-jwt-0123456789abcdef"


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("hostile", 4)
    yield c
    stop_cluster(c)


def drained(cluster) -> dict[str, str]:
    return {n["name"]: n.get("reason", "") for n in cluster.nodes().values() if "DRAIN" in n.get("state_flags", [])}


def snapshot(*dirs) -> dict[str, tuple[int, int]]:
    """Every file under dirs with its size and mtime: what "wrote nothing" compares."""
    out = {}
    for d in dirs:
        for base, _subdirs, files in os.walk(d):
            for f in files:
                st = os.stat(os.path.join(base, f))
                out[os.path.join(base, f)] = (st.st_size, st.st_mtime_ns)
    return out


def snapshot_file(path) -> dict[str, tuple[int, int]]:
    st = os.stat(path)
    return {path: (st.st_size, st.st_mtime_ns)}


def test_refused_config_writes_nothing_and_drains_nothing(cluster):
    cluster.wait_for(lambda: os.path.exists(os.path.join(cluster.state_dir, "nodes", "n2.json")), 60,
                     "first healthcheck state")
    log_file = os.path.join(cluster.log, "slurmqual.log")
    os.chmod(cluster.sq_config, 0o666)
    try:
        time.sleep(cluster.health_interval + 2)  # a healthcheck that may have started before the chmod ends
        before = snapshot(cluster.state_dir) | snapshot_file(log_file)
        remove_module(cluster.tree("n2"), "nvidia_peermem")  # would drain n2 if the config were used
        time.sleep(cluster.health_interval * 3 + 3)          # three healthcheck rounds on every node
        assert drained(cluster) == {}
        after = snapshot(cluster.state_dir) | snapshot_file(log_file)
        assert after == before  # no state, no spool, no line in the refused config's log_file
        # ...but the refusal is recorded for `status`, in this cluster's own
        # problem dir: never the machine's or a cached chroot's /var.
        records = glob.glob(os.path.join(cluster.problem_state_dir, "config-problems", "*.json"))
        assert records, "a refused config leaves a record where the hooks were pointed"
        for path in records:
            with open(path) as fh:
                assert "writable by group/others" in json.load(fh)["problem"], path
    finally:
        os.chmod(cluster.sq_config, 0o644)
    try:  # the control: with the config accepted again, the same break drains n2
        cluster.wait_for(lambda: "n2" in drained(cluster), 60, "n2 drained once the config is accepted")
        assert drained(cluster)["n2"].startswith("slurmqual: peermem:")
    finally:
        add_module(cluster.tree("n2"), "nvidia_peermem")
    cluster.wait_for(lambda: "n2" not in drained(cluster), 60, "n2 resumed after repair")


def _sq(cluster, *args, cwd, env_extra=None, timeout=180):
    env = dict(cluster.env, **(env_extra or {}))
    return subprocess.run([sys.executable, "-I", "-m", "slurmqual", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def test_burnin_jobs_get_no_token_and_ignore_modules_in_the_submit_dir(cluster, tmp_path):
    """SLURMRESTD_TOKEN in the submitter's environment never reaches a job
    (slurmctld keeps each batch job's environment in StateSaveLocation), and a
    `json.py` in the submit directory does not break the jobs."""
    submit_dir = os.path.join(cluster.base, "submit")  # the cluster's own (versions run side by side)
    os.makedirs(submit_dir, exist_ok=True)
    os.chmod(submit_dir, 0o755)
    with open(os.path.join(submit_dir, "json.py"), "w") as fh:
        fh.write("raise SystemExit('hijacked: json.py from the submit directory was imported')\n")
    cluster.fabric({"base": 400, "noise": 0.01})
    p = _sq(cluster, "burnin", "submit", cwd=submit_dir, env_extra={"SLURMRESTD_TOKEN": SECRET,
                                                                     "MY_API_SECRET": SECRET})
    assert p.returncode == 0, p.stderr
    run_dir = re.search(r"run dir (\S+)", p.stdout).group(1)
    envs = glob.glob(os.path.join(cluster.base, "ctld", "hash.*", "job.*", "environment"))
    assert envs, "slurmctld keeps pending jobs' environments here"
    seen_config = False
    for path in envs:
        data = open(path, "rb").read()
        assert SECRET.encode() not in data, path
        seen_config |= f"SLURMQUAL_CONFIG={cluster.sq_config}".encode() in data
    assert seen_config
    scripts = glob.glob(os.path.join(cluster.base, "ctld", "hash.*", "job.*", "script"))
    assert scripts and all(b" -P -m slurmqual" in open(s, "rb").read() for s in scripts)
    if cluster.in_chroot:
        pytest.skip("jobs of a chroot cluster need the chroot's interpreter (sys.executable is the host's); "
                    "environment and script checked above")
    w = _sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "240", cwd=submit_dir, timeout=300)
    logs = "".join(open(f, errors="replace").read() for f in glob.glob(os.path.join(run_dir, "logs", "*.out")))
    assert w.returncode == 0, w.stdout + w.stderr + logs
    with open(os.path.join(run_dir, "analysis.json")) as fh:
        analysis = json.load(fh)
    assert {v["verdict"] for v in analysis["nodes"].values()} == {"pass"}
    assert "hijacked" not in logs and SECRET not in logs


def test_measurement_naming_many_nodes_drains_nothing_on_real_slurm(cluster, tmp_path):
    m = tmp_path / "m.jsonl"
    lines = [{"nodes": [a, b], "busbw": 380.0 if "n1" not in (a, b) else 100.0, "size": 8589934592,
              "test": "all_reduce", "ok": True}
             for a, b in (("n1", "n2"), ("n1", "n3"), ("n1", "n4"), ("n2", "n3"), ("n2", "n4"), ("n3", "n4"))]
    for d in lines:
        d["nodes"] = ["n1 n2 n3" if n == "n1" else n for n in d["nodes"]]
    m.write_text("".join(json.dumps(d) + "\n" for d in lines))
    p = _sq(cluster, "burnin", "analyze", "--measurements", str(m), cwd=str(tmp_path))
    assert p.returncode == 2 and "unusable node name 'n1 n2 n3'" in p.stderr, p.stderr
    assert drained(cluster) == {}
