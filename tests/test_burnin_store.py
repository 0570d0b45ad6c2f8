"""The store: migrations, idempotent re-analysis, atomicity, bulk reads, JSONL
input, baselines per key that only move up or sideways, accept-baseline.
Every analysis here is analyze()'s own output on the fabric model (tests/fleet.py)."""

import json
import sqlite3
import subprocess
import sys

import pytest

from fleet import Fabric, run, run_pairs
from slurmqual.burnin.judge.analyze import analyze
from slurmqual.burnin.results.store import MIGRATIONS, RunRecord, SqliteStore, StoreError, open_store

NODES = ["n1", "n2", "n3", "n4", "n5", "n6"]


def judged(fabric=None, nodes=NODES, baselines=None, tests=("all_reduce",), seed=1, scope=None):
    """(raw measurement dicts, analysis dict) for a run over the fabric model."""
    ms = run(nodes, fabric or Fabric(noise=0.01), seed=seed, tests=tests)
    return [m.to_dict() for m in ms], analyze(ms, scope, baselines=baselines).to_dict()


MEAS, ANALYSIS = judged(Fabric(node={"n2": 0.6}, noise=0.01))


def counts(path):
    db = sqlite3.connect(path)
    return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("runs", "measurements", "verdicts", "scores", "baselines", "events")}


def test_schema_versioned_and_journal_not_wal(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    assert s.version() == len(MIGRATIONS)
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    s.close()
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    with pytest.raises(StoreError, match="newer than this slurmqual"):
        open_store(str(tmp_path / "s.db"))


def test_v1_store_migrates_to_keyed_baselines(tmp_path, monkeypatch):
    import slurmqual.burnin.results.store as store_mod

    path = str(tmp_path / "s.db")
    monkeypatch.setattr(store_mod, "MIGRATIONS", MIGRATIONS[:1])
    old = store_mod.open_store(path)
    # What the v1 code wrote: one all_reduce baseline and a verdict without key.
    old.db.execute("INSERT INTO runs VALUES ('r1', 1000.0, '[\"n1\"]', '', ?, 0.9, 0)",
                   (json.dumps({"all_reduce:intra": 456.0, "all_reduce:pair": 380.0}),))
    old.db.execute("INSERT INTO verdicts VALUES ('r1', 'n1', 'pass', 381.0)")
    old.db.execute("INSERT INTO baselines VALUES ('n1', 'all_reduce', 381.0, NULL, '2.21.5', NULL, 'r1', 1000.0)")
    old.close()
    monkeypatch.setattr(store_mod, "MIGRATIONS", MIGRATIONS)
    s = store_mod.open_store(path)
    assert s.version() == len(MIGRATIONS)
    assert s.all_baselines() == {"all_reduce:pair": {"n1": 381.0}} and s.baselines() == {"n1": 381.0}
    assert s.last_burnin(["n1"])["n1"] == {"time": 1000.0, "verdict": "pass", "score": 381.0, "median": 380.0,
                                           "key": "all_reduce:pair", "baseline": 381.0, "run_id": "r1"}


def test_reanalysis_is_idempotent_and_versions_tracked(tmp_path):
    path = str(tmp_path / "s.db")
    s = open_store(path)
    s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS, {"n1": {"nccl": "2.21.5"}})
    first = counts(path)
    s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS, {"n1": {"nccl": "2.21.5"}})
    passed = [n for n, v in ANALYSIS["nodes"].items() if v["verdict"] == "pass"]
    assert counts(path) == first
    assert first["verdicts"] == 6 and first["scores"] == 12 and first["baselines"] == 2 * len(passed) == 10
    raw2, a2 = judged(Fabric(noise=0.01), seed=2)
    s.record_run(RunRecord("r2", 2000.0, NODES), raw2, a2, {"n1": {"nccl": "2.23.4"}})
    assert s.baselines()["n2"] == a2["nodes"]["n2"]["score"] and s.nccl_versions()["n1"] == "2.23.4"
    hist = s.node_history("n1")
    assert hist[0]["time"] == 2000.0 and any(e["kind"] == "version_change" and "2.21.5 -> 2.23.4" in e["detail"] for e in hist)
    last = s.last_burnin(["n1", "n2"])
    assert last["n1"]["time"] == 2000.0 and last["n1"]["score"] == a2["nodes"]["n1"]["score"]
    assert last["n1"]["median"] == a2["median"]["all_reduce:pair"] and last["n1"]["key"] == "all_reduce:pair"
    assert s.last_verdicts(["n2"]) == {"n2": last["n2"]}
    assert [r["id"] for r in s.runs()] == ["r2", "r1"]


