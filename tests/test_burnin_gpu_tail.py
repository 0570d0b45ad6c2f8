"""Heavy-tailed GPU runs and the first round (issue 22 item 4): the fleet's
own tail of runs, not a gaussian fitted to its bulk, sizes the first round's
runs (from the store) and its retest line.

Fixtures: GPU tool output and pair lines from the issue 22 generator
(bench/runsim.py: gpu_burn and nvbandwidth text read by the run's own
reader), judged by analyze()."""

from __future__ import annotations

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (the issue 22 generator)

from slurmqual.burnin.judge import gpus  # noqa: E402
from slurmqual.burnin.judge.analyze import analyze  # noqa: E402
from slurmqual.burnin.records import from_dicts  # noqa: E402


def fleet(shape: str, noise: float, nodes: int = 256, seed: int = 1) -> runsim.Fabric:
    f = runsim.healthy_fleet(random.Random(seed), nodes, 4)
    f.shape, f.gpus, f.gpu_noise = shape, 8, noise
    return f


def burn_ratios(f: runsim.Fabric, seed: int) -> tuple[list[float], dict]:
    """One gpu_burn run on every GPU of `f`: every run over the fleet median, and the analysis' burn key."""
    rng = random.Random(seed)
    ms = from_dicts(runsim.gpu_tool_lines(f, "gpu_burn", list(f.nodes), 0, "", rng))
    a = analyze(ms, list(f.nodes))
    key = next(k for k in a.keys if k.startswith("burn:gpu"))
    med = a.keys[key]["median"]
    return [m.value / med for m in ms if m.value is not None], a.keys[key]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_heavy_tailed_fleet_reads_its_tail_and_a_gaussian_one_its_bulk(seed):
    _r, t = burn_ratios(fleet("student-t", 0.02, seed=seed), seed)
    _r, g = burn_ratios(fleet("gaussian", 0.02, seed=seed), seed)
    # student-t (3 dof) at a 2% bulk: one run in a hundred 8% off the median
    assert t["tail_noise"] >= 1.4 * t["noise"] and t["tail_noise"] >= 0.03
    assert g["noise"] <= g["tail_noise"] <= 1.3 * g["noise"]


def test_tail_noise_is_the_bulk_with_too_few_runs_to_show_a_tail():
    assert gpus.tail_noise([1.0, 1.2, 0.8, 1.01], 0.02) == 0.02
    assert gpus.tail_noise([], 0.02) == 0.02


@pytest.mark.parametrize("shape,noise,least", [("student-t", 0.02, 3), ("gaussian", 0.02, 1), ("gaussian", 0.03, 2)])
def test_the_first_rounds_runs_are_sized_by_what_the_store_keeps_tail_included(shape, noise, least):
    """runner.gpu_runs (burnin.gpu_runs = "auto") sizes the first round from
    the previous burn-in's analysis noise (Store.fleet_noise). A student-t
    fleet at 2% recorded its bulk (0.02): one run, and a GPU 15% slow
    passed on a run 10% high (whole run, seed 5026)."""
    f = fleet(shape, noise, nodes=128)
    stored = runsim.previous_gpu_noise(f, 7)
    k = gpus.first_runs(stored, 0.9, 8)
    assert k >= least
    if shape == "gaussian":
        assert k == gpus.runs_needed(noise, 0.9, 8)  # no more runs than a gaussian fleet needs


def test_a_heavy_tailed_fleets_first_round_retests_few_healthy_nodes_and_every_slow_gpu():
    """Sized for its tail, a student-t fleet's first round sends at most 2%
    of its nodes for noise, and every GPU 15% slow (issue 22 item 4)."""
    sent = slow_sent = slow = nodes = 0
    for seed in range(4):
        f = fleet("student-t", 0.02, nodes=256, seed=seed)
        rng = random.Random(seed)
        for x in rng.sample(f.nodes, 3):
            f.gpu_slow[(x, rng.randrange(8))] = 0.85
        k = gpus.first_runs(runsim.previous_gpu_noise(f, seed), 0.9, 8)
        raw = []
        for _ in range(k):
            raw += runsim.gpu_tool_lines(f, "gpu_burn", list(f.nodes), 0, "", rng)
        a = analyze(from_dicts(raw), list(f.nodes))
        slow_nodes = {x for x, _g in f.gpu_slow}
        retest = {n for n, v in a.nodes.items() if v["verdict"] in ("retest", "fail")}
        sent += len(retest - slow_nodes)
        nodes += len(f.nodes)
        for (x, g), _f in f.gpu_slow.items():
            slow += 1
            slow_sent += a.nodes[x]["gpus"][str(g)]["burn"]["verdict"] in ("retest", "fail")
    assert sent <= 0.02 * nodes
    assert slow_sent == slow


def test_the_fast_gpu_line_reader_gives_the_full_readers_record_and_leaves_bad_lines_to_it(monkeypatch):
    """records._fast_gpu (the common GPU line without a frozen dataclass's
    per-field setattr) makes the very record the full checks make, on the
    lines the run's own GPU reader writes; a line it does not take (a bad
    one) still gets the full path's error."""
    from slurmqual.burnin import records

    f = fleet("student-t", 0.03, nodes=16)
    f.failed = 0.2  # some runs failed: ok false lines, no value
    raw = [dict(d, retest=1) if i % 3 == 0 else d for i, d in
           enumerate(runsim.gpu_tool_lines(f, "gpu_burn", list(f.nodes), 0, "", random.Random(5))
                     + runsim.gpu_tool_lines(f, "nvbandwidth", list(f.nodes), None, "", random.Random(6)))]
    raw[1] = dict(raw[1], gpu_model="  NVIDIA H100 80GB HBM3 ", serial="", pci=None)
    raw[2] = dict(raw[2], task="7", unit="")
    fast = [records.Measurement.from_dict(d) for d in raw]
    taken = sum(records._fast_gpu(records.GpuMeasurement, d) is not None for d in raw)
    monkeypatch.setattr(records, "_fast_gpu", lambda cls, d: None)
    full = [records.Measurement.from_dict(d) for d in raw]
    assert fast == full and [vars(m) for m in fast] == [vars(m) for m in full]
    assert 0 < taken < len(raw)  # the failed runs' lines took the full path
    monkeypatch.undo()
    good = next(d for d in raw if d.get("value") is not None)
    for bad, error in [({"value": float("nan")}, "'value' must be"), ({"value": 2e7}, "'value' must be"),
                       ({"gpu": 1024}, "'gpu' must be"), ({"test": "a:b"}, "'test' must be"),
                       ({"errors": -1}, "'errors' must be"), ({"serial": 5}, "'serial' must be"),
                       ({"task": "x"}, "'task' must be"), ({"nodes": ["a b"]}, "(?i)node"), ({"ok": 1}, "'ok' must be")]:
        with pytest.raises(ValueError, match=error):
            records.Measurement.from_dict(dict(good, **bad))
