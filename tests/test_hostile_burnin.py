"""Hostile burn-in inputs: node names, numbers, files that block or explode,
unusable stores. Measurements start as our own code's output (the fleet
model's Measurement.to_dict) and are then broken the way a job, a file or an
attacker breaks them. Each case: a clear error, nothing drained, nothing
recorded; the real-Slurm cases are in test_hostile_slurm.py."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from fleet import Fabric, run
from slurmqual import cli, names
from slurmqual.burnin.records import Measurement
from slurmqual.burnin.results.store import MIGRATIONS, StoreError, existing, open_store
from slurmqual.slurm.adapter import NodeInfo
from slurmqual.testing import FakeAdapter

NODES = [f"n{i}" for i in range(1, 13)]


def fleet_lines(slow=("n3",)) -> list[dict]:
    ms = run(NODES, Fabric(net={n: 0.5 for n in slow}, noise=0.005), seed=3)
    return [m.to_dict() for m in ms]


@pytest.fixture
def analyze(tmp_path, monkeypatch):
    """Run `slurmqual burnin analyze --measurements FILE` in-process against a
    recording adapter; returns (rc, stderr, adapter)."""
    adapter = FakeAdapter.with_nodes([NodeInfo(n, "idle") for n in NODES])
    monkeypatch.setattr("slurmqual.slurm.get_adapter", lambda _config: adapter)
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/store/sq.db"\n[hooks]\nstate_dir = "{tmp_path}/state"\n'
                   f'[burnin]\nguard_min = 2\n')

    def go(path, capsys) -> tuple[int, str, FakeAdapter]:
        rc = cli.main(["burnin", "analyze", "--measurements", str(path), "--config", str(cfg)])
        return rc, capsys.readouterr().err, adapter
    return go


def write_jsonl(path, lines) -> str:
    with open(path, "w") as fh:
        for d in lines:
            fh.write((d if isinstance(d, str) else json.dumps(d)) + "\n")
    return str(path)


# -- node names ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,why", [
    ("gpu001 gpu002", "whitespace"), ("gpu001,gpu002", "whitespace or ','"), ("gpu[001-512]", "hostlist expression"),
    ("gpu001\tx", "whitespace"), ("n1\n", "whitespace"), ("n1\x1b[2K", "control characters"), ("", "empty"),
    ("../etc", "starts with '.'"), ("-rf", "starts with '-'"), ("n1=2", "outside letters"), ("n/1", "outside letters"),
    ("x" * 200, "longer than"), ("gpu^1", "outside letters"), ("név", "outside letters"),
])
def test_bad_node_names_are_refused_with_the_reason(name, why):
    assert names.why_bad(name) is not None and why in names.why_bad(name)
    with pytest.raises(names.BadNodeName, match="unusable node name"):
        names.check(name)


@pytest.mark.parametrize("name", ["gpu001", "n1", "dgx-h100-17", "node_0.rack3", "GPU42", "1n"])
def test_real_node_names_pass(name):
    assert names.check(name) == name


@pytest.mark.parametrize("bad", ["n3 n4 n5 n6 n7 n8", "n[1-12]", "n3,n4"])
def test_measurement_node_that_is_many_nodes_drains_nothing(tmp_path, analyze, capsys, bad):
    """One string that Slurm would read as many nodes: an input error before
    anything, so the guard never counts 1 while scontrol drains 6."""
    lines = fleet_lines()
    for d in lines:
        d["nodes"] = [bad if n == "n3" else n for n in d["nodes"]]
    rc, err, adapter = analyze(write_jsonl(tmp_path / "m.jsonl", lines), capsys)
    assert rc == 2 and adapter.drains == []
    assert "unusable node name" in err and not (tmp_path / "store").exists()


def test_clean_run_drains_the_slow_node(tmp_path, analyze, capsys):
    """The control: the same measurements unbroken drain n3, so the cases above can fail."""
    rc, err, adapter = analyze(write_jsonl(tmp_path / "m.jsonl", fleet_lines()), capsys)
    assert rc == 0 and [d[0] for d in adapter.drains] == [("n3",)]
    assert (tmp_path / "store/sq.db").exists()


# -- numbers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("busbw", math.nan), ("busbw", math.inf), ("busbw", -1.0), ("busbw", 1e9), ("busbw", "380"), ("busbw", True),
    ("size", 0), ("size", -8), ("size", 1 << 60), ("size", 8.5e9), ("size", True), ("nodes", ["n1", "n1"]),
    ("nodes", "n1"), ("nodes", []), ("ok", "yes"),
])
def test_absurd_numbers_are_input_errors_not_scores(tmp_path, analyze, capsys, field, value):
    lines = fleet_lines()
    target = next(d for d in lines if d["nodes"] == ["n5", "n6"] or len(d["nodes"]) == 2)
    target[field] = value
    with pytest.raises(ValueError):
        Measurement.from_dict(target)
    text = write_jsonl(tmp_path / "m.jsonl", [json.dumps(d, allow_nan=True) for d in lines])
    rc, err, adapter = analyze(text, capsys)
    assert rc == 2 and adapter.drains == [] and "bad measurement" in err
    assert not (tmp_path / "store").exists()  # no score, no baseline from it


def test_missing_optional_keys_are_filled_before_the_drain_and_recorded(tmp_path, analyze, capsys):
    """`ok` and `test` are optional: a run without them drains *and* records (it
    used to drain, then fail to record)."""
    lines = fleet_lines()
    for d in lines:
        d.pop("ok", None), d.pop("test", None)
        for k in ("gpu_model", "nccl_version", "task", "round"):
            d.pop(k, None)
    rc, err, adapter = analyze(write_jsonl(tmp_path / "m.jsonl", lines), capsys)
    assert rc == 0, err
    assert [d[0] for d in adapter.drains] == [("n3",)]
    with existing(str(tmp_path / "store/sq.db")) as store:
        assert store.last_verdict("n3")["verdict"] == "fail"


# -- files that block or explode -------------------------------------------------------------------

def _cli(*argv, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-m", "slurmqual", *argv], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep", "binary", "not-object"])
def test_measurement_file_that_blocks_or_explodes_is_a_clear_error(tmp_path, analyze, capsys, kind):
    path = tmp_path / "m.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = "/dev/zero"
    elif kind == "deep":
        write_jsonl(path, ['{"nodes": ' + "[" * 100000 + "]" * 100000 + "}"])
    elif kind == "binary":
        path.write_bytes(json.dumps(fleet_lines()[0]).encode() + b"\n\xff\xfe\n")
    else:
        write_jsonl(path, ["[1, 2]"])
    start = time.monotonic()
    rc, err, adapter = analyze(path, capsys)
    assert time.monotonic() - start < 20
    assert rc == 2 and adapter.drains == [] and "Traceback" not in err
    expect = {"fifo": "is a FIFO", "dev-zero": "character device", "deep": "nested too deeply",
              "binary": "not UTF-8", "not-object": "not an object"}[kind]
    assert expect in err


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_parser_input_that_blocks_is_a_clear_error(tmp_path, kind):
    path = tmp_path / "out.log"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = "/dev/zero"
    p = _cli("burnin", "parse", str(path), "--json", timeout=30)
    assert p.returncode == 2 and ("is a FIFO" in p.stderr or "character device" in p.stderr)
    assert "Traceback" not in p.stderr


def test_run_directory_with_hostile_task_results(tmp_path, analyze, capsys, monkeypatch):
    """A run dir whose task result is a FIFO, or whose plan names a hostlist: clear errors, no drain."""
    run_dir = tmp_path / "run"
    (run_dir / "results").mkdir(parents=True)
    plan = {"run_id": "r1", "scope": NODES, "groups": [NODES], "time": time.time()}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    os.mkfifo(run_dir / "results/task-0.json")
    adapter = FakeAdapter.with_nodes([NodeInfo(n, "idle") for n in NODES])
    monkeypatch.setattr("slurmqual.slurm.get_adapter", lambda _config: adapter)
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/store/sq.db"\n')
    assert cli.main(["burnin", "analyze", str(run_dir), "--config", str(cfg)]) == 2
    assert "is a FIFO" in capsys.readouterr().err
    os.unlink(run_dir / "results/task-0.json")
    (run_dir / "results/task-0.json").write_text(json.dumps({"task": 0, "complete": True,
                                                               "measurements": fleet_lines()}))
    (run_dir / "plan.json").write_text(json.dumps(dict(plan, scope=NODES + ["n[13-99]"])))
    assert cli.main(["burnin", "analyze", str(run_dir), "--config", str(cfg)]) == 2
    assert "hostlist expression" in capsys.readouterr().err
    assert adapter.drains == [] and not (tmp_path / "store").exists()


def test_metrics_write_failure_keeps_the_analysis_and_the_recorded_run(tmp_path, capsys, monkeypatch):
    """Metrics are nice to have: a metrics dir that cannot be written (here a
    file where the dir should be) never loses analysis.json nor the store's run."""
    run_dir = tmp_path / "run"
    (run_dir / "results").mkdir(parents=True)
    plan = {"run_id": "r1", "scope": NODES, "groups": [NODES], "time": time.time()}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    (run_dir / "results/task-0.json").write_text(json.dumps({"task": 0, "complete": True,
                                                               "measurements": fleet_lines()}))
    adapter = FakeAdapter.with_nodes([NodeInfo(n, "idle") for n in NODES])
    monkeypatch.setattr("slurmqual.slurm.get_adapter", lambda _config: adapter)
    (tmp_path / "metrics").write_text("not a directory\n")
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/store/sq.db"\n[hooks]\nstate_dir = "{tmp_path}/state"\n'
                   f'metrics_dir = "{tmp_path}/metrics"\n[burnin]\nguard_min = 2\n')
    assert cli.main(["burnin", "analyze", str(run_dir), "--config", str(cfg)]) == 0
    assert "could not write metrics" in capsys.readouterr().err
    analysis = json.loads((run_dir / "analysis.json").read_text())
    assert analysis["drain"] == ["n3"] and [d[0] for d in adapter.drains] == [("n3",)]
    with existing(str(tmp_path / "store/sq.db")) as store:
        assert store.last_verdicts(["n3"])["n3"]["verdict"] == "fail"


