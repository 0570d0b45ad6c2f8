"""Heavy tails, transient hits and high noise (issue 22: links at 8% noise),
on measurements of the issue 22 generator (bench/runsim.py: student-t(3),
lognormal and gaussian noise, transient congestion x U(0.5, 0.9)), written
apart from the analysis: what the fleet's own healthy pairs show decides
whether a node's low pairs, a switch's or one link's value are noise.

The seeds are ones on which the analysis before the heavy-tail model
drained a healthy node, named a healthy leaf or a noise link, or held a
healthy fleet with its guard."""

from __future__ import annotations

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (the issue 22 generator)
from slurmqual.burnin.judge.analyze import analyze  # noqa: E402
from slurmqual.burnin.judge.components import attribute  # noqa: E402
from slurmqual.burnin.judge.pairs import judge_pairs, link_values, node_scores, transients  # noqa: E402
from slurmqual.burnin.judge.plan import rounds  # noqa: E402
from slurmqual.burnin.records import Measurement, Params  # noqa: E402


def fleet(n: int, shape: str, noise: float, transient: float, rails: int = 1, su: int = 32) -> runsim.Fabric:
    f = runsim.rail_fabric(n, rails, su)
    f.shape, f.noise, f.transient = shape, noise, transient
    return f


def rail_lines(f: runsim.Fabric, seed: int, rail: str | None = None, k: int = 3) -> list[Measurement]:
    """One rail's ib_write_bw pairs over the plan's k rounds (switch-aware, as a run pairs them)."""
    rng = random.Random(seed)
    rail = rail or f.rails[0]
    out = []
    for r, pairs in enumerate(rounds(f.nodes, k, {x: f.leaf[(x, rail)] for x in f.nodes})):
        for a, b in pairs:
            v = f.base_rail * f.rail_path(a, b, rail) * f._soft(a, b) * f.draw(rng, (a, b))
            out.append(Measurement((a, b), v, runsim.PAIR_SIZE, "ib_write_bw", rail=rail, round=r))
    return out


def whole_lines(f: runsim.Fabric, seed: int, k: int = 3) -> list[Measurement]:
    """Whole-node all_reduce pairs over the plan's k rounds."""
    rng = random.Random(seed)
    out = []
    for r, pairs in enumerate(rounds(f.nodes, k, {x: f.leaf[(x, f.rails[0])] for x in f.nodes})):
        for a, b in pairs:
            v = f.base_pair * f.pair_factor(a, b) * f.draw(rng, (a, b))
            out.append(Measurement((a, b), v, runsim.PAIR_SIZE, "all_reduce", round=r))
    return out


@pytest.mark.parametrize("seed", [0, 18, 19, 21])
def test_heavy_tailed_low_pairs_of_a_healthy_node_do_not_drain_it(seed):
    # 1,024 healthy nodes, student-t(3) at 8%, 2% transients: some node's
    # three pairs on a rail land in the tail together (0.59-0.74); the
    # gaussian model between 4 sds and the line drained it.
    ms = rail_lines(fleet(1024, "student-t", 0.08, 0.02), seed)
    r = judge_pairs(ms[0].key, ms, Params())
    assert [n for n, v in r.verdicts.items() if v == "fail"] == []


@pytest.mark.parametrize("seed", [0, 18])
def test_two_transient_hits_on_three_whole_node_pairs_do_not_drain(seed):
    # Gaussian 8% with 2% transient hits, whole-node pairs only: two hits on
    # one node's three pairs happen about once per 1,024-node fleet.
    ms = whole_lines(fleet(1024, "gaussian", 0.08, 0.02), seed)
    r = judge_pairs(ms[0].key, ms, Params())
    assert [n for n, v in r.verdicts.items() if v == "fail"] == []


def test_the_tail_model_sees_the_hits_and_still_drains_a_slow_nic():
    # The same kind of fleet at 2% noise with a NIC at 0.8: three pairs that
    # agree at 0.8 are no transient hits (those scatter over 0.5-0.9).
    f = fleet(1024, "gaussian", 0.02, 0.02)
    slow = f.nodes[77]
    f.nic[(slow, f.rails[0])] = 0.8
    ms = rail_lines(f, 5)
    r = judge_pairs(ms[0].key, ms, Params())
    assert [n for n, v in r.verdicts.items() if v == "fail"] == [slow]
    # And at 8% student-t a node at 0.5 on every pair is still its own fault.
    f = fleet(1024, "student-t", 0.08, 0.02)
    f.host[slow] = 0.5
    ms = rail_lines(f, 0)
    r = judge_pairs(ms[0].key, ms, Params())
    assert [n for n, v in r.verdicts.items() if v == "fail"] == [slow]


