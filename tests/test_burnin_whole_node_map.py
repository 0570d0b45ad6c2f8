"""Whole-node tests only with a per-rail fabric map (burnin.rails left at
its default, [], and burnin.topology the CSV `slurmqual fabric map`
writes): a slow rail leaf slows the whole-node pairs of every node behind
it, and no per-rail key is there to find it. The whole-node key is searched
by the nodes' units (the nodes sharing every rail leaf); a unit found slow
names its rail leaves (which rail, whole-node pairs cannot tell) and none
of its nodes is drained. Found by the held-out sweep (bench_components_sim.py
--only heldout, "H leaf, tests x topology": 32 healthy nodes drained in a
2,048-node fleet, the guard tripped in 32-96-node ones).

The fleet is bench/runsim.py's (the issue 22 generator), played with the
run's own code: submit, the tasks' planned pairs, the analysis job and its
retest rounds."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge import topology  # noqa: E402
from slurmqual.burnin.judge.fabricmodel import whole_node_units  # noqa: E402


@pytest.fixture(scope="module")
def played():
    f = runsim.rail_fabric(96, 4, 16)      # 6 scalable units of 16 nodes, 4 rails
    f.switch["su2-rail3"] = 0.78
    return f, runsim.play(f, 5, False)     # whole-node tests only


def test_no_node_behind_a_slow_rail_leaf_is_drained_on_whole_node_tests(played):
    f, run = played
    behind = {x for x in f.nodes if f.su[x] == 2}
    assert not behind & set(run.drained)
    assert not [x for x in behind if run.analysis.nodes[x]["verdict"] == "fail"]
    assert not run.analysis.guard_tripped


def test_the_units_rail_leaves_are_named_the_slow_one_among_them(played):
    _f, run = played
    assert "su2-rail3" in run.analysis.suspect_switches
    assert set(run.analysis.suspect_switches) == {f"su2-rail{r}" for r in range(4)}
    assert all(x.startswith("su2-") for x in run.analysis.nodes["gpu00040"]["behind_suspect_switch"])


def test_units_only_where_no_rail_is_tested_and_the_map_gives_no_node_leaves():
    f = runsim.rail_fabric(8, 2, 4)
    topo = topology.parse_csv(topology.write_csv(f.map_rows()))
    unit, leaves = whole_node_units(topo, rails_tested=False)
    assert unit["gpu00001"] == unit["gpu00003"] != unit["gpu00004"]
    assert sorted(leaves[unit["gpu00005"]]) == ["su1-rail0", "su1-rail1"]
    assert whole_node_units(topo, rails_tested=True) == ({}, {})
    conf = topology.parse_conf("SwitchName=s0 Nodes=gpu0000[0-3]\nSwitchName=s1 Nodes=gpu0000[4-7]\n")
    assert whole_node_units(conf, rails_tested=False) == ({}, {})
