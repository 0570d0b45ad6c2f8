"""burnin.rails listing some of the rails (the others carry storage, or a
site tests a few): a slow rail leaf on a rail the per-rail tests never
cross shows on the whole-node pairs alone, every node of its unit low
there and fine on each rail tested. The whole-node key is searched by the
units of the untested rails' leaves, after the tested rails' switches are
divided out of it; a unit found slow names its untested rails' leaves and
none of its nodes is drained. Found by the held-out sweep
(bench_components_sim.py --only heldout, "H3 leaf on an untested rail":
the guard tripped in every fleet, 17 of 64 nodes 'would be drained').

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


def _fleet(slow: str) -> runsim.Fabric:
    f = runsim.rail_fabric(96, 4, 16)      # 6 scalable units of 16 nodes, 4 rails
    f.rail_subset = ["mlx5_0", "mlx5_1"]   # burnin.rails: two of the four
    f.switch[slow] = 0.78
    f.nic[("gpu00070", "mlx5_1")] = 0.7    # a bad NIC on a tested rail, unit 4
    return f


@pytest.fixture(scope="module")
def untested():
    f = _fleet("su2-rail3")                # rail 3 is not in burnin.rails
    return f, runsim.play(f, 5, True)


@pytest.fixture(scope="module")
def tested():
    f = _fleet("su2-rail1")                # rail 1 is
    return f, runsim.play(f, 5, True)


def test_no_node_behind_a_leaf_of_an_untested_rail_is_drained(untested):
    f, run = untested
    behind = {x for x in f.nodes if f.su[x] == 2}
    assert not behind & set(run.drained)
    assert not [x for x in behind if run.analysis.nodes[x]["verdict"] == "fail"]
    assert not run.analysis.guard_tripped


def test_the_units_untested_leaves_are_named_not_its_tested_ones(untested):
    _f, run = untested
    assert set(run.analysis.suspect_switches) == {"su2-rail2", "su2-rail3"}
    assert set(run.analysis.nodes["gpu00040"]["behind_suspect_switch"]) == {"su2-rail2", "su2-rail3"}


def test_the_bad_nic_on_a_tested_rail_is_still_drained_by_name(untested):
    _f, run = untested
    assert run.drained.get("gpu00070") == ["mlx5_1"]


def test_a_slow_leaf_of_a_tested_rail_names_that_leaf_alone(tested):
    """Its unit's whole-node pairs are slow too: divided out before the
    untested rails' units are searched, they name no untested leaf."""
    f, run = tested
    assert set(run.analysis.suspect_switches) == {"su2-rail1"}
    assert not {x for x in f.nodes if f.su[x] == 2} & set(run.drained)
    assert run.drained.get("gpu00070") == ["mlx5_1"]


def test_units_of_the_untested_rails_leaves():
    f = runsim.rail_fabric(8, 3, 4)
    topo = topology.parse_csv(topology.write_csv(f.map_rows()))
    unit, leaves = whole_node_units(topo, rails_tested={"mlx5_0"})
    assert unit["gpu00001"] == unit["gpu00003"] != unit["gpu00004"]
    assert sorted(leaves[unit["gpu00005"]]) == ["su1-rail1", "su1-rail2"]
    assert whole_node_units(topo, rails_tested={"mlx5_0", "mlx5_1", "mlx5_2"}) == ({}, {})
    assert whole_node_units(topo, rails_tested=set()) == whole_node_units(topo, rails_tested=False)


def test_the_bench_truth_lets_the_unit_be_named_and_asks_for_no_switch(untested):
    """runsim.truth: which untested rail's leaf is slow, whole-node pairs
    cannot tell; the unit's leaves may be named, none must be."""
    f, run = untested
    t = runsim.truth(f, run.first)
    assert {"su2-rail2", "su2-rail3"} <= t.slow_switches
    assert not t.must_switch
    assert ("gpu00070", "mlx5_1") in t.must_nic