# -- stores ----------------------------------------------------------------------------------------

def _newer_store(path):
    open_store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS) + 5,))
    db.commit()
    db.close()


@pytest.mark.parametrize("kind", ["newer", "corrupt", "dir-is-a-file"])
def test_unusable_store_fails_before_any_drain(tmp_path, analyze, capsys, kind):
    store = tmp_path / "store/sq.db"
    store.parent.mkdir()
    if kind == "newer":
        _newer_store(str(store))
    elif kind == "corrupt":
        store.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    else:
        os.rmdir(store.parent)
        store.parent.write_text("a file where the store's directory should be")
    rc, err, adapter = analyze(write_jsonl(tmp_path / "m.jsonl", fleet_lines()), capsys)
    assert rc == 2 and adapter.drains == []
    assert {"newer": "newer than this slurmqual", "corrupt": "not a usable slurmqual store",
            "dir-is-a-file": "sq.db"}[kind] in err


@pytest.mark.parametrize("kind", ["newer", "corrupt"])
def test_unreadable_store_is_never_no_store(tmp_path, kind):
    path = str(tmp_path / "sq.db")
    if kind == "newer":
        _newer_store(path)
    else:
        with open(path, "wb") as fh:
            fh.write(b"not a database at all" * 100)
    with pytest.raises(StoreError):
        with existing(path):
            pass
    with existing(str(tmp_path / "absent.db")) as store:
        assert store is None  # only a missing file is "no store yet"


