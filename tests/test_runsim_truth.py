"""The issue 22 generator's ground truth (bench/runsim.py truth()), decided
from the fabric and who met whom before any analysis: what it holds a run
to must be something a measurement can show."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (the issue 22 generator)


def first_round(f: runsim.Fabric) -> list[dict]:
    """Every node paired with every other on the whole-node key and each rail (valid lines)."""
    out = []
    for i, a in enumerate(f.nodes):
        for b in f.nodes[i + 1:]:
            out.append({"nodes": [a, b], "ok": True, "busbw": 1.0})
            out += [{"nodes": [a, b], "ok": True, "busbw": 1.0, "rail": r} for r in f.rails]
    return out


def test_a_nic_behind_its_own_slower_or_as_slow_leaf_is_not_held_to_never_pass():
    # 8 nodes, 2 rails, scalable units of 4: su0-rail1 at 0.82 is the rail-1 leaf of gpu00000-3.
    f = runsim.rail_fabric(8, 2, 4)
    f.switch["su0-rail1"] = 0.82
    f.nic[("gpu00000", "mlx5_1")] = 0.8   # 0.98 of its leaf-mates: nothing shows it
    f.nic[("gpu00001", "mlx5_1")] = 0.5   # 0.61 of its leaf-mates: it shows
    f.nic[("gpu00004", "mlx5_1")] = 0.8   # behind a healthy leaf: it shows
    t = runsim.truth(f, first_round(f))
    assert "gpu00000" not in t.never_pass
    assert {"gpu00001", "gpu00004"} <= t.never_pass
    assert "gpu00000" not in t.must_fail  # its leaf is slow: no clean partner on that rail


def test_a_gpu_15_percent_slow_with_a_first_round_number_must_be_drained_and_named():
    f = runsim.rail_fabric(8, 2, 4)
    f.gpus, f.gpu_noise = 8, 0.02
    f.gpu_slow[("gpu00002", 5)] = 0.85
    f.gpu_slow[("gpu00003", 1)] = 0.85
    first = first_round(f) + [{"nodes": ["gpu00002"], "gpu": 5, "test": "burn", "ok": True, "value": 297.5},
                              {"nodes": ["gpu00003"], "gpu": 1, "test": "burn", "ok": False, "value": None}]
    t = runsim.truth(f, first)
    assert t.must_gpu == {("gpu00002", 5)} and "gpu00002" in t.must_fail
    assert "gpu00003" not in t.must_fail  # its run failed: no number, nothing to judge it by
    assert {"gpu00002", "gpu00003"} <= t.never_pass and not {"gpu00002", "gpu00003"} & t.healthy
