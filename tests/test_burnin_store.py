"""The store: migrations, idempotent re-analysis, atomicity, bulk reads, JSONL input."""

import json
import sqlite3
import subprocess
import sys

import pytest

from slurmqual.burnin.store import MIGRATIONS, RunRecord, SqliteStore, StoreError, open_store

ANALYSIS = {"median": {"all_reduce:pair": 380.0}, "threshold": 0.9, "guard_tripped": False, "drain": ["n2"],
            "nodes": {"n1": {"verdict": "pass", "score": 381.0}, "n2": {"verdict": "fail", "score": 200.0}}}
MEAS = [{"nodes": ["n1", "n2"], "test": "all_reduce", "size": 8, "busbw": 200.0, "ok": True}]


def counts(path):
    db = sqlite3.connect(path)
    return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("runs", "measurements", "verdicts", "baselines", "events")}


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


def test_reanalysis_is_idempotent_and_versions_tracked(tmp_path):
    path = str(tmp_path / "s.db")
    s = open_store(path)
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS, {"n1": {"nccl": "2.21.5"}})
    first = counts(path)
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS, {"n1": {"nccl": "2.21.5"}})
    assert counts(path) == first == {"runs": 1, "measurements": 1, "verdicts": 2, "baselines": 1, "events": 4}
    s.record_run(RunRecord("r2", 2000.0, ["n1"]), MEAS, dict(ANALYSIS, drain=[], nodes={"n1": {"verdict": "pass", "score": 390.0}}),
                 {"n1": {"nccl": "2.23.4"}})
    assert s.baselines() == {"n1": 390.0} and s.nccl_versions() == {"n1": "2.23.4"}
    hist = s.node_history("n1")
    assert hist[0]["time"] == 2000.0 and any(e["kind"] == "version_change" and "2.21.5 -> 2.23.4" in e["detail"] for e in hist)
    last = s.last_burnin(["n1", "n2"])
    assert last["n1"]["time"] == 2000.0 and last["n1"]["score"] == 390.0 and last["n1"]["median"] == 380.0
    assert last["n2"]["verdict"] == "fail" and last["n2"]["baseline"] is None
    assert s.last_verdicts(["n2"]) == {"n2": last["n2"]}
    assert [r["id"] for r in s.runs()] == ["r2", "r1"]


def test_interrupted_analysis_leaves_store_unchanged(tmp_path):
    path = str(tmp_path / "s.db")
    s = open_store(path)
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS)
    before = counts(path)
    broken = dict(ANALYSIS, nodes={"n1": {"verdict": "pass", "score": 1.0}, "n3": {"score": 2.0}})  # no verdict: fails midway
    with pytest.raises(KeyError):
        s.record_run(RunRecord("r1", 1000.0, ["n1"]), MEAS, broken)
    assert counts(path) == before and s.baselines() == {"n1": 381.0}


def test_not_a_database(tmp_path):
    bad = tmp_path / "junk.db"
    bad.write_text("this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable slurmqual store"):
        SqliteStore(str(bad))
    with pytest.raises(StoreError, match="no store yet"):
        open_store(str(tmp_path / "none.db"), create=False)


def _cli(tmp_path, *args):
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/s.db"\n[slurm]\nbin_dir = "{tmp_path}/nobin"\n')
    return subprocess.run([sys.executable, "-m", "slurmqual", *args, "--config", str(cfg)], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "SLURMQUAL_CACHE_DIR": str(tmp_path / "c")})


def test_analyze_jsonl_dry_run_json_schema(tmp_path):
    lines = [{"nodes": [a, b], "busbw": 380.0 * (0.6 if "n3" in (a, b) else 1), "size": 8589934592, "test": "all_reduce", "ok": True}
             for a, b in [("n1", "n2"), ("n3", "n4"), ("n1", "n3"), ("n2", "n4"), ("n3", "n2"), ("n1", "n4")]]
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", str(f), "--json", "--dry-run")
    out = json.loads(p.stdout)
    assert p.returncode == 0, p.stderr
    assert {"median", "threshold", "nodes", "suspect_links", "drain", "guard_tripped"} <= set(out)
    assert out["nodes"]["n3"] == {"verdict": "fail", "score": 228.0} and out["drain"] == ["n3"]
    assert not (tmp_path / "s.db").exists()  # dry run writes nothing


