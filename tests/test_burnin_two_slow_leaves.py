"""Two slow leaves on one rail: pairs between their nodes run through both.
A path is as fast as its slowest part, so such a pair reads the slower
leaf's level; the switch search (components._Search.divide) divided it by
both factors, put those pairs far above every healthy pair, and the key was
judged "split in two levels" against that top: healthy nodes failed or the
guard held the run. Found by the held-out family "H two leaves, same rail"
(bench_components_sim.py --only heldout, base 7001 seed 7010: 256 nodes,
topology.conf, guard tripped with 241 healthy nodes `retest`; a 96-node
fleet with the fabric map and whole-node tests only failed its 32 healthy
nodes, only the guard kept them in service).

The fleet is bench/runsim.py's (the issue 22 generator), played with the
run's own code: submit, the tasks' planned pairs, the analysis job and its
retest rounds."""

from __future__ import annotations

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge.components import attribute  # noqa: E402
from slurmqual.burnin.judge.topology import Topology  # noqa: E402
from slurmqual.burnin.records import Params, from_dicts  # noqa: E402


def _fleet(topo_kind: str) -> runsim.Fabric:
    f = runsim.rail_fabric(128, 4, 16)            # 8 scalable units of 16 nodes, 4 rails
    f.switch["su6-rail2"] = 0.79
    f.switch["su7-rail2"] = 0.76
    f.topo_kind = topo_kind
    return f


@pytest.mark.parametrize("topo_kind,rails", [("conf", True), ("map", False)])
def test_two_slow_leaves_on_one_rail_drain_nobody_and_hold_nothing(topo_kind, rails):
    f = _fleet(topo_kind)
    run = runsim.play(f, 7, rails)
    a = run.analysis
    assert not run.drained
    assert not a.guard_tripped, a.problems
    assert not [x for x, v in a.nodes.items() if v["verdict"] == "fail"]
    want = {"su6", "su7"} if topo_kind == "conf" else {"su6-rail2", "su7-rail2"}
    assert want <= set(a.suspect_switches)


def test_a_pair_through_two_slow_switches_is_divided_once():
    """On the rail key itself: after the search, the pairs between the two
    leaves' nodes read where healthy pairs do, not above them."""
    f = _fleet("map")
    raw = []
    rng = random.Random(3)
    nodes = f.nodes
    for i, a in enumerate(nodes):                 # every node meets four others, across units too
        for d in (1, 17, 33, 49):
            b = nodes[(i + d) % len(nodes)]
            v = f.base_rail * f.rail_path(a, b, "mlx5_2") * f.draw(rng, (a, b))
            raw.append({"nodes": [a, b], "busbw": round(v, 2), "size": 1 << 30, "test": "ib_write_bw",
                        "rail": "mlx5_2", "ok": True, "task": 0, "round": 0})
    ms = list(from_dicts(raw))
    topo = Topology("map", rail_switch={k: v for k, v in f.leaf.items()})
    out, found, _g = attribute("ib_write_bw:rail:mlx5_2", ms, lambda n: topo.leaf_of(n, "mlx5_2"), Params())
    assert {x.switch for x in found} == {"su6-rail2", "su7-rail2"}
    both = [m.busbw for m in out if {f.su[m.nodes[0]], f.su[m.nodes[1]]} == {6, 7}]
    healthy = sorted(m.busbw for m in out if not {f.su[m.nodes[0]], f.su[m.nodes[1]]} & {6, 7})
    assert both
    assert max(both) < healthy[-1] * 1.05