def _first_open(path, barrier_at):
    while time.time() < barrier_at:
        time.sleep(0.001)
    try:
        open_store(path).close()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        return f"{type(exc).__name__}: {exc}"


def test_two_first_time_analyses_creating_the_store_both_succeed(tmp_path):
    ctx = multiprocessing.get_context("fork")
    for attempt in range(5):  # several races, each on a fresh path
        path = str(tmp_path / f"sq{attempt}.db")
        at = time.time() + 0.5
        with ctx.Pool(4) as pool:
            results = pool.starmap(_first_open, [(path, at)] * 4)
        assert results == ["ok"] * 4
        with existing(path) as store:
            assert store.version() == len(MIGRATIONS)


@pytest.mark.parametrize("kind", ["newer", "corrupt"])
def test_status_says_the_store_is_unusable(tmp_path, monkeypatch, capsys, kind):
    """Not every node `unknown` in silence: status names the store problem and exits 1."""
    adapter = FakeAdapter.with_nodes([NodeInfo(n, "idle") for n in NODES])
    monkeypatch.setattr("slurmqual.slurm.get_adapter", lambda _config: adapter)
    store = tmp_path / "sq.db"
    if kind == "newer":
        _newer_store(str(store))
    else:
        store.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4096)
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[store]\npath = "{store}"\n[hooks]\nstate_dir = "{tmp_path}/state"\n')
    rc = cli.main(["status", "--json", "--config", str(cfg)])
    out, err = capsys.readouterr()
    assert rc == 1 and "burn-in store unusable" in err
    assert {"newer": "newer than this slurmqual", "corrupt": "not a usable slurmqual store"}[kind] in \
        json.loads(out)["store_error"]