def test_analyze_jsonl_bad_line_is_clear(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"nodes": ["a", "b"], "busbw": 1.0, "size": 8, "test": "all_reduce", "ok": true}\n{"nodes": "a"}\n')
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", str(f), "--dry-run")
    assert p.returncode == 2 and f"{f}:2: bad measurement: 'nodes' must be a non-empty list" in p.stderr


def test_read_methods_for_status_and_history(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    assert s.last_verdict("n1") is None and s.baseline("n1") is None
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS,
                 {"n1": {"nccl": "2.21.5", "driver": "550.54.15", "nic_fw": "28.39.1002"}})
    s.record_run(RunRecord("r2", 2000.0, ["n2"]), MEAS,
                 dict(ANALYSIS, drain=[], nodes={"n2": {"verdict": "retest", "score": 300.0}}))
    assert s.last_verdict("n1") == {"run_id": "r1", "time": 1000.0, "verdict": "pass", "score": 381.0}
    assert s.last_verdict("n2") == {"run_id": "r2", "time": 2000.0, "verdict": "retest", "score": 300.0}
    assert s.baseline("n1") == {"score": 381.0, "driver": "550.54.15", "nccl": "2.21.5", "nic_fw": "28.39.1002",
                                "run_id": "r1", "time": 1000.0}
    assert s.baseline("n1", "all_gather") is None and s.baseline("n2") is None
    assert [e["kind"] for e in s.node_history("n2")] == ["burnin", "drain", "burnin"]


def test_guard_tripped_run_records_no_baselines(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, dict(ANALYSIS, guard_tripped=True, drain=[]))
    assert s.baselines() == {} and s.runs()[0]["guard_tripped"] is True


def test_pending_migrations_apply_in_order(tmp_path, monkeypatch):
    path = str(tmp_path / "s.db")
    open_store(path).close()
    import slurmqual.burnin.store as store_mod

    monkeypatch.setattr(store_mod, "MIGRATIONS", MIGRATIONS + ["CREATE TABLE extra (x INTEGER)",
                                                               "INSERT INTO extra VALUES (7)"])
    s = store_mod.open_store(path)
    assert s.version() == len(MIGRATIONS) + 2 and s.db.execute("SELECT x FROM extra").fetchone() == (7,)


def test_baseline_versions_come_from_task_and_hook_state(tmp_path):
    from slurmqual.burnin.runner import with_host_versions

    nodes = tmp_path / "state" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "n1.json").write_text(json.dumps({"node": "n1", "versions": {"driver": "550.54.15", "nic_fw": "28.39.1002",
                                                                          "nccl": "9.9.9"}}))
    (nodes / "n2.json").write_text("{broken")
    out = with_host_versions({"hooks": {"state_dir": str(tmp_path / "state")}}, {"n1": {"nccl": "2.21.5"}})
    assert out == {"n1": {"nccl": "2.21.5", "driver": "550.54.15", "nic_fw": "28.39.1002"}}


def test_reanalysing_an_older_run_keeps_the_newer_baseline(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r2", 2000.0, ["n1"]), MEAS, dict(ANALYSIS, drain=[], nodes={"n1": {"verdict": "pass", "score": 390.0}}))
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS)
    assert s.baseline("n1")["score"] == 390.0 and s.baseline("n1")["run_id"] == "r2"


def test_locked_store_is_a_clear_error_and_changes_nothing(tmp_path):
    path = str(tmp_path / "s.db")
    s = open_store(path)
    s.db.execute("PRAGMA busy_timeout = 100")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="could not record run r1"):
            s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS)
    finally:
        other.execute("ROLLBACK")
    assert counts(path)["runs"] == 0
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS)  # the connection is still usable
    assert counts(path)["runs"] == 1


