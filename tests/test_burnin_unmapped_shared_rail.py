"""A slow rail leaf in a run with no topology at all (no fabric map, no
topology.conf): nothing names the switch, but many nodes failing the same
one rail alone, far more than fail any other rail, are one shared part, not
that many NICs at once. The run drains none of them and says so
(analyze.unmapped_shared_rail in the blast-radius guard); NICs failing
independently, spread over the rails, are still drained. Found by the
held-out sweep ("H leaf, no topology": 160 healthy nodes drained in 30
fleets, every 2,048-node one draining its unit's 32).

Session 5 (NT): retests count as well as fails (a slow leaf's nodes are
decided a few per round, and each round's drains are final: "H leaf, no
topology" 7013 drained 6 of 32 in round 0), and with whole-node tests only
nodes named one after another below the line together are held the same
way (analyze.unmapped_shared_block: 7023 drained all 32).

The fleets are bench/runsim.py's (the issue 22 generator), played with the
run's own code: submit, the tasks' planned pairs, the analysis job and its
retest rounds."""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge.analyze import SHARED_RAIL_MIN, unmapped_shared_block, unmapped_shared_rail  # noqa: E402
from slurmqual.burnin.judge.topology import Topology  # noqa: E402


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


def _rail_keys(low: dict[str, str], rails: list[str]) -> dict[str, dict]:
    """A node's rail keys as analyze() writes them (verdict and score per key)."""
    return {f"ib_write_bw:rail:{r}": {"verdict": low.get(r, "pass"), "score": 0.8 if r in low else 1.0} for r in rails}


def test_the_rule_counts_one_rail_alone_and_weighs_the_other_rails():
    rails = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    nodes = {f"n{i}": {"verdict": "fail", "keys": _rail_keys({"mlx5_1": "fail"}, rails)} for i in range(SHARED_RAIL_MIN)}
    assert unmapped_shared_rail(nodes, set(rails), None) == ("mlx5_1", SHARED_RAIL_MIN, 0)
    nodes["n0"]["keys"] = _rail_keys({"mlx5_1": "fail", "mlx5_2": "fail"}, rails)   # slow on two rails: not this rail alone
    assert unmapped_shared_rail(nodes, set(rails), None) is None
    nodes["n0"]["keys"] = _rail_keys({"mlx5_1": "retest"}, rails)   # not yet decided: still one of the group
    nodes["n0"]["verdict"] = "retest"
    assert unmapped_shared_rail(nodes, set(rails), None) == ("mlx5_1", SHARED_RAIL_MIN, 0)


def test_a_slow_leaf_decided_a_few_nodes_per_round_is_held_before_any_is_drained():
    # Student-t noise: round 0 decides a few of the leaf's 32 nodes (fail)
    # and leaves the rest retests; counting fails alone, those few were
    # drained in round 0 (6 here, before this rule) and the guard tripped
    # only once the rounds had decided the rest.
    f = runsim.rail_fabric(1024, 4, 32)
    f.topo_kind, f.shape, f.transient = "none", "student-t", 0.01
    f.switch["su9-rail3"] = 0.83
    run = runsim.play(f, 5, True)
    assert not {x for x in f.nodes if f.su[x] == 9} & set(run.drained)
    assert run.analysis.guard_tripped
    assert any("rail mlx5_3 alone" in p for p in run.analysis.problems)


def test_whole_node_tests_only_a_slow_leaf_with_no_topology_drains_none_of_its_nodes():
    # No rail key, no topology: the leaf's 32 nodes (6% of 512, under the
    # guard's 10%) read slow with every partner; they are named one after
    # another, as a unit's nodes are (all 32 were drained before).
    f = runsim.rail_fabric(512, 4, 32)
    f.topo_kind = "none"
    f.switch["su7-rail1"] = 0.8
    run = runsim.play(f, 5, False)
    assert not {x for x in f.nodes if f.su[x] == 7} & set(run.drained)
    assert run.analysis.guard_tripped
    assert any("gpu00224 .. gpu00255" in p and "whole-node key" in p and "topology" in p
               for p in run.analysis.problems)
    # The block as the guard read it, from that analysis: the leaf's 32 nodes.
    nodes = run.analysis.nodes
    key, block = unmapped_shared_block(nodes, list(f.nodes), None)
    assert key == "all_reduce:pair" and block == [f"gpu{i:05d}" for i in range(224, 256)]
    # A topology placing every fourth of them (a map missing the others)
    # leaves no 8 unplaced nodes one after another: not one shared part.
    placed = Topology("test", node_switch={f"gpu{i:05d}": "leaf7" for i in range(224, 256, 4)})
    assert unmapped_shared_block(nodes, list(f.nodes), placed) is None


def test_whole_node_tests_only_scattered_slow_nodes_are_still_drained():
    f = runsim.rail_fabric(512, 4, 32)
    f.topo_kind = "none"
    slow = runsim.slow_nodes(f, random.Random(4), 12, (0.6, 0.75))
    run = runsim.play(f, 6, False)
    assert not run.analysis.guard_tripped
    assert set(run.drained) == set(slow)
