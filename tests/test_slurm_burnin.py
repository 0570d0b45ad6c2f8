"""Burn-in end to end on a real local Slurm: submit -> task jobs -> analysis
job -> drains and baselines; then status/history on the store it filled.
Measurements come from the stand-in nccl-tests binary (tests/fakebin) parsed
by the real parser."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster

pytestmark = pytest.mark.slurm
NODES = [f"n{i}" for i in range(1, 9)]


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("burnin", 8)
    yield c
    stop_cluster(c)


def sq(cluster, *args, timeout=180, config=None):
    extra = ["--config", config] if config else []
    # Where this cluster's Slurm is (a chroot's Python for other Slurm versions),
    # so the jobs it submits name a Python that exists on the nodes.
    argv = getattr(cluster, "slurmqual_argv", [sys.executable, "-m", "slurmqual"])
    return subprocess.run([*argv, *args, *extra], env=cluster.env, capture_output=True,
                          text=True, timeout=timeout, cwd=cluster.base)


def submit(cluster, model: dict, config=None) -> str:
    cluster.fabric(dict({"base": 400, "noise": 0.01}, **model))
    p = sq(cluster, "burnin", "submit", config=config)
    assert p.returncode == 0, p.stderr
    return re.search(r"run dir (\S+)", p.stdout).group(1)


def finish(cluster, run_dir: str, config=None) -> dict:
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "240", timeout=300, config=config)
    assert w.returncode == 0, w.stdout + w.stderr + _logs(run_dir)
    final = re.findall(r"analysis (\w+)\n", w.stdout)[-1]
    assert final in ("COMPLETED", "FAILED", "DONE") and "median:" in w.stdout
    with open(f"{run_dir}/analysis.json") as fh:
        out = json.load(fh)
    # The analysis job exits non-zero exactly when the guard trips (or the fleet slowed down);
    # a run ending with nodes untested is judged (exit 0) and says so in its summary.
    assert final == ("FAILED" if out["guard_tripped"] or out["fleet_slowdown"] else "COMPLETED") or final == "DONE"
    return out


def _logs(run_dir: str) -> str:
    """The run's job logs, for a failure message."""
    out = []
    for root, _dirs, files in os.walk(os.path.join(run_dir, "logs")):
        for f in sorted(files):
            with open(os.path.join(root, f), errors="replace") as fh:
                out.append(f"--- {f}\n{fh.read()[-3000:]}")
    return "\n".join(out)


def burnin(cluster, model: dict, config=None) -> dict:
    return finish(cluster, submit(cluster, model, config), config)


def drained(cluster) -> dict[str, str]:
    return {n: v.get("reason", "") for n, v in cluster.nodes().items() if "DRAIN" in v.get("state_flags", [])}


def baselines(cluster) -> dict[tuple[str, str], tuple[float, str]]:
    """The store's baselines, read-only: none before a run has created the store (a test run alone)."""
    path = os.path.join(cluster.base, "slurmqual.db")
    if not os.path.exists(path):
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='baselines'").fetchone():
            return {}
        return {(n, k): (s, r) for n, k, s, r in db.execute("SELECT node, test, score, run_id FROM baselines")}
    finally:
        db.close()


def test_slow_node_is_drained_and_baselines_recorded(cluster):
    a = burnin(cluster, {"nodes": {"n4": 0.7}, "seed": 1})
    assert a["drain"] == ["n4"] and not a["guard_tripped"]
    assert {n for n, v in a["nodes"].items() if v["verdict"] == "pass"} == set(NODES) - {"n4"}
    assert a["nodes"]["n4"]["key"] == "all_reduce:pair" and a["noise"]["all_reduce:pair"] > 0
    reasons = drained(cluster)
    assert list(reasons) == ["n4"]
    m = re.fullmatch(r"slurmqual: burnin: busbw (\d+\.\d) GB/s < 90% of median (\d+\.\d)", reasons["n4"])
    assert m and float(m.group(2)) == round(a["median"]["all_reduce:pair"], 1)
    hist = json.loads(sq(cluster, "history", "n1", "--json").stdout)
    assert hist["baseline"] == pytest.approx(400 * 8 / (8 + 1 / 128), rel=0.05)
    assert {e["kind"] for e in hist["events"]} >= {"burnin", "baseline"}
    st = json.loads(sq(cluster, "status", "--json").stdout)
    rows = {r["node"]: r for r in st["nodes"]}
    assert rows["n4"]["qualification"] == "failed" and rows["n1"]["qualification"] == "qualified"
    assert st["summary"]["qualified"] == 7 and st["summary"]["failed"] == 1
    # status compares with the same median the analysis judged by (not the intra-node one)
    assert rows["n1"]["vs_median"] == pytest.approx(a["nodes"]["n1"]["score"] / a["median"]["all_reduce:pair"],
                                                    abs=0.01)
    cluster.run("scontrol", "update", "nodename=n4", "state=resume")