def test_analyze_run_dir_reports_untested_and_unfinished_tasks(tmp_path):
    run = tmp_path / "runs" / "r9"
    (run / "results").mkdir(parents=True)
    scope = ["n1", "n2", "n3", "n4", "n5", "n6"]
    (run / "plan.json").write_text(json.dumps({"run_id": "r9", "scope": scope, "groups": [scope[:4], scope[4:]],
                                               "time": 1000.0}))
    ref = 8589934592
    pairs = [("n1", "n2"), ("n3", "n4"), ("n1", "n3"), ("n2", "n4"), ("n1", "n4"), ("n2", "n3")]
    ms = [{"nodes": list(p), "busbw": 380.0 * (0.7 if "n4" in p else 1), "size": ref, "test": "all_reduce", "ok": True}
          for p in pairs]
    (run / "results" / "task-0.json").write_text(json.dumps({"task": "0", "complete": True, "measurements": ms,
                                                             "versions": {"n1": {"nccl": "2.21.5"}}}))
    (run / "results" / "task-1.json").write_text(json.dumps({"task": "1", "complete": False, "measurements": [],
                                                             "versions": {}}))
    p = _cli(tmp_path, "burnin", "analyze", str(run), "--json", "--dry-run")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["nodes"]["n4"] == {"verdict": "fail", "score": 266.0} and out["drain"] == ["n4"]
    assert out["nodes"]["n5"] == out["nodes"]["n6"] == {"verdict": "untested", "score": None}
    assert "task 1 did not finish: its untested nodes are reported untested" in out["problems"]
    assert json.loads((run / "analysis.json").read_text()) == out
    (run / "results" / "task-0.json").write_text("{trunc")
    p = _cli(tmp_path, "burnin", "analyze", str(run), "--dry-run")
    assert p.returncode == 2 and "unreadable task result" in p.stderr


def test_watch_on_a_directory_that_is_no_run_is_clear(tmp_path):
    p = _cli(tmp_path, "burnin", "watch", str(tmp_path))
    assert p.returncode == 2 and "not a submitted burn-in run" in p.stderr and "Traceback" not in p.stderr


def _jsonl(path, bw):
    pairs = [("n1", "n2"), ("n3", "n4"), ("n1", "n3"), ("n2", "n4"), ("n1", "n4"), ("n2", "n3")]
    path.write_text("".join(json.dumps({"nodes": list(p), "busbw": bw(p), "size": 8589934592, "test": "all_reduce",
                                        "ok": True}) + "\n" for p in pairs))
    return str(path)


def test_second_run_reports_drop_below_own_baseline(tmp_path):
    first = _jsonl(tmp_path / "a.jsonl", lambda p: 420.0 if "n1" in p else 380.0)
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", first, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["below_baseline"] == {}
    s = open_store(str(tmp_path / "s.db"))
    assert s.baseline("n1")["score"] == 420.0 and s.baseline("n2")["score"] == 380.0
    second = _jsonl(tmp_path / "b.jsonl", lambda p: 370.0)
    p = _cli(tmp_path, "burnin", "analyze", "--measurements", second)
    assert p.returncode == 0, p.stderr
    assert "n1: 370.0 GB/s, more than 10% below its baseline 420.0" in p.stdout
    assert "n2:" not in p.stdout  # 370 is within 10% of 380
    assert s.baseline("n1")["score"] == 370.0 and len(s.runs()) == 2


def test_fleet_slowdown_run_keeps_old_baselines(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r1", 1000.0, ["n1", "n2"]), MEAS, ANALYSIS)
    slow = dict(ANALYSIS, drain=[], fleet_slowdown=True, nodes={"n1": {"verdict": "pass", "score": 250.0}})
    s.record_run(RunRecord("r2", 2000.0, ["n1"]), MEAS, slow)
    assert s.baselines() == {"n1": 381.0}
