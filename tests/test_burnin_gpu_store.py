"""Per-GPU history and baselines in the store: the v4 migration from a store
that the v3 code (per-GPU lines as `TEST@gpuN` measurements) wrote, baselines
keyed by the GPU's serial (a swapped GPU starts fresh), a GPU below its own
baseline reported like a node, and the per-GPU reads `status` uses.

Every measurement line is our task code's own (gputask.lines_of on the real
8x A100 gpu_burn output, tests/data/real/gpu); every analysis is analyze()'s."""

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from slurmqual.burnin.read import gpuparse
from slurmqual.burnin.judge.analyze import analyze
from slurmqual.burnin.records import Measurement
from slurmqual.burnin.run.gputask import lines_of
from slurmqual.burnin.results.store import MIGRATIONS, RunRecord, open_store

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BURN = gpuparse.parse_file(os.path.join(REPO, "tests", "data", "real", "gpu", "gpu_burn_8x_A100_doubles_tc_superbench.log"))
NODES = [f"n{i:02d}" for i in range(12)]
V3 = "49539bd03a48f430986e3b3ffe58bb6c01be2e22"  # the last commit whose store wrote v3 (TEST@gpuN lines)
KEY = "burn:gpu:" + BURN.readings[0].gpu_model


def gpu_lines(slow=None, serial_of=None):
    """One run's gpu_burn lines for NODES (the real run's numbers on every node,
    each GPU with its own serial: the real UUID with the node appended);
    slow: {(node, gpu): factor}; serial_of: {(node, gpu): serial} overrides."""
    out = []
    for n in NODES:
        for d in lines_of("gpu_burn", n, BURN, 8, 0, "gpu-gpu_burn.log"):
            d["serial"] = (serial_of or {}).get((n, d["gpu"]), f"{d['serial']}-{n}")
            d["value"] = round(d["value"] * (slow or {}).get((n, d["gpu"]), 1.0), 3)
            out.append(d)
    return out


def retested(raw, *nodes):
    """raw plus a retest round's GPU lines for `nodes` (all their GPUs run again:
    the same numbers here); a GPU is slow (fail) only on two runs."""
    return raw + [dict(d) for d in raw if "gpu" in d and d["nodes"][0] in nodes]


def pair_lines():
    return [{"nodes": [a, b], "busbw": 380.0 + i % 3, "size": 8589934592, "test": "all_reduce", "ok": True}
            for i, (a, b) in enumerate(zip(NODES, NODES[1:] + NODES[:1]))]


def judged(raw, baselines=None):
    return analyze([Measurement.from_dict(d) for d in raw], NODES, baselines=baselines).to_dict()