def test_slow_link_drains_nothing(cluster):
    # Round 0 of the circle method over n1..n8 pairs n2 with n7.
    a = burnin(cluster, {"links": {"n2,n7": 0.5}, "seed": 2})
    assert a["drain"] == [] and a["suspect_links"] == [["n2", "n7"]]
    assert a["nodes"]["n2"]["verdict"] == a["nodes"]["n7"]["verdict"] == "pass"
    assert drained(cluster) == {}


def test_a_third_of_the_fleet_slow_trips_the_guard_and_drains_nothing(cluster):
    before = baselines(cluster)
    a = burnin(cluster, {"nodes": {"n1": 0.6, "n2": 0.6, "n3": 0.6}, "seed": 3})
    # The fleet median is over node scores: it stays at the healthy level.
    assert a["median"]["all_reduce:pair"] == pytest.approx(400 * 8 / (8 + 1 / 128), rel=0.05)
    assert a["guard_tripped"] and a["drain"] == [] and sorted(a["would_drain"]) == ["n1", "n2", "n3"]
    assert drained(cluster) == {} and baselines(cluster) == before


def test_a_crashed_test_is_an_error_not_a_slow_node_and_never_a_pass(cluster):
    a = burnin(cluster, {"fail": ["n6"], "seed": 4})
    assert a["drain"] == [] and a["nodes"]["n6"]["verdict"] == "untested"
    assert any("test error" in p for p in a["problems"])