def test_interrupted_analysis_leaves_store_unchanged(tmp_path):
    path = str(tmp_path / "s.db")
    s = open_store(path)
    s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS)
    before, bases = counts(path), s.all_baselines()
    broken = json.loads(json.dumps(ANALYSIS))
    del broken["nodes"]["n6"]["verdict"]  # fails midway through the nodes
    with pytest.raises(KeyError):
        s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, broken)
    assert counts(path) == before and s.all_baselines() == bases


def test_not_a_database(tmp_path):
    bad = tmp_path / "junk.db"
    bad.write_text("this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable slurmqual store"):
        SqliteStore(str(bad))
    with pytest.raises(StoreError, match="no store yet"):
        open_store(str(tmp_path / "none.db"), create=False)


def _cli(tmp_path, *args, extra=""):
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/s.db"\n[slurm]\nbin_dir = "{tmp_path}/nobin"\n{extra}')
    return subprocess.run([sys.executable, "-m", "slurmqual", *args, "--config", str(cfg)], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "SLURMQUAL_CACHE_DIR": str(tmp_path / "c")})


def _jsonl(path, fabric, seed=1, tests=("all_reduce",)):
    raw, _a = judged(fabric, seed=seed, tests=tests)
    path.write_text("".join(json.dumps(m) + "\n" for m in raw))
    return str(path)


def test_analyze_jsonl_dry_run_json_schema(tmp_path):
    f = _jsonl(tmp_path / "m.jsonl", Fabric(node={"n3": 0.6}, noise=0.01))
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", f, "--json", "--dry-run")
    out = json.loads(p.stdout)
    assert p.returncode == 0, p.stderr
    assert {"median", "threshold", "nodes", "suspect_links", "drain", "guard_tripped", "noise", "keys"} <= set(out)
    assert out["nodes"]["n3"]["verdict"] == "fail" and out["drain"] == ["n3"]
    assert out["nodes"]["n3"]["score"] == pytest.approx(0.6 * 380, rel=0.05)
    assert not (tmp_path / "s.db").exists()  # dry run writes nothing


def test_analyze_jsonl_bad_line_is_clear(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"nodes": ["a", "b"], "busbw": 1.0, "size": 8, "test": "all_reduce", "ok": true}\n{"nodes": "a"}\n')
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", str(f), "--dry-run")
    assert p.returncode == 2 and f"{f}:2: bad measurement: 'nodes' must be a non-empty list" in p.stderr


def test_read_methods_for_status_and_history(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    assert s.last_verdict("n1") is None and s.baseline("n1") is None
    s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS,
                 {"n1": {"nccl": "2.21.5", "driver": "550.54.15", "nic_fw": "28.39.1002"}})
    n1 = ANALYSIS["nodes"]["n1"]["score"]
    b = s.baseline("n1")
    assert b == {"score": n1, "driver": "550.54.15", "nccl": "2.21.5", "nic_fw": "28.39.1002", "run_id": "r1",
                 "time": 1000.0}
    raw2, a2 = judged(Fabric(net={"n2": 0.86}, noise=0.02), seed=3)  # within the noise of the line: retest, no baseline
    s.record_run(RunRecord("r2", 2000.0, NODES), raw2, a2)
    assert s.last_verdict("n2") == {"run_id": "r2", "time": 2000.0, "verdict": a2["nodes"]["n2"]["verdict"],
                                    "score": a2["nodes"]["n2"]["score"]}
    assert s.baseline("r1") is None
    assert s.baseline("n1", "all_gather") is None and s.baseline("n2") is None
    assert s.baseline("n1", "all_reduce:pair")["score"] >= n1 * 0.97
    assert [e["kind"] for e in s.node_history("n2")] == ["burnin", "drain", "burnin"]


def test_guard_tripped_run_records_no_baselines(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    raw, a = judged(Fabric(node={"n1": 0.6, "n2": 0.6, "n3": 0.6}, noise=0.01))
    assert a["guard_tripped"]
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, a)
    assert s.all_baselines() == {} and s.runs()[0]["guard_tripped"] is True


def test_pending_migrations_apply_in_order(tmp_path, monkeypatch):
    path = str(tmp_path / "s.db")
    open_store(path).close()
    import slurmqual.burnin.results.store as store_mod

    monkeypatch.setattr(store_mod, "MIGRATIONS", MIGRATIONS + ["CREATE TABLE extra (x INTEGER)",
                                                               "INSERT INTO extra VALUES (7)"])
    s = store_mod.open_store(path)
    assert s.version() == len(MIGRATIONS) + 2 and s.db.execute("SELECT x FROM extra").fetchone() == (7,)


