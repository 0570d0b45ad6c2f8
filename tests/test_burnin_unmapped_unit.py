"""A fabric map that omits a whole scalable unit (added after `slurmqual
fabric map` ran), a rail leaf of that unit slow: the switch search met a
mapped leaf whose slow pairs all led to nodes the map does not place, took
"no switch" for the one other switch they lead to, and the analysis job
died on it (KeyError: None in components._Search.undecided), leaving the
run without verdicts. Found by the held-out family "H4 map omits a unit"
(bench_components_sim.py --only heldout, seed base 7001, scenario 7001).
Nodes the topology does not place are no switch to retest against: such a
leaf records no lone neighbour.

The fleets are bench/runsim.py's (the issue 22 generator), played with the
run's own code: submit, the tasks' planned pairs, the analysis job and its
retest rounds."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import bench_components_sim  # noqa: E402
import runsim  # noqa: E402  (bench/runsim.py)


def test_the_held_out_scenario_that_crashed_the_analysis_plays_to_a_final_state():
    f, run = runsim.replay(bench_components_sim.HELDOUT, "H4 map omits a unit", 7001, 7001)
    a = run.analysis
    unplaced = {x for x in f.nodes if f.su[x] == 3}
    assert f.unmapped == unplaced and "su3-rail2" in f.switch   # the map omits unit 3, its rail-2 leaf slow
    assert a.retest is None or a.retest.get("final", True)      # the run ended decided
    assert not {x for x in f.nodes if f.healthy(x)} & set(run.drained)
    # what the run cannot place it does not name, and the admin is told which nodes the map lacks
    assert "su3-rail2" not in a.suspect_switches
    assert a.guard_tripped or any("does not place" in p for p in a.problems)


def test_a_mapped_leaf_whose_slow_pairs_lead_only_to_unplaced_nodes_is_judged_without_error():
    f = runsim.rail_fabric(64, 4, 16)                           # 4 units of 16 nodes, 4 rails
    f.unmapped = {x for x in f.nodes if f.su[x] == 2}
    f.switch["su2-rail1"] = 0.75
    for seed in (1, 2, 3):
        run = runsim.play(f, seed, True)
        assert not {x for x in f.nodes if f.healthy(x)} & set(run.drained)
