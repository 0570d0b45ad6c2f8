"""Per-GPU burn-in end to end on a real local Slurm: the task jobs run the
stand-in gpu_burn, dcgmproftester12 and nvbandwidth (tests/fakebin/gpu_tool,
real output formats) on every node before the pair rounds; the slow GPU is
retest on one run, the analysis job's retest round runs its tools again and
the final analysis drains its node, naming the GPU and its PCI address."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from test_slurm_burnin import drained, finish, sq

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_once]  # version-independent: conftest.once_version
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = [f"n{i}" for i in range(1, 7)]


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("burningpu", len(NODES))
    tools = os.path.join(c.base, "nccl-tests")  # beside fabric.json, which the stand-ins read
    for t in ("gpu_burn", "dcgmproftester12", "nvbandwidth"):
        shutil.copy(os.path.join(REPO, "tests", "fakebin", "gpu_tool"), os.path.join(tools, t))
    with open(c.sq_config) as fh:
        text = fh.read()
    c.set_sq_config(text.replace("[burnin]\n", '[burnin]\ngpu_tests = ["gpu_burn", "dcgmproftester", "nvbandwidth"]\n'
                                 f'gpu_tools_dir = "{tools}"\ngpu_test_s = 5\n', 1))
    yield c
    stop_cluster(c)


def test_slow_gpu_is_confirmed_by_the_retest_round_and_drains_its_node_naming_the_gpu(cluster):
    cluster.fabric({"base": 400, "noise": 0.01, "seed": 3, "gpu": {"slow": {"n3": {"2": 0.7}}}})
    p = sq(cluster, "burnin", "submit")
    assert p.returncode == 0, p.stderr
    run_dir = re.search(r"run dir (\S+)", p.stdout).group(1)
    a = finish(cluster, run_dir)
    assert a["drain"] == ["n3"], (a["problems"], a["nodes"]["n3"])
    # one run made it retest; the analysis sent its GPU tools again (twice) in retest round 1
    with open(os.path.join(run_dir, "retest-1.json")) as fh:
        assert json.load(fh)["gpu"] == {"n3": ["gpu_burn", "dcgmproftester", "nvbandwidth"]}
    assert a["retest"]["round"] == 1 and a["retest"]["final"]
    logs = sorted(f for _root, _dirs, files in os.walk(os.path.join(run_dir, "logs")) for f in files if "-n3-run" in f)
    assert logs == [f"gpu-{t}-n3-run{i}.log" for t in ("dcgmproftester", "gpu_burn", "nvbandwidth") for i in (1, 2)]
    n3 = a["nodes"]["n3"]
    assert n3["gpu"]["gpu"] == 2 and n3["gpus"]["2"]["gemm"]["verdict"] == "fail"
    assert n3["gpus"]["2"]["gemm"]["runs"] == 3 and "runs" not in a["nodes"]["n1"]["gpus"]["2"]["gemm"]
    assert n3["gpus"]["0"]["gemm"]["verdict"] == "pass"
    assert {k.split(":")[0] for k in a["median"] if ":gpu" in k} == {"burn", "gemm", "hbm", "h2d", "d2h", "nvlink"}
    assert all(a["nodes"][n]["verdict"] == "pass" for n in NODES if n != "n3")
    reason = drained(cluster)["n3"]
    assert re.fullmatch(r"slurmqual: burnin: GPU 2 \(0000:58:00\.0\) \w+ [\d.]+ \S+ < 90% of median [\d.]+", reason), reason
    cluster.run("scontrol", "update", "nodename=n3", "state=resume")


def test_missing_tool_is_untested_never_a_pass(cluster):
    tools = os.path.join(cluster.base, "nccl-tests")
    os.rename(os.path.join(tools, "nvbandwidth"), os.path.join(tools, "nvbandwidth.off"))
    try:
        cluster.fabric({"base": 400, "noise": 0.01, "seed": 4})
        p = sq(cluster, "burnin", "submit")
        assert p.returncode == 0, p.stderr
        a = finish(cluster, re.search(r"run dir (\S+)", p.stdout).group(1))
    finally:
        os.rename(os.path.join(tools, "nvbandwidth.off"), os.path.join(tools, "nvbandwidth"))
    assert not a["drain"]
    assert all(v["verdict"] == "untested" for v in a["nodes"].values())
    assert any("test error" in p and "hbm" in p for p in a["problems"])


def test_first_round_runs_every_gpu_tool_as_often_as_the_plan_says(cluster, tmp_path):
    """burnin.gpu_runs = 2: plan.json carries it, every task runs each tool
    twice on every node before the pairs (logs -run1, -run2), and each GPU's
    number is the median of its two runs (keys.KEY.first_runs); the slow GPU is
    retest after them (the first round never drains on speed) and drained
    by the retest round, whose lines say `retest`."""
    config = str(tmp_path / "sq.toml")
    with open(cluster.sq_config) as fh:
        text = fh.read()
    with open(config, "w") as fh:
        fh.write(text.replace("[burnin]\n", "[burnin]\ngpu_runs = 2\n", 1))
    cluster.fabric({"base": 400, "noise": 0.01, "seed": 5, "gpu": {"slow": {"n4": {"1": 0.7}}}})
    p = sq(cluster, "burnin", "submit", config=config)
    assert p.returncode == 0, p.stderr
    run_dir = re.search(r"run dir (\S+)", p.stdout).group(1)
    with open(os.path.join(run_dir, "plan.json")) as fh:
        assert json.load(fh)["gpu_runs"] == 2
    a = finish(cluster, run_dir, config=config)
    logs = sorted(f for _root, _dirs, files in os.walk(os.path.join(run_dir, "logs")) for f in files
                  if f.startswith("gpu-gpu_burn-n1"))
    assert logs == ["gpu-gpu_burn-n1-run1.log", "gpu-gpu_burn-n1-run2.log"]
    assert all(k["first_runs"] == 2 for name, k in a["keys"].items() if ":gpu" in name)
    assert a["nodes"]["n1"]["gpus"]["1"]["gemm"]["runs"] == 2
    assert a["drain"] == ["n4"] and a["retest"]["round"] == 1
    assert a["nodes"]["n4"]["gpus"]["1"]["gemm"]["runs"] == 4 and a["nodes"]["n4"]["gpu"]["gpu"] == 1
    cluster.run("scontrol", "update", "nodename=n4", "state=resume")