def test_baseline_versions_come_from_task_and_hook_state(tmp_path):
    from slurmqual.burnin.run.runner import with_host_versions

    nodes = tmp_path / "state" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "n1.json").write_text(json.dumps({"node": "n1", "versions": {"driver": "550.54.15", "nic_fw": "28.39.1002",
                                                                          "nccl": "9.9.9"}}))
    (nodes / "n2.json").write_text("{broken")
    out = with_host_versions({"hooks": {"state_dir": str(tmp_path / "state")}}, {"n1": {"nccl": "2.21.5"}})
    assert out == {"n1": {"nccl": "2.21.5", "driver": "550.54.15", "nic_fw": "28.39.1002"}}


def test_reanalysing_an_older_run_keeps_the_newer_baseline(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    raw2, a2 = judged(Fabric(noise=0.01, base=420.0), seed=2)
    s.record_run(RunRecord("r2", 2000.0, NODES), raw2, a2)
    s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS)
    assert s.baseline("n1")["score"] == a2["nodes"]["n1"]["score"] and s.baseline("n1")["run_id"] == "r2"


def test_locked_store_is_a_clear_error_and_changes_nothing(tmp_path):
    path = str(tmp_path / "s.db")
    s = open_store(path)
    s.db.execute("PRAGMA busy_timeout = 100")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="could not record run r1"):
            s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS)
    finally:
        other.execute("ROLLBACK")
    assert counts(path)["runs"] == 0
    s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS)  # the connection is still usable
    assert counts(path)["runs"] == 1


def test_analyze_run_dir_reports_untested_and_unfinished_tasks(tmp_path):
    run_dir = tmp_path / "runs" / "r9"
    (run_dir / "results").mkdir(parents=True)
    scope = ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"]
    (run_dir / "plan.json").write_text(json.dumps({"run_id": "r9", "scope": scope, "groups": [scope[:6], scope[6:]],
                                                   "time": 1000.0}))
    raw, _a = judged(Fabric(node={"n4": 0.6}, noise=0.01))
    (run_dir / "results" / "task-0.json").write_text(json.dumps({"task": "0", "complete": True, "measurements": raw,
                                                                 "versions": {"n1": {"nccl": "2.21.5"}}}))
    # Task 1 was killed after its intra-node tests: its nodes are untested.
    killed = [m.to_dict() for m in run(scope[6:], Fabric(dead_tasks={0: "after_intra"}))]
    (run_dir / "results" / "task-1.json").write_text(json.dumps({"task": "1", "complete": False,
                                                                 "measurements": killed, "versions": {}}))
    p = _cli(tmp_path, "burnin", "analyze", str(run_dir), "--json", "--dry-run")
    assert p.returncode == 0, p.stderr  # judged: the exit codes are issue 22's kept interface
    out = json.loads(p.stdout)
    assert out["nodes"]["n4"]["verdict"] == "fail" and out["drain"] == ["n4"]
    assert out["nodes"]["n7"]["verdict"] == out["nodes"]["n8"]["verdict"] == "untested"
    why = "no valid pair measurement (an intra-node number alone never passes)"
    assert out["retest"]["final"] and out["retest"]["untested"] == {"n7": why, "n8": why}
    text = _cli(tmp_path, "burnin", "analyze", str(run_dir), "--dry-run")
    assert text.returncode == 0 and "undecided" not in text.stdout
    assert f"RUN ENDED WITH 2 NODE(S) UNTESTED (neither passed nor drained; burn them in again): n7: {why}; " \
           f"n8: {why}" in text.stdout, text.stdout
    from slurmqual.burnin.results.report import render_html

    assert 'id="untested">The run ended with 2 node(s) untested' in render_html(out, "r9")
    assert out["nodes"]["n7"]["score"] is None and out["incomplete_tasks"] == ["1"]
    assert "task 1 did not finish: its untested nodes are reported untested" in out["problems"]
    assert json.loads((run_dir / "analysis.json").read_text()) == out
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r9", 1000.0, scope), raw + killed, out)
    bases = s.all_baselines()
    assert "n1" in bases["all_reduce:pair"] and not {"n4", "n7", "n8"} & {n for b in bases.values() for n in b}
    (run_dir / "results" / "task-0.json").write_text("{trunc")
    p = _cli(tmp_path, "burnin", "analyze", str(run_dir), "--dry-run")
    assert p.returncode == 2 and "unreadable task result" in p.stderr


