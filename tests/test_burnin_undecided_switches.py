"""Retests one switch question explains go to the next round, whatever the
retest budget, and the blast-radius guard does not count them.

The plan pairs a unit's nodes inside their unit and with one other unit
(groups hold two switches). When one rail leaf's uplinks are slow, every
pair between those two units reads slow on that rail and the pairs inside
each unit read fine: either leaf's uplinks explain it, and only pairs with a
third unit tell which (components: slow pairs that all lead to one other
switch name neither). The 32 nodes stayed `retest`, past the 5% budget,
and deciding them would leave 32 below the line on one key: the guard held
the run in round 0, before any round could tell ("H leaf uplinks slow",
bench_components_sim.py --only heldout, seed base 7001: 13 of 30 fleets).
The same with a leaf at 0.88 whose unit the plan paired only inside itself:
its pairs below the line, not clearly yet (7019).

The fleets are bench/runsim.py's (the issue 22 generator), played with the
run's own code: submit, the tasks' planned pairs, the analysis job and its
retest rounds; the unit checks read the first round those runs measured."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge import topology  # noqa: E402
from slurmqual.burnin.judge.analyze import analyze  # noqa: E402
from slurmqual.burnin.judge.components import attribute  # noqa: E402
from slurmqual.burnin.judge.plan import RoundState  # noqa: E402
from slurmqual.burnin.records import Params, from_dicts  # noqa: E402

RAIL = "mlx5_3"
KEY = f"ib_write_bw:rail:{RAIL}"


def _uplinks(topo_kind: str = "map", whole_node: bool = True) -> runsim.Fabric:
    """96 nodes x 4 rails in six units of 16; su2's rail-3 leaf's uplinks at 0.66."""
    f = runsim.rail_fabric(96, 4, 16)
    f.uplinks["su2-rail3"] = 0.66
    f.topo_kind, f.whole_node = topo_kind, whole_node
    return f


def _leaf_088() -> runsim.Fabric:
    """48 nodes x 4 rails in three units: the third unit's tasks pair it only
    inside itself; its rail-2 leaf at 0.88 (every path through it)."""
    f = runsim.rail_fabric(48, 4, 16)
    f.switch["su2-rail2"] = 0.88
    f.shape = "student-t"
    return f


@pytest.mark.parametrize("topo_kind,whole_node,rails", [("map", True, True), ("conf", True, False),
                                                         ("map", True, False), ("map", False, True)])
def test_slow_uplinks_name_their_leaf_after_a_round_and_drain_nobody(topo_kind, whole_node, rails):
    f = _uplinks(topo_kind, whole_node)
    run = runsim.play(f, 7001, rails)
    a = run.analysis
    assert not a.guard_tripped, a.problems
    assert not run.drained
    assert run.rounds >= 1                           # a round with a third unit told which leaf
    assert a.retest and a.retest.get("final", True)
    assert {v["verdict"] for v in a.nodes.values()} == {"pass"}
    named = set(a.suspect_switches)
    slow = {"su2"} if topo_kind == "conf" else {f"su2-rail{i}" for i in range(4)} if not rails else {"su2-rail3"}
    assert named and named <= slow, named             # never su3's leaf, the other end of the slow pairs


def test_the_first_round_names_the_two_leaves_as_one_question():
    """On the first round's rail key: no switch found, the pair of leaves
    reported with the nodes of the slow pairs between them."""
    f = _uplinks()
    run = runsim.play(f, 7001)
    ms = [m for m in from_dicts(run.first) if m.key == KEY]
    topo = topology.parse(topology.write_csv(f.map_rows()), "fabric.csv")
    between: list = []
    _out, found, _g = attribute(KEY, ms, topo.leaves(RAIL).get, Params(), between=between)
    assert not found
    assert [b.switches for b in between] == [("su2-rail3", "su3-rail3")]
    assert between[0].factor < 0.75
    assert {f.su[n] for n in between[0].nodes} == {2, 3} and len(between[0].nodes) == 32


def test_a_slow_spine_plane_is_no_one_question():
    """Every pair between units slow on one rail (its spine plane): each
    group's two units look alike, so no single question is open and the
    guard keeps its count (the spine is fleet-wide, not one switch)."""
    f = runsim.rail_fabric(96, 4, 16)
    f.spine[RAIL] = 0.66
    run = runsim.play(f, 7001)
    ms = [m for m in from_dicts(run.first) if m.key == KEY]
    topo = topology.parse(topology.write_csv(f.map_rows()), "fabric.csv")
    between: list = []
    attribute(KEY, ms, topo.leaves(RAIL).get, Params(), between=between)
    assert between == []


@pytest.mark.parametrize("last", [False, True])
def test_the_question_is_left_to_a_round_only_while_one_is_left(last):
    """The first round's measurements judged as the analysis job judges them:
    with rounds left, the 32 nodes stay `retest` (past the budget of 4) and
    the guard does not trip; in the last round nothing is left to tell, and
    the guard holds the run as before (no drain either way)."""
    f = _uplinks()
    run = runsim.play(f, 7001)
    topo = topology.parse(topology.write_csv(f.map_rows()), "fabric.csv")
    a = analyze(from_dicts(run.first), list(f.nodes), Params(), topology=topo, rounds=RoundState(last=last))
    retest = sorted(n for n, v in a.nodes.items() if v["verdict"] == "retest")
    assert not [n for n, v in a.nodes.items() if v["verdict"] == "fail"]
    if last:
        assert a.guard_tripped
    else:
        assert not a.guard_tripped, a.problems
        assert len(retest) == 32 and {f.su[n] for n in retest} == {2, 3}
        assert any("su2-rail3 and su3-rail3" in p for p in a.problems)
        assert {n for rnd in a.retest_plan for pair in rnd for n in pair} >= set(retest)


def test_a_leaf_at_088_paired_inside_its_unit_is_retested_and_named():
    f = _leaf_088()
    run = runsim.play(f, 7019)
    a = run.analysis
    assert not a.guard_tripped, a.problems
    assert not run.drained
    assert run.rounds >= 1
    assert "su2-rail2" in a.suspect_switches
    assert set(a.suspect_switches) <= {"su2-rail2"}
    assert {v["verdict"] for v in a.nodes.values()} == {"pass"}
