"""A slow rail leaf in a run with no topology at all (no fabric map, no
topology.conf): nothing names the switch, but many nodes failing the same
one rail alone, far more than fail any other rail, are one shared part, not
that many NICs at once. The run drains none of them and says so
(analyze.unmapped_shared_rail in the blast-radius guard); NICs failing
independently, spread over the rails, are still drained. Found by the
held-out sweep ("H leaf, no topology": 160 healthy nodes drained in 30
fleets, every 2,048-node one draining its unit's 32).

The fleets are bench/runsim.py's (the issue 22 generator), played with the
run's own code: submit, the tasks' planned pairs, the analysis job and its
retest rounds."""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge.analyze import SHARED_RAIL_MIN, unmapped_shared_rail  # noqa: E402



def test_a_slow_leaf_with_no_topology_drains_none_of_its_nodes():
    f = runsim.rail_fabric(256, 4, 16)      # 16 scalable units of 16 nodes: the leaf's nodes are 6% of the fleet
    f.topo_kind = "none"
    f.switch["su5-rail2"] = 0.75
    run = runsim.play(f, 11, True)
    behind = {x for x in f.nodes if f.su[x] == 5}
    assert not behind & set(run.drained)
    assert run.analysis.guard_tripped
    assert any("rail mlx5_2 alone" in p and "fabric map" in p for p in run.analysis.problems)


def test_the_same_leaf_with_its_map_is_named_and_the_guard_stays_open():
    f = runsim.rail_fabric(256, 4, 16)
    f.switch["su5-rail2"] = 0.75
    run = runsim.play(f, 11, True)
    assert "su5-rail2" in run.analysis.suspect_switches and not run.analysis.guard_tripped
    assert not {x for x in f.nodes if f.su[x] == 5} & set(run.drained)


def test_nics_failing_on_every_rail_are_independent_faults_and_drained():
    f = runsim.rail_fabric(256, 4, 16)
    f.topo_kind = "none"
    rng = random.Random(3)
    chosen = runsim.bad_nics(f, rng, 12, (0.6, 0.7))   # about 3 per rail
    run = runsim.play(f, 12, True)
    assert not run.analysis.guard_tripped
    assert set(chosen) <= set(run.drained)


def test_the_rule_counts_one_rail_alone_and_weighs_the_other_rails():
    nodes = {f"n{i}": {"verdict": "fail", "failed_nics": ["mlx5_1"]} for i in range(SHARED_RAIL_MIN)}
    rails = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}
    assert unmapped_shared_rail(nodes, sorted(nodes), rails, None) == ("mlx5_1", SHARED_RAIL_MIN, 0)
    nodes["n0"]["failed_nics"] = ["mlx5_1", "mlx5_2"]     # slow on two rails: not this rail alone
    assert unmapped_shared_rail(nodes, sorted(nodes), rails, None) is None