def test_tail_sample_keeps_the_pairs_of_nodes_with_one_hit():
    # At 8% noise one hit among three pairs puts a node's level under the
    # line: the tail is taken from pairs whose ends are fine elsewhere, so
    # the fleet's hits are seen (a sample of nodes above the line saw none).
    ms = whole_lines(fleet(1024, "gaussian", 0.08, 0.02), 0)
    g = link_values(ms)
    score = node_scores(g, set(), 0.08)
    level = sorted(s for s in score.values())[len(score) // 2]
    t = transients(g, score, set(), 0.9 * level, level, 0.08)
    assert t.total > 0.5 * len(g.value)  # chosen by their other pairs: about 0.8 x 0.8 of them
    low = [x for x in t.tail if x < 0.6]  # transient hits; gaussian 8% puts 1 in 10^7 pairs there
    assert len(low) >= 5 and t.heavy
    assert t.cdf(0.55) >= len([x for x in t.tail if x <= 0.55]) / t.total > 0


@pytest.mark.parametrize("n,seed", [(128, 2), (128, 11), (128, 33), (64, 5), (64, 53)])
def test_a_healthy_leaf_is_not_named_under_heavy_tails(n, seed):
    # Rail leaves of 16 nodes, student-t at 8%: the nodes' best pairs (the
    # top level) read far above the bulk, and healthy leaves were named at
    # 0.82-0.89 of that level.
    f = fleet(n, "student-t", 0.08, 0.0, su=16)
    ms = rail_lines(f, seed)
    _ms, found, _g = attribute(ms[0].key, ms, lambda n: f.leaf[(n, f.rails[0])], Params())
    assert found == []


def test_a_slow_leaf_is_still_named_in_a_small_fleet():
    f = fleet(64, "student-t", 0.02, 0.01, su=16)
    f.switch["su2-rail0"] = 0.82
    ms = rail_lines(f, 1)
    _ms, found, _g = attribute(ms[0].key, ms, lambda n: f.leaf[(n, f.rails[0])], Params())
    assert [x.switch for x in found] == ["su2-rail0"]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_healthy_fleet_at_8pct_noise_on_nine_keys_is_not_held(seed):
    # 128 healthy nodes, 8 rails and the whole-node key, student-t at 8%:
    # a node is below the line within the noise on some key a quarter of
    # the time. Counted over all keys at once that read as "more than twice
    # the guard's limit below the line" and held the run as a fabric-wide
    # problem; per key it is a few nodes each.
    f = fleet(128, "student-t", 0.08, 0.02, rails=8)
    ms = [m for i, r in enumerate(f.rails) for m in rail_lines(f, seed * 100 + i, r)] + whole_lines(f, seed * 100 + 99)
    a = analyze(ms)
    assert not a.guard_tripped and a.drain == []


@pytest.mark.parametrize("seed", [13, 19, 21, 22, 24, 27])
def test_a_route_measured_twice_is_judged_on_both_values(seed):
    # A route at 0.6 on one rail, 8% noise, measured again (as a retest
    # round measures a suspect link): each value against one value's margin
    # missed it a third of the time; both below the line and their mean
    # against a two-value margin names it.
    f = fleet(512, "gaussian", 0.08, 0.0)
    a, b = rail_lines(f, seed)[5].nodes
    f.route[(frozenset((a, b)), f.rails[0])] = 0.6
    ms = rail_lines(f, seed)
    rng = random.Random(seed + 1000)
    again = Measurement((a, b), f.base_rail * f.rail_path(a, b, f.rails[0]) * f._soft(a, b) * f.draw(rng, (a, b)),
                        runsim.PAIR_SIZE, "ib_write_bw", rail=f.rails[0], round=3)
    r = judge_pairs(ms[0].key, ms + [again], Params())
    assert [a, b] in r.links and [a, b] in r.clear


@pytest.mark.parametrize("seed", [7, 15])  # runs that end with unsettled links (most seeds settle every one; seeds 7, 8, 15 of 0-23 do not; 2 and 19 did until a clearly low single rail value was measured again)
def test_links_not_settled_when_the_rounds_end_are_not_named(seed):
    # A whole run (bench/runsim.py: submit, tasks, analysis jobs, retest
    # rounds) of 128 nodes x 4 rails at 8% noise with 1-3 slow routes: a
    # noise pair first measured in the last round, or slow once within the
    # fleet's noise, was named as a cable to replace.
    from slurmqual.burnin.judge.plan import to_remeasure

    rng = random.Random(seed)
    f = runsim.healthy_fleet(rng, 128, 4, noise=0.08)
    run = runsim.play(f, seed, True, runsim.slow_routes(rng.randint(1, 3), (0.5, 0.7)))
    a = run.analysis
    assert to_remeasure(a.suspect_links, a.clear_links) == []
    assert any("not settled after 2 retest round(s)" in p for p in a.problems)
    r = runsim.judge(runsim.truth(f, run.first), run)
    assert r["link_found"] == r["link_truth"] and r["false"] == 0


def test_a_small_heavy_tailed_fleet_drains_no_healthy_node_over_its_rounds():
    # The 'links, 8% noise' family's scenario 3309 (bench_components_sim,
    # base 3301): 128 nodes x 8 rails, student-t. Chosen by all their other
    # pairs above the line, a rail's tail sample kept 56 of 192 pairs and read
    # light: two healthy nodes were drained on three tail pairs each.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_components_sim import FAMILIES

    fam = next(f for f in FAMILIES if f.name == "links, 8% noise")
    seed = 3309
    fabric, rails, setup = fam.build(random.Random(f"{fam.name}:{seed}"), seed - 3301)
    assert (len(fabric.nodes), fabric.shape) == (128, "student-t")
    run = runsim.play(fabric, seed, rails, setup)
    r = runsim.judge(runsim.truth(fabric, run.first), run, rails)
    assert r["false"] == 0


@pytest.mark.parametrize("seed,healthy", [(9, "gpu00082"), (12, "gpu00039")])
def test_a_rail_key_is_judged_with_the_tail_of_the_runs_other_rails(seed, healthy):
    # 128 healthy nodes x 8 rails, student-t(3) at 8%: one rail's 192 pairs
    # show too little of the tail for the node whose pairs landed in it (that
    # rail judged alone drained it), the run's 8 rails together show plenty.
    # Judged alone, its rail now retests it too: its lowest pair is also its
    # partner's, fine elsewhere, and the two left are not clearly low
    # (Conviction.link_low); the pooled judgement must still not drain it.
    f = fleet(128, "student-t", 0.08, 0.0, rails=8, su=16)
    ms = [m for i, rail in enumerate(f.rails) for m in rail_lines(f, seed * 10 + i, rail)]
    alone = {}
    for rail in f.rails:
        part = [m for m in ms if m.rail == rail]
        r = judge_pairs(part[0].key, part, Params())
        alone.update({n: rail for n, v in r.verdicts.items() if v == "fail"})
    assert list(alone) == []
    a = analyze(ms)
    assert [n for n, v in a.nodes.items() if v["verdict"] == "fail"] == []
    assert {k["verdict"] for k in a.nodes[healthy]["keys"].values()} <= {"pass", "retest", "untested"}


def test_links_at_8pct_drain_no_healthy_nic_over_the_rounds():
    # 'links, 8% noise' scenario 5069 of bench_components_sim (base 5001,
    # 100 scenarios): 128 nodes x 8 rails, student-t: a healthy NIC's two
    # pairs at 0.67 of three drained it, judged with its one rail's tail.
    seed = 5069
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_components_sim import FAMILIES

    fam = next(f for f in FAMILIES if f.name == "links, 8% noise")
    fabric, rails, setup = runsim.scenario(fam, 5001, seed)
    run = runsim.play(fabric, seed, rails, setup)
    r = runsim.judge(runsim.truth(fabric, run.first), run, rails)
    assert r["false"] == 0
