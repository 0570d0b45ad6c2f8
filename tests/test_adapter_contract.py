"""The CLI and slurmrestd adapters pass the same contract against one real
Slurm 22.05 cluster; REST changes to nodes fail clearly (read-only in 22.05)."""

from __future__ import annotations

import os
import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from slurmqual.slurm import SlurmError
from slurmqual.slurm.cli import CliAdapter
from slurmqual.slurm.rest import RestAdapter

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster():
    if not os.path.exists("/usr/sbin/slurmrestd"):
        pytest.skip("slurmrestd not installed (apt-get install slurmrestd slurm-wlm-jwt-plugin)")
    c = start_cluster("rest", 3, jwt=True)
    c.rest_url = c.start_rest()
    c.rest_unix = c.start_rest(unix=True)
    yield c
    stop_cluster(c)


@pytest.fixture(params=["cli", "rest", "rest-unix"])
def adapter(request, cluster):
    if request.param == "cli":
        return CliAdapter(None, timeout=10, retries=2, slurm_conf=cluster.conf)
    url = cluster.rest_unix if request.param == "rest-unix" else cluster.rest_url
    return RestAdapter(url, "root", cluster.token(), timeout=10, retries=2)


def test_node_info_hostlist_and_drain_flags(cluster, adapter):
    cluster.run("scontrol", "update", "nodename=n2", "state=drain", "reason=admin: RMA ticket 42")
    try:
        nodes = {n.name: n for n in adapter.node_info()}
        assert sorted(nodes) == ["n1", "n2", "n3"]
        assert nodes["n2"].drained and nodes["n2"].reason == "admin: RMA ticket 42"
        assert not nodes["n1"].drained and nodes["n1"].state == "idle"
        assert [n.name for n in adapter.node_info("n[2-3]")] == ["n2", "n3"]
    finally:
        cluster.run("scontrol", "update", "nodename=n2", "state=resume")


def test_submit_states_and_cancel(cluster, adapter):
    job = adapter.submit(["--job-name=contract", "--nodes=1", "--time=00:05:00", f"--output={cluster.base}/contract-%j.out",
                          "--exclusive"], script="sleep 30")
    assert job.isdigit()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and adapter.job_states([job]).get(job) != "RUNNING":
        time.sleep(0.3)
    assert adapter.job_states([job]) == {job: "RUNNING"}
    adapter.cancel([job])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and adapter.job_states([job]).get(job) not in ("CANCELLED",):
        time.sleep(0.3)
    assert adapter.job_states([job])[job] == "CANCELLED"


def test_rest_cannot_change_nodes_and_says_so(cluster):
    rest = RestAdapter(cluster.rest_url, "root", cluster.token())
    assert rest.version == "v0.0.38"
    for call in (lambda: rest.drain(["n1"], "slurmqual: x: y"), lambda: rest.resume(["n1"]),
                 lambda: rest.create_reservation("r", ["n1"], 5)):
        with pytest.raises(SlurmError, match="needs scontrol on this host"):
            call()
    assert not any(n.drained for n in rest.node_info())
    with pytest.raises(SlurmError, match="--nodelist is not supported by slurmrestd v0.0.38: needs sbatch"):
        rest.submit(["--nodelist=n1"], script="true")


def test_rest_bad_token_and_unreachable_are_clear(cluster):
    bad = RestAdapter(cluster.rest_url, "root", "not-a-token", timeout=5, retries=1)
    with pytest.raises(SlurmError) as err:
        bad.node_info()
    assert "check slurm.rest.user and the JWT" in str(err.value)  # 22.05 answers a bad token with HTTP 500
    assert "not-a-token" not in str(err.value) and "not-a-token" not in repr(bad)
    gone = RestAdapter("http://127.0.0.1:9", "root", "t", timeout=2, retries=2)
    start = time.monotonic()
    with pytest.raises(SlurmError, match="unreachable"):
        gone.node_info()
    assert time.monotonic() - start < 10


def test_status_over_rest_from_config(cluster, tmp_path):
    import json
    import subprocess
    import sys

    tok = tmp_path / "jwt"
    tok.write_text("SLURM_JWT=" + cluster.token() + "\n")
    cfg = tmp_path / "rest.toml"
    cfg.write_text(f'[slurm]\nadapter = "rest"\n[slurm.rest]\nurl = "{cluster.rest_url}"\nuser = "root"\n'
                   f'token_file = "{tok}"\n[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/s.db"\n')
    env = {k: v for k, v in cluster.env.items() if k not in ("SLURM_CONF", "SLURMQUAL_CONFIG")}
    p = subprocess.run([sys.executable, "-m", "slurmqual", "status", "--json", "--config", str(cfg)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [r["node"] for r in out["nodes"]] == ["n1", "n2", "n3"] and out["summary"]["unknown"] == 3
    assert "SLURM_JWT" not in env
