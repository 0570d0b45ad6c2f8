"""The level healthy nodes run at (pairs.top_level: the median of the nodes'
best pairs near the top) counts each pair once. A lucky pair is the best
pair of both its ends: counted twice, two of them made a quarter of a
16-node fleet's best pairs and set the level 17% above the healthy one.

Found by bench_burnin_sim.py --only new --family "small fleets 10-15% 0.85"
--scenarios 300 --seed-base 5001, seed 5159: 16 nodes in two units of 8,
whole-node tests only with the fabric map, student-t 2% noise, two nodes at
0.85 in one unit. Two pairs read 1.17 and 1.19 of the level; every healthy
pair then read 0.85 of the top level, the unit search (fabricmodel,
whole-node units) found the slow nodes' unit "slow", named its four rail
leaves and the guard held every drain. The fleet is bench/runsim.py's (the
issue 22 generator), played with the run's own code."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import bench_burnin_sim  # noqa: E402  (bench/bench_burnin_sim.py: the small fleets family)
import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge.pairs import link_values, top_level  # noqa: E402
from slurmqual.burnin.records import from_dicts  # noqa: E402


@pytest.fixture(scope="module")
def played():
    return runsim.replay(bench_burnin_sim.FAMILIES, "small fleets 10-15% 0.85", 5001, 5159)


def test_two_lucky_pairs_do_not_set_a_small_fleets_level(played):
    fabric, run = played
    whole = [m for m in from_dicts(run.first) if len(m.nodes) == 2 and m.ok]
    g = link_values(whole)
    lucky = [v for v in g.value.values() if v > 1.15 * fabric.base_pair]
    assert len(lucky) == 2  # the scenario's premise: two pairs 15% and more above the level
    assert sum(1 for n, v in g.best.items() if v in lucky) == 4  # the best pair of a quarter of the nodes
    assert abs(top_level(g, set(), 0.9, pairs_once=True) / fabric.base_pair - 1) < 0.05


def test_two_slow_nodes_of_one_unit_are_drained_not_their_unit_named(played):
    fabric, run = played
    slow = {x for x in fabric.nodes if not fabric.healthy(x)}
    assert len({fabric.su[x] for x in slow}) == 1 and len(slow) == 2
    assert not run.analysis.guard_tripped
    assert run.analysis.suspect_switches == []
    assert set(run.drained) == slow


def test_a_pair_counted_once_even_when_it_is_both_ends_best():
    # 16 nodes in a ring of pairs at the level (400 +- 1%), two lucky pairs
    # across it at 480: counted for both ends they are a quarter of the
    # nodes' best pairs and the level read 480
    from slurmqual.burnin.records import Measurement

    nodes = [f"n{i:02d}" for i in range(16)]
    ms = [Measurement((nodes[i], nodes[(i + 1) % 16]), 400.0 + (i * 7) % 9 - 4, 1, "all_reduce") for i in range(16)]
    ms += [Measurement(("n00", "n08"), 480.0, 1, "all_reduce"), Measurement(("n04", "n12"), 481.0, 1, "all_reduce")]
    g = link_values(ms)
    values, _nodes = g.ranked_best(pairs_once=True)
    assert values.count(480.0) == 1 and values.count(481.0) == 1
    assert 396 <= top_level(g, set(), 0.9, pairs_once=True) <= 404
