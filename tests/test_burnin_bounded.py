"""A pair through a slow switch bounds a node, it does not show it healthy
(issue 22: no healthy node behind a slow switch drained, no slow node
hidden behind one either).

The fleets are bench/runsim.py's (the issue 22 benchmarks' generator,
written apart from the analysis): a path is as fast as its slowest part,
so a node at 0.79 paired through a leaf at 0.73 reads 0.73, and the
switch's factor divided out of that pair (the analysis' product model)
reads 1.0. The run is played with the run's own code (submit, the tasks'
planned pairs, the analysis job, its retest rounds), and judged by
runsim's ground truth, decided from the fabric before any analysis. The
last test is the other side, on tests/fleet.py's product-model fabric: what
a pair through a slow switch read is a floor under the node."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge import topology  # noqa: E402
from slurmqual.burnin.judge.analyze import analyze  # noqa: E402
from slurmqual.burnin.judge.components import attribute  # noqa: E402
from slurmqual.burnin.judge.fabricmodel import Paths, bounded_ends, explain_switches  # noqa: E402
from slurmqual.burnin.judge.plan import next_round  # noqa: E402
from slurmqual.burnin.records import Measurement, Params, split_key  # noqa: E402

WHOLE = "all_reduce:pair"
SLOW = {"su1-rail0": 0.73, "su1-rail3": 0.77}  # two rail leaves of scalable unit 1


def _fleet():
    """128 nodes x 4 rails, 16 per scalable unit, two of unit 1's rail leaves
    slow. The first rounds pair each node of unit 0 with two nodes of unit 1:
    its whole-node pairs and its rail-3 pairs run through the slow leaves."""
    f = runsim.rail_fabric(128, 4, 16)
    f.switch.update(SLOW)
    return f


def _partners_in_su1(f, group_rounds) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for g in group_rounds:
        for rnd in g:
            for a, b in rnd:
                for x, y in ((a, b), (b, a)):
                    if f.su[x] != 1 and f.su[y] == 1:
                        out.setdefault(x, set()).add(y)
    return out


@pytest.fixture(scope="module")
def played():
    """A GPU-side node at 0.79 (x) and a NIC at 0.8 on rail 3 (y), each with
    two of its three first-round partners behind the slow leaves, the
    faults placed once the plan is known (runsim's setup hook)."""
    f = _fleet()
    chosen: dict[str, str] = {}

    def setup(fab, group_rounds, _rng):
        behind = _partners_in_su1(fab, group_rounds)
        x, y = sorted(n for n, qs in behind.items() if len(qs) >= 2)[:2]
        fab.gpu[x] = 0.79
        fab.nic[(y, "mlx5_3")] = 0.8
        chosen.update(x=x, y=y)

    run = runsim.play(f, 7, True, setup)
    return f, run, chosen


def _first_analysis(f, run):
    topo = topology.parse_csv(topology.write_csv(f.map_rows()))
    ms = [Measurement.from_dict(d) for d in run.first]
    return analyze(ms, list(f.nodes), topology=topo), ms, topo


def test_a_gpu_side_slow_node_whose_partners_sit_behind_slow_leaves_is_drained(played):
    """Before: its two pairs through the slow leaves, divided by their 0.72,
    read 1.0 and carried its level over the line; it passed the whole-node
    key and ended `untested`. Now its level comes from its switch-free
    pairs: a retest round gives it partners away from the slow leaves and
    it is drained on the whole-node key."""
    f, run, chosen = played
    x = chosen["x"]
    v = run.analysis.nodes[x]
    assert x in run.drained and v["verdict"] == "fail" and v["key"] == WHOLE
    assert v["failed_nics"] == []
    r = runsim.judge(runsim.truth(f, run.first), run)
    assert r["right"], r["why"]
    assert set(run.drained) == {chosen["x"], chosen["y"]}  # nobody behind the slow leaves
    assert set(SLOW) <= set(run.analysis.suspect_switches)


def test_a_nic_whose_rail_partners_sit_behind_a_slow_leaf_is_named(played):
    """y's mlx5_3 at 0.8: two of its rail-3 partners sit behind su1-rail3 at
    0.77, which reads 0.77 and divided by it 1.0 (the NIC hidden); its one
    clean partner reads 0.8. It is drained naming the NIC."""
    _f, run, chosen = played
    y = chosen["y"]
    assert run.drained[y] == ["mlx5_3"]
    assert run.analysis.nodes[y]["failed_nics"] == ["mlx5_3"]


def test_the_first_analysis_passes_no_node_on_pairs_bounded_by_a_slow_switch(played):
    """The first round alone: x has one switch-free pair (0.79) and two
    through the slow leaves; it is `retest` on the whole-node key, its
    score is its switch-free pair's, and the plan gives it partners away
    from the slow leaves. The nodes behind the leaves still pass (their
    every pair goes through their own leaf: it is divided out for them)."""
    f, run, chosen = played
    a, _ms, _topo = _first_analysis(f, run)
    x = chosen["x"]
    kv = a.nodes[x]["keys"][WHOLE]
    assert kv["verdict"] == "retest"
    assert kv["score"] < 0.85 * a.median[WHOLE]
    assert a.keys[WHOLE]["bounded"] >= 1  # the nodes judged without such pairs, counted per key
    behind = [n for n in f.nodes if f.su[n] == 1]
    assert all(a.nodes[n]["verdict"] == "pass" for n in behind)
    mine = [q for rnd in a.retest_plan for p in rnd if x in p for q in p if q != x]
    assert len(mine) >= 2 and not any(a.nodes[q].get("behind_suspect_switch") for q in mine)


def test_explain_switches_says_which_pairs_it_divided(played):
    """explain_switches divides the rail leaves found on their rail keys out
    of the whole-node key and records each pair it divided with the
    switches and factors; bounded_ends gives x (not behind them) its two
    partners behind them, and nobody behind a slow leaf its own pairs."""
    f, run, chosen = played
    _a, ms, topo = _first_analysis(f, run)
    p = Params()
    paths = Paths(topo)
    by_key: dict[str, list[Measurement]] = {}
    for m in ms:
        if m.ok and len(m.nodes) == 2:
            by_key.setdefault(m.key, []).append(m)
    net = {k: split_key(k)[2] if split_key(k)[1] == "rail" else None for k in by_key}
    findings = []
    for key, rail in sorted(net.items()):
        by_key[key], found, _g = attribute(key, by_key[key], lambda n, nic=rail: topo.leaf_of(n, nic), p)
        findings += found
    more, changed, divided = explain_switches(by_key, findings, paths, p, net)
    assert WHOLE in changed and {m.switch for m in more if m.key == WHOLE} == set(SLOW)
    x = chosen["x"]
    mine = {pair: hit for pair, hit in divided[WHOLE].items() if x in pair}
    assert len(mine) == 2 and all(set(hit) <= set(SLOW) and min(hit.values()) < 0.8 for hit in mine.values())
    bounded = bounded_ends(divided[WHOLE], paths, None, p.threshold)
    assert set(bounded[x]) == {q for pair in mine for q in pair if q != x}
    assert all(f == min(mine[tuple(sorted((x, q)))].values()) for q, f in bounded[x].items())
    assert not any(f.su[n] == 1 for n in bounded)


def test_a_retest_partner_behind_a_slow_switch_only_where_no_other_is_free(played):
    """next_round, on the first analysis' own verdicts: x's first partners
    in name order sit behind the slow leaves (unit 1); the plan takes the
    passing nodes of unit 5 instead, and those of unit 1 only when they are
    all that is left."""
    f, run, chosen = played
    a, _ms, _topo = _first_analysis(f, run)
    x = chosen["x"]
    su1 = [n for n in f.nodes if f.su[n] == 1 and a.nodes[n]["verdict"] == "pass"]
    su5 = [n for n in f.nodes if f.su[n] == 5 and a.nodes[n]["verdict"] == "pass"]
    assert all(a.nodes[n].get("behind_suspect_switch") for n in su1)
    nodes = {n: a.nodes[n] for n in [x] + su1 + su5}
    partners = {q for rnd in next_round(nodes, [], {}) for pair in rnd for q in pair if q != x}
    assert partners and partners <= set(su5)
    only = {n: a.nodes[n] for n in [x] + su1}
    partners = {q for rnd in next_round(only, [], {}) for pair in rnd for q in pair if q != x}
    assert partners and partners <= set(su1)


def test_two_slow_links_and_a_pair_through_a_slow_leaf_are_no_slow_node():
    """tests/fleet.py's fabric (the stand-ins' model) with Slurm's node
    leaves, as tests/test_slurm_burnin_components.py runs it: n7's first
    partners are n8 and n3 over links at 0.7, and n4 behind leaf2 at 0.8.
    Left out of n7's level, the pair with n4 would leave two pairs at 0.7:
    a slow node. What it read, 0.8 with the leaf not divided out, says n7
    is at least that fast: the two pairs are links, n7 is `retest` (new
    partners decide it) and no node is drained."""
    from fleet import RailFabric, run_rails
    from slurmqual.burnin.judge.plan import groups, rounds
    from slurmqual.burnin.judge.topology import Topology

    nodes = [f"n{i}" for i in range(1, 9)]
    rails = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    leaf_of = {n: s for s, ns in {"leaf1": nodes[:3], "leaf2": nodes[3:6], "leaf3": nodes[6:]}.items() for n in ns}
    plan = [rounds(g, 3, leaf_of) for g in groups(nodes, 8, leaf_of)]
    partners = [q for rnd in plan[0] for p in rnd for q in p if "n7" in p and q != "n7"]
    assert partners == ["n8", "n3", "n4"]
    fabric = RailFabric(rails, {(n, r): leaf_of[n] for n in nodes for r in rails}, switches={"leaf2": 0.8},
                        link={(frozenset(("n7", q)), r): 0.7 for q in partners[:2] for r in rails})
    a = analyze(run_rails(plan, fabric, whole_node=True), nodes, topology=Topology("sim", node_switch=leaf_of))
    assert a.suspect_switches == ["leaf2"] and a.drain == []
    assert a.nodes["n7"]["verdict"] == "retest" and a.nodes["n7"]["keys"][WHOLE]["verdict"] == "retest"
    assert {n for n, v in a.nodes.items() if v["verdict"] != "pass"} == {"n7"}
    assert sorted(x[:2] for x in a.suspect_links if len(x) == 2) == [["n3", "n7"], ["n7", "n8"]]
    assert a.keys[WHOLE]["bounded"] >= 1
