"""Burn-in end to end on a real local Slurm: submit -> job array -> analysis job
-> drains and baselines; then status/history on the store it filled."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from slurm_fixtures import start_cluster, stop_cluster

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("burnin", 6)
    yield c
    stop_cluster(c)


def sq(cluster, *args, timeout=180):
    return subprocess.run([sys.executable, "-m", "slurmqual", *args], env=cluster.env, capture_output=True,
                          text=True, timeout=timeout, cwd=cluster.base)


def burnin(cluster, model: dict) -> dict:
    cluster.fabric(dict({"base": 400, "noise": 0.01}, **model))
    p = sq(cluster, "burnin", "submit")
    assert p.returncode == 0, p.stderr
    run_dir = re.search(r"run dir (\S+)", p.stdout).group(1)
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "150")
    assert w.returncode == 0, w.stdout + w.stderr
    final = re.findall(r"analysis (\w+)\n", w.stdout)[-1]
    assert final in ("COMPLETED", "FAILED", "DONE") and "median:" in w.stdout
    with open(f"{run_dir}/analysis.json") as fh:
        out = json.load(fh)
    # The analysis job exits non-zero exactly when the guard trips.
    assert final == ("FAILED" if out["guard_tripped"] else "COMPLETED") or final == "DONE"
    return out


def drained(cluster) -> dict[str, str]:
    return {n: v.get("reason", "") for n, v in cluster.nodes().items() if "DRAIN" in v.get("state_flags", [])}


def test_slow_node_is_drained_and_baselines_recorded(cluster):
    a = burnin(cluster, {"nodes": {"n4": 0.7}, "seed": 1})
    assert a["drain"] == ["n4"] and not a["guard_tripped"]
    assert {n for n, v in a["nodes"].items() if v["verdict"] == "pass"} == {"n1", "n2", "n3", "n5", "n6"}
    reasons = drained(cluster)
    assert list(reasons) == ["n4"]
    assert re.fullmatch(r"slurmqual: burnin: busbw \d+\.\d GB/s < 90% of median \d+\.\d", reasons["n4"])
    hist = json.loads(sq(cluster, "history", "n1", "--json").stdout)
    assert hist["baseline"] == pytest.approx(400 * 8 / (8 + 1 / 128), rel=0.05)
    assert {e["kind"] for e in hist["events"]} >= {"burnin", "baseline"}
    st = json.loads(sq(cluster, "status", "--json").stdout)
    rows = {r["node"]: r for r in st["nodes"]}
    assert rows["n4"]["qualification"] == "failed" and rows["n1"]["qualification"] == "qualified"
    assert st["summary"]["qualified"] == 5 and st["summary"]["failed"] == 1
    assert set(rows["n1"]) == {"node", "slurm_state", "reason", "qualification", "last_burnin", "score",
                               "vs_median", "vs_baseline", "failing_checks"}
    cluster.run("scontrol", "update", "nodename=n4", "state=resume")


def test_slow_link_drains_nothing(cluster):
    # Round 0 of the circle method over n1..n6 pairs n2 with n5.
    a = burnin(cluster, {"links": {"n2,n5": 0.5}, "seed": 2})
    assert a["drain"] == [] and a["suspect_links"] == [["n2", "n5"]]
    assert drained(cluster) == {}


def test_fleet_wide_slowdown_trips_the_guard(cluster):
    a = burnin(cluster, {"nodes": {"n1": 0.6, "n2": 0.6, "n3": 0.6}, "seed": 3})
    assert a["guard_tripped"] and a["drain"] == [] and sorted(a["would_drain"]) == ["n1", "n2", "n3"]
    assert drained(cluster) == {}


def test_a_crashed_test_is_an_error_not_a_slow_node(cluster):
    a = burnin(cluster, {"fail": ["n6"], "seed": 4})
    assert a["drain"] == [] and a["nodes"]["n6"]["verdict"] in ("untested", "pass")
    assert any("test error" in p for p in a["problems"])