def load_v3_store_module():
    src = subprocess.run(["git", "-C", REPO, "show", f"{V3}:slurmqual/burnin/store.py"], capture_output=True, text=True)
    if src.returncode:
        pytest.skip(f"needs this repository's git history (commit {V3[:7]}): {src.stderr.strip()[:200]}")
    spec = importlib.util.spec_from_loader("slurmqual.burnin._store_v3", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "slurmqual.burnin"
    sys.modules[spec.name] = mod  # dataclasses look their module up
    try:
        exec(compile(src.stdout, "store_v3.py", "exec"), mod.__dict__)
    finally:
        del sys.modules[spec.name]
    assert len(mod.MIGRATIONS) == 3
    return mod


def test_a_store_the_v3_code_wrote_migrates_keeping_every_gpu_line(tmp_path):
    v3 = load_v3_store_module()
    path = str(tmp_path / "s.db")
    raw = pair_lines() + gpu_lines()
    a = judged(raw)
    old = v3.open_store(path)
    old.record_run(v3.RunRecord("r1", 1000.0, NODES), raw, a)
    before = {t: old.db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("runs", "baselines", "verdicts")}
    v3_rows = old.db.execute("SELECT idx, nodes, test, busbw, ok, problems FROM measurements WHERE test LIKE '%@gpu%' "
                             "ORDER BY idx").fetchall()
    old.close()
    assert len(v3_rows) == 96

    s = open_store(path)
    assert s.version() == len(MIGRATIONS) == 5
    after = {t: s.db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in before}
    assert [r[-1] for r in after["runs"]] == [None]  # v5's components: none recorded for an old run
    assert {**after, "runs": [r[:-1] for r in after["runs"]]} == before
    moved = s.db.execute("SELECT idx, node, gpu, test, value, ok, problems FROM gpu_measurements ORDER BY idx").fetchall()
    assert moved == [(i, json.loads(nodes)[0], int(test.split("@gpu")[1]), test.split("@")[0], v, ok, pr)
                     for i, nodes, test, v, ok, pr in v3_rows]
    assert [r[1:4] for r in moved[:2]] == [("n00", 0, "burn"), ("n00", 1, "burn")]
    assert s.db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == len(pair_lines())
    assert s.db.execute("SELECT COUNT(*) FROM measurements WHERE test LIKE '%@gpu%'").fetchone()[0] == 0
    # the migrated store takes the next run
    s.record_run(RunRecord("r2", 2000.0, NODES), raw, judged(raw))
    assert len(s.gpu_history("n00")) == 8


def test_gpu_lines_and_scores_recorded_with_serials(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    raw = retested(pair_lines() + gpu_lines(slow={("n03", 5): 0.7}), "n03")
    a = judged(raw)
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, a)
    assert s.db.execute("SELECT COUNT(*) FROM gpu_measurements").fetchone()[0] == 96 + 8
    row = s.db.execute("SELECT unit, errors, serial, gpu_model FROM gpu_measurements WHERE node='n03' AND gpu=5").fetchone()
    assert row[:2] == ("TFLOPS", 0) and row[2].endswith("-n03") and row[3] == BURN.readings[0].gpu_model
    h = s.gpu_history("n03")
    assert [x["gpu"] for x in h] == list(range(8))
    bad = h[5]
    assert bad["verdict"] == "fail" and bad["key"] == KEY and bad["median"] == a["median"][KEY]
    assert bad["score"] == a["nodes"]["n03"]["gpus"]["5"]["burn"]["score"] and bad["baseline"] is None
    # a failing GPU gets no baseline; its passing neighbours do, by serial
    assert h[4]["baseline"] == h[4]["score"]
    assert s.gpu_history(serial=bad["serial"]) == [bad]


def test_gpu_baseline_by_serial_reports_a_drop_and_a_swapped_gpu_starts_fresh(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    fast = {("n03", 2): 1.06}
    raw = pair_lines() + gpu_lines(slow=fast)
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, judged(raw))
    base = s.all_baselines()
    serial = gpu_lines(slow=fast)[3 * 8 + 2]["serial"]
    first = base[KEY][serial]
    # the same GPU 12% below its own level: still above the fleet's line, below its own baseline
    raw = pair_lines() + gpu_lines(slow={("n03", 2): 1.06 * 0.88})
    a = judged(raw, base)
    assert a["nodes"]["n03"]["verdict"] == "pass" and not a["drain"]
    assert a["below_baseline"] == {"n03": {"key": KEY, "score": a["nodes"]["n03"]["gpus"]["2"]["burn"]["score"],
                                           "baseline": first, "gpu": 2, "serial": serial}}
    s.record_run(RunRecord("r2", 2000.0, NODES), raw, a)
    assert s.all_baselines()[KEY][serial] == first  # kept until the drop is explained
    # GPU 2 swapped: a new serial at the same place starts fresh (no baseline, nothing below it)
    raw = pair_lines() + gpu_lines(slow={("n03", 2): 0.93}, serial_of={("n03", 2): "GPU-new-one"})
    a = judged(raw, s.all_baselines())
    assert a["below_baseline"] == {}
    s.record_run(RunRecord("r3", 3000.0, NODES), raw, a)
    now = s.all_baselines()
    assert now[KEY]["GPU-new-one"] == a["nodes"]["n03"]["gpus"]["2"]["burn"]["score"]
    assert now[KEY][serial] == first  # the old GPU's record stays, wherever it goes next
    assert [h["run_id"] for h in s.gpu_history(serial=serial)] == ["r2", "r1"]
    assert [h["serial"] for h in s.gpu_history("n03") if h["gpu"] == 2] == ["GPU-new-one", serial, serial]
    assert set(s.all_baselines(["n04"])[KEY]) == {x["serial"] for x in gpu_lines() if x["nodes"] == ["n04"]}


def test_a_gpu_without_serial_gets_no_baseline_and_frozen_runs_move_none(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    raw = pair_lines() + [{k: v for k, v in d.items() if k != "serial"} for d in gpu_lines()]
    a = judged(raw)
    assert "serial" not in a["nodes"]["n00"]["gpus"]["0"]["burn"]
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, a)
    assert KEY not in s.all_baselines() and len(s.gpu_history("n00")) == 8
    raw = pair_lines() + gpu_lines()
    a = judged(raw)
    a["guard_tripped"] = True  # as the guard leaves it: nothing moves
    s.record_run(RunRecord("r2", 2000.0, NODES), raw, a)
    assert KEY not in s.all_baselines()


def test_serial_from_one_tool_names_the_gpu_in_every_test():
    nvb = gpuparse.parse_file(os.path.join(REPO, "tests", "data", "real", "gpu",
                                           "nvbandwidth_v0.8_8x_H20_device_local_copy_issue48.txt"))
    raw = gpu_lines() + [d for n in NODES for d in lines_of("nvbandwidth", n, nvb, 8, 0, "nvb.log") if d["ok"]]
    a = judged(raw)
    g = a["nodes"]["n01"]["gpus"]["3"]
    assert g["hbm"]["serial"] == g["burn"]["serial"] and g["burn"]["pci"] == g["hbm"]["pci"]


def test_status_reads_each_nodes_gpus_from_its_last_run(tmp_path):
    s = open_store(str(tmp_path / "s.db"))
    raw = pair_lines() + gpu_lines()
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, judged(raw))
    raw = retested(pair_lines() + gpu_lines(slow={("n05", 1): 0.75}), "n05")
    s.record_run(RunRecord("r2", 2000.0, NODES[4:]), raw, judged(raw))
    last = s.last_burnin_walk(["n00", "n05"])
    assert {n: v["run_id"] for n, v in last.items()} == {"n00": "r2", "n05": "r2"}
    gpus = s.last_gpus({n: v["run_id"] for n, v in last.items()})
    assert [g["verdict"] for g in gpus["n05"]][:2] == ["pass", "fail"] and len(gpus["n00"]) == 8
    assert gpus["n05"][1]["score"] / gpus["n05"][1]["median"] < 0.8
    db = sqlite3.connect(str(tmp_path / "s.db"))
    assert db.execute("SELECT COUNT(*) FROM gpu_scores").fetchone()[0] == 2 * 96