def test_a_task_killed_after_its_intra_tests_leaves_its_nodes_untested_and_no_baseline(cluster):
    before = baselines(cluster)
    run_dir = submit(cluster, {"hang_pairs": ["n8"], "seed": 5})
    result = os.path.join(run_dir, "results", "task-0.json")
    end = time.monotonic() + 180
    while time.monotonic() < end:  # the checkpoint after the intra-node tests
        try:
            with open(result) as fh:
                if len(json.load(fh)["measurements"]) >= 8:
                    break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    else:
        raise AssertionError("no checkpoint with the intra-node tests")
    with open(os.path.join(run_dir, "jobs.json")) as fh:
        jobs = json.load(fh)
    task_job = jobs["tasks"]["0"] if "tasks" in jobs else jobs["array"]
    # By hand while task 0 still runs: an interim look, not the run's end (it
    # said "RUN ENDED WITH 8 NODE(S) UNTESTED" and wrote final: true).
    p = sq(cluster, "burnin", "analyze", run_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("INTERIM ANALYSIS: the run is not finished (first round: task job(s) "
                               f"{task_job} still pending or running; its analysis job {jobs['analysis']} has not "
                               "judged it yet"), p.stdout
    assert "RUN ENDED WITH" not in p.stdout
    with open(os.path.join(run_dir, "analysis.json")) as fh:
        interim = json.load(fh)
    assert interim["retest"]["final"] is False and interim["retest"]["untested"] == {}
    assert interim["nodes"]["n8"]["verdict"] == "untested"
    cluster.run("scancel", task_job)  # killed mid-way: a pair test hangs on n8
    a = finish(cluster, run_dir)
    assert a["retest"]["final"] is True and "interim" not in a["retest"]
    assert a["retest"]["untested"]["n8"]  # the run's own analysis names its end
    # By hand once the run is over: the final word again, with the banner.
    p = sq(cluster, "burnin", "analyze", run_dir, "--dry-run")
    assert p.returncode == 0 and "INTERIM" not in p.stdout and "RUN ENDED WITH" in p.stdout, p.stdout + p.stderr
    assert a["incomplete_tasks"] == ["0"]
    with open(result) as fh:
        res = json.load(fh)
    assert res["complete"] is False and {len(m["nodes"]) for m in res["measurements"]} <= {1, 2}
    paired = {n for m in res["measurements"] if len(m["nodes"]) == 2 and m["ok"] for n in m["nodes"]}
    for n in set(NODES) - paired:
        assert a["nodes"][n]["verdict"] == "untested" and a["nodes"][n]["score"] is None, n
    assert a["nodes"]["n8"]["verdict"] == "untested"
    run_id = os.path.basename(run_dir)
    after = baselines(cluster)
    assert {k: v for k, v in after.items() if v[1] == run_id and k[0] not in paired} == {}
    assert {k: v for k, v in after.items() if k[0] not in paired} == {k: v for k, v in before.items()
                                                                     if k[0] not in paired}
    assert drained(cluster) == {}


def test_all_reduce_and_alltoall_keep_separate_verdicts_and_baselines(cluster):
    model = {"seed": 6, "tests": {"alltoall": {"base": 200, "nodes": {"n3": 0.5}}}}
    # The site config (what every job of the run reads) names two tests.
    with open(cluster.sq_config) as fh:
        text = fh.read()
    try:
        cluster.set_sq_config(text.replace("[burnin]\n", '[burnin]\ntests = ["all_reduce_perf", "alltoall_perf"]\n', 1))
        a = burnin(cluster, model)
    finally:
        cluster.set_sq_config(text)
    med = a["median"]
    assert "alltoall:pair" in med, (a["problems"], a["keys"])
    assert med["all_reduce:pair"] == pytest.approx(400 * 8 / (8 + 1 / 128), rel=0.05)
    assert med["alltoall:pair"] == pytest.approx(200 * 8 / (8 + 1 / 128), rel=0.05)
    assert a["drain"] == ["n3"]
    n3 = a["nodes"]["n3"]
    assert n3["key"] == "alltoall:pair" and n3["keys"]["alltoall:pair"]["verdict"] == "fail"
    assert n3["keys"]["all_reduce:pair"]["verdict"] == "pass"
    reason = drained(cluster)["n3"]
    m = re.fullmatch(r"slurmqual: burnin: alltoall pair busbw (\d+\.\d) GB/s < 90% of median (\d+\.\d)", reason)
    assert m and float(m.group(2)) == round(med["alltoall:pair"], 1)
    base = baselines(cluster)
    for n in set(NODES) - {"n3"}:
        assert base[(n, "alltoall:pair")][0] == pytest.approx(a["nodes"][n]["keys"]["alltoall:pair"]["score"])
        assert base[(n, "all_reduce:pair")][0] >= 0.9 * med["all_reduce:pair"]
    assert ("n3", "alltoall:pair") not in base
    hist = json.loads(sq(cluster, "history", "n1", "--json").stdout)
    assert any(e["kind"] == "baseline" and e["detail"].startswith("alltoall:pair ") for e in hist["events"])
    cluster.run("scontrol", "update", "nodename=n3", "state=resume")


# -- retest rounds: the run decides its ambiguous nodes itself ---------------------

# n5 is a little slow with each of its first-round partners (n4, n6, n8 in the circle
# method's rounds 0-2): below the line, inside the noise margin, so `retest`. Retest
# round 1 pairs it with two proven-good nodes it has not met, where it runs at full
# speed (the first partners' links were the trouble): with all measurements, a pass, and its
# slow links suspect: round 2 measures them again (both ends with new partners), still slow.
BORDERLINE = {"links": {"n4,n5": 0.89, "n5,n6": 0.89, "n5,n8": 0.89}, "noise": 0.0, "seed": 7}


def wait_for(pred, timeout=180, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def stage(run_dir: str, k: int) -> dict | None:
    try:
        with open(os.path.join(run_dir, f"retest-{k}.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def test_a_borderline_node_is_retested_and_decided_within_the_run(cluster):
    before = drained(cluster)
    run_dir = submit(cluster, BORDERLINE)
    first = wait_for(lambda: (s := stage(run_dir, 1)) and s["state"] == "submitted" and s, what="retest round 1")
    assert first["suspects"] == ["n5"] and first["of"] == 2
    partners = {p[1] for rnd in first["rounds"] for p in rnd}
    assert len(partners) == 2 and not partners & {"n4", "n6", "n8"}  # new partners (n8: n5's round-2 partner)
    # While round 1 runs, status says so for n5 (its last verdict: retest).
    st = json.loads(sq(cluster, "status", "n5", "--json").stdout)
    row = st["nodes"][0]
    if row["qualification"] == "pending":  # the round may already be over on a fast machine
        assert any("retest round 1 of 2 submitted" in x for x in row["failing_checks"])
    a = finish(cluster, run_dir)
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "60")
    # n5 passes with its new partners: its first partners' links are the slow ones. Each read
    # 0.89 in a fleet whose pairs agree within 1%: clear on that one measurement, so they are
    # named without measuring them again, and round 1 decides the run (no round 2).
    assert stage(run_dir, 2) is None
    assert "retest round 1 of 2" in w.stdout and "decided after 1 retest round(s) of 2" in w.stdout
    assert a["retest"]["round"] == 1 and a["retest"]["final"] is True and a["retest"]["next"] is None
    assert a["nodes"]["n5"]["verdict"] == "pass" and a["drain"] == []
    assert {v["verdict"] for v in a["nodes"].values()} == {"pass"}
    slow = {frozenset(k.split(",")) for k in BORDERLINE["links"]}
    assert {frozenset(x[:2]) for x in a["suspect_links"]} == slow
    assert {frozenset(x[:2]) for x in a["clear_links"]} == slow
    with open(os.path.join(run_dir, "results", "task-r1-0.json")) as fh:
        res = json.load(fh)
    # The round's pairs, and each of its nodes' intra-node test again (one
    # intra run never convicts: a retest repeats it).
    pairs = {tuple(sorted(p)) for rnd in first["rounds"] for p in rnd}
    assert res["complete"] and {tuple(sorted(m["nodes"])) for m in res["measurements"]} == \
        pairs | {(n,) for p in pairs for n in p}
    assert all(m["retest"] == 1 for m in res["measurements"])
    assert drained(cluster) == before
    # One run in the store: the final verdicts replaced the first analysis'.
    db = sqlite3.connect(os.path.join(cluster.base, "slurmqual.db"))
    try:
        rows = db.execute("SELECT verdict FROM verdicts WHERE run_id = ? AND node = 'n5'",
                          (os.path.basename(run_dir),)).fetchall()
    finally:
        db.close()
    assert rows == [("pass",)]


def test_no_retest_only_prints_the_plan(cluster):
    cluster.fabric(dict({"base": 400}, **BORDERLINE))
    p = sq(cluster, "burnin", "submit", "--no-retest")
    assert p.returncode == 0 and "no retest rounds" in p.stdout, p.stderr
    a = finish(cluster, re.search(r"run dir (\S+)", p.stdout).group(1))
    assert a["nodes"]["n5"]["verdict"] == "retest" and a["retest_plan"] and a["retest"]["max_rounds"] == 0
    assert a["drain"] == []


def test_cancelling_the_run_during_a_retest_round_leaves_it_consistent(cluster):
    cluster.fabric(dict({"base": 400, "hang_pairs": []}, **BORDERLINE))
    run_dir = submit(cluster, BORDERLINE)
    wait_for(lambda: (s := stage(run_dir, 1)) and s["state"] == "submitted", what="retest round 1")
    run_id = os.path.basename(run_dir)
    cluster.run("scancel", f"--name=slurmqual-burnin-{run_id}")
    cluster.run("scancel", f"--name=slurmqual-analysis-{run_id}")
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "120", timeout=180)
    assert w.returncode == 1 and "the run did not finish" in w.stdout, w.stdout + w.stderr
    with open(os.path.join(run_dir, "analysis.json")) as fh:
        a = json.load(fh)
    assert a["retest"]["round"] == 0 and a["nodes"]["n5"]["verdict"] == "retest" and a["drain"] == []
    assert drained(cluster) == {}
    # Judging by hand what was measured submits nothing and drains nothing.
    p = sq(cluster, "burnin", "analyze", run_dir, "--json")
    assert p.returncode == 0, p.stderr
    again = json.loads(p.stdout)
    assert again["nodes"]["n5"]["verdict"] == "retest" and again["retest"]["next"] is None
    assert stage(run_dir, 2) is None and drained(cluster) == {}
