"""Nodes behind a switch slower than the line (issue 22: a slow switch never
drains its nodes; a NIC slower than its own slow leaf is still found).

The fleet is bench/runsim.py's (the issue 22 benchmarks' generator, written
apart from the analysis): a path is as fast as its slowest part, so behind a
rail leaf at 0.72 a healthy node reads 0.72 on that rail, a NIC at 0.67
reads 0.67 and a NIC at 0.77 reads 0.72 like its neighbours. The run is
played with the run's own code (submit, the tasks' planned pairs, the
analysis job, its retest rounds) and judged by runsim's ground truth."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (bench/runsim.py)

LEAF = "su1-rail0"


@pytest.fixture(scope="module")
def played():
    """128 nodes x 4 rails, 16 per scalable unit; unit 1's rail-0 leaf at
    0.72; behind it gpu00020's mlx5_0 at 0.67 (below the leaf) and
    gpu00024's at 0.77 (above it: masked)."""
    f = runsim.rail_fabric(128, 4, 16)
    f.switch[LEAF] = 0.72
    f.nic[("gpu00020", "mlx5_0")] = 0.67
    f.nic[("gpu00024", "mlx5_0")] = 0.77
    run = runsim.play(f, 11, True)
    return f, run


def test_a_nic_below_its_slow_leaf_is_drained_naming_it(played):
    """With the leaf divided out gpu00020 reads 0.93 of the fleet, above the
    line; against the leaf's own nodes it is clearly slower than the leaf."""
    _f, run = played
    a = run.analysis
    assert LEAF in a.suspect_switches
    assert run.drained == {"gpu00020": ["mlx5_0"]}
    assert a.nodes["gpu00020"]["verdict"] == "fail" and a.nodes["gpu00020"]["failed_nics"] == ["mlx5_0"]


def test_the_leafs_other_nodes_stay_in_service_and_are_listed_behind_it(played):
    """No node at the leaf's level is drained for it; each is listed behind
    it, the masked NIC's node too (its requalification after the repair
    tests it)."""
    f, run = played
    a = run.analysis
    behind = [x for x in f.nodes if f.leaf[(x, "mlx5_0")] == LEAF and x != "gpu00020"]
    assert "gpu00024" in behind and len(behind) == 15
    assert all(a.nodes[x]["verdict"] == "pass" for x in behind)
    assert all(LEAF in a.nodes[x]["behind_suspect_switch"] for x in behind)


def test_the_ground_truth_counts_a_masked_nic_as_unseen(played):
    """runsim.truth: a NIC at or above its slow leaf's level (less 2 noise
    sd) is seen by no measurement and may pass; one below it never passes,
    and the played run is right by that truth."""
    f, run = played
    t = runsim.truth(f, run.first)
    assert "gpu00024" not in t.never_pass and "gpu00020" in t.never_pass
    assert runsim.seen_end(f, "gpu00024", "mlx5_0", f.noise) == 1.0
    assert runsim.seen_end(f, "gpu00020", "mlx5_0", f.noise) == 0.67
    assert runsim.judge(t, run)["right"]