def test_watch_on_a_directory_that_is_no_run_is_clear(tmp_path):
    p = _cli(tmp_path, "burnin", "watch", str(tmp_path))
    assert p.returncode == 2 and "not a submitted burn-in run" in p.stderr and "Traceback" not in p.stderr


LOW_LINE = "[burnin]\nthreshold = 0.8\n"


def test_below_own_baseline_keeps_it_until_an_admin_accepts(tmp_path):
    first = _jsonl(tmp_path / "a.jsonl", Fabric(noise=0.005))
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", first, "--json", extra=LOW_LINE)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["below_baseline"] == {}
    s = open_store(str(tmp_path / "s.db"))
    base_n1 = s.baseline("n1")["score"]
    # n1's NIC lost 15%: above this site's fleet line (80%), but 15% below its own baseline.
    second = _jsonl(tmp_path / "b.jsonl", Fabric(net={"n1": 0.85}, noise=0.005), seed=2)
    for _ in range(2):  # reported on every run, not once: the baseline does not ratchet down
        p = _cli(tmp_path, "burnin", "analyze", "--measurements", second, extra=LOW_LINE)
        assert p.returncode == 0, p.stderr
        assert f"more than 10% below its baseline {base_n1}" in p.stdout and "n2:" not in p.stdout
        assert s.baseline("n1")["score"] == base_n1
    p = _cli(tmp_path, "burnin", "accept-baseline", "n1", "--test", "all_reduce")
    assert p.returncode == 0, p.stderr
    new = s.baseline("n1")["score"]
    assert new == pytest.approx(0.85 * base_n1, rel=0.03) and "all_reduce:pair baseline" in p.stdout
    assert any(e["kind"] == "baseline_accepted" and f"-> {new}" in e["detail"] for e in s.node_history("n1"))
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", second, extra=LOW_LINE)
    assert p.returncode == 0 and "below its baseline" not in p.stdout
    p = _cli(tmp_path, "burnin", "accept-baseline", "n9")
    assert p.returncode == 1 and "no burn-in yet" in p.stdout


def test_fleet_slowdown_run_keeps_old_baselines(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r1", 1000.0, NODES), MEAS, ANALYSIS)
    before = s.all_baselines()
    raw, a = judged(Fabric(noise=0.01, base=250.0), baselines=before, seed=2)
    assert a["fleet_slowdown"]
    s.record_run(RunRecord("r2", 2000.0, NODES), raw, a)
    assert s.all_baselines() == before


def test_each_test_keeps_its_own_baselines(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    raw, a = judged(Fabric(noise=0.01), tests=("all_reduce", "alltoall"))
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, a)
    keys = set(s.all_baselines())
    assert {"all_reduce:pair", "alltoall:pair"} <= keys
    assert s.baseline("n1", "alltoall")["score"] == a["nodes"]["n1"]["keys"]["alltoall:pair"]["score"]


def test_a_requalify_run_is_judged_against_the_last_full_run(tmp_path):
    from slurmqual.burnin.judge.plan import retest_plan

    s = open_store(str(tmp_path / "s.db"))
    raw, full = judged(Fabric(noise=0.01), nodes=[f"n{i}" for i in range(1, 17)])
    s.record_run(RunRecord("full", 1000.0, sorted(full["nodes"])), raw, full)
    assert s.fleet_medians() == full["median"]
    rounds = [[list(p) for p in rnd] for rnd in retest_plan(["n7"], ["n1", "n2"])]
    run_dir = tmp_path / "runs" / "rq"
    (run_dir / "results").mkdir(parents=True)
    (run_dir / "plan.json").write_text(json.dumps({"run_id": "rq", "scope": ["n1", "n2", "n7"], "groups": [["n1", "n2", "n7"]],
                                                   "time": 2000.0, "rounds": rounds}))
    ms = [m.to_dict() for m in run_pairs([[tuple(p) for p in rnd] for rnd in rounds], Fabric(net={"n7": 0.6}, noise=0.01))]
    (run_dir / "results" / "task-0.json").write_text(json.dumps({"task": 0, "complete": True, "measurements": ms}))
    p = _cli(tmp_path, "burnin", "analyze", str(run_dir), "--json", "--dry-run")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["run_kind"] == "requalify" and out["drain"] == ["n7"] and set(out["nodes"]) == {"n7"}
    assert out["median"]["all_reduce:pair"] == full["median"]["all_reduce:pair"]
    s.record_run(RunRecord("rq", 2000.0, ["n1", "n2", "n7"]), ms, out)
    assert s.fleet_medians() == full["median"]  # a requalify never becomes the fleet's level
    assert s.last_verdict("n1")["run_id"] == "full"  # references keep their verdicts
