"""Verdicts on synthetic fleets: slow nodes, slow links, noise, guard, untested."""

import pytest

from fleet import REF, measure, names
from slurmqual.burnin.analyze import Measurement, Params, analyze
from slurmqual.burnin.plan import groups, retest_plan, rounds


def test_rounds_are_perfect_matchings_with_new_partners():
    nodes = names(10)
    seen = set()
    for rnd in rounds(nodes, 5):
        flat = [n for p in rnd for n in p]
        assert sorted(flat) == sorted(nodes)  # every node exactly once per round
        for p in rnd:
            assert frozenset(p) not in seen
            seen.add(frozenset(p))
    odd = rounds(names(7), 3)
    assert all(len(r) == 3 for r in odd) and len({n for r in odd for p in r for n in p}) == 7


def test_groups_balanced_never_single():
    gs = groups(names(33), 16)
    assert [len(g) for g in gs] == [11, 11, 11]
    assert groups(names(5), 16) == [names(5)] and groups([], 16) == []


def test_one_slow_node():
    nodes = names(16)
    a = analyze(measure(nodes, {"gpu0005": 0.7}, noise=0.02, seed=3))
    assert a.drain == ["gpu0005"] and a.nodes["gpu0005"]["verdict"] == "fail"
    assert all(v["verdict"] == "pass" for n, v in a.nodes.items() if n != "gpu0005")
    assert a.suspect_links == [] and not a.guard_tripped
    assert a.nodes["gpu0005"]["score"] == pytest.approx(0.7 * 380, rel=0.06)


def test_two_slow_nodes_even_when_paired_together():
    nodes = names(8)
    # In round 0 the circle method pairs gpu0001 with gpu0008.
    a = analyze(measure(nodes, {"gpu0001": 0.7, "gpu0008": 0.75}, intra=False))
    assert a.drain == ["gpu0001", "gpu0008"]


def test_slow_link_drains_nothing():
    nodes = names(8)
    a = analyze(measure(nodes, link_factor={("gpu0002", "gpu0007"): 0.5}, noise=0.01, seed=1))
    assert a.drain == [] and a.suspect_links == [["gpu0002", "gpu0007"]]
    assert a.nodes["gpu0002"]["verdict"] == "pass" and a.nodes["gpu0002"]["score"] > 0.9 * 380


def test_noise_alone_drains_nothing():
    for seed in range(20):
        a = analyze(measure(names(64), noise=0.03, seed=seed))
        assert a.drain == [], seed


def test_half_slow_fleet_trips_the_guard():
    nodes = names(12)
    slow = {n: 0.6 for n in nodes[:6]}
    a = analyze(measure(nodes, slow))
    assert a.guard_tripped and a.drain == [] and len(a.would_drain) == 6
    assert any("blast-radius guard" in p for p in a.problems)


def test_guard_limit_is_max_of_min_and_fraction():
    nodes = names(40)
    two = analyze(measure(nodes, {nodes[0]: 0.6, nodes[1]: 0.6}))
    assert two.drain == nodes[:2] and not two.guard_tripped
    five = analyze(measure(nodes, {n: 0.6 for n in nodes[:5]}))
    assert five.guard_tripped  # 5 > max(2, 10% of 40)
    assert not analyze(measure(nodes, {n: 0.6 for n in nodes[:5]}), params=Params(guard_fraction=0.2)).guard_tripped


def test_untested_and_test_errors_are_not_measurements():
    nodes = names(6)
    ms = measure(nodes[:4], intra=False) + [Measurement((nodes[4], nodes[0]), 0.0, REF, "all_reduce", ok=False)]
    a = analyze(ms, scope=nodes)
    assert a.nodes[nodes[4]] == {"verdict": "untested", "score": None}
    assert a.nodes[nodes[5]] == {"verdict": "untested", "score": None}
    assert a.drain == [] and any("test error" in p for p in a.problems)


def test_conflicting_evidence_gets_retest_with_plan():
    nodes = names(8)
    # gpu0003 slow with two partners but fine with a third: conflicting.
    ms = measure(nodes, intra=False)
    ms = [Measurement(m.nodes, m.busbw * (0.6 if "gpu0003" in m.nodes and any(p in m.nodes for p in ("gpu0006", "gpu0008")) else 1),
                      m.size, m.test) for m in ms]
    a = analyze(ms)
    assert a.nodes["gpu0003"]["verdict"] == "retest" and a.drain == []
    assert a.retest_plan and all(pair[0] == "gpu0003" and a.nodes[pair[1]]["verdict"] == "pass"
                                 for rnd in a.retest_plan for pair in rnd)


def test_below_own_baseline_is_reported_not_drained():
    nodes = names(8)
    a = analyze(measure(nodes), baselines={"gpu0004": 500.0, "gpu0005": 381.0})
    assert list(a.below_baseline) == ["gpu0004"] and a.drain == []


def test_reference_size_and_fallback():
    ms = [Measurement(("a", "b"), 100.0, 1 << 30, "all_reduce"), Measurement(("a", "b"), 300.0, REF, "all_reduce")]
    assert analyze(ms).median == {"all_reduce:pair": 300.0}
    only_small = [Measurement(("a", "b"), 100.0, 1 << 30, "all_reduce")]
    a = analyze(only_small)
    assert a.median == {"all_reduce:pair": 100.0} and any("no measurement at reference size" in p for p in a.problems)


def test_retest_plan_uses_distinct_good_partners():
    plan = retest_plan(["s1", "s2"], ["g1", "g2", "g3"])
    assert len(plan) == 2
    for rnd in plan:
        partners = [p[1] for p in rnd]
        assert len(set(partners)) == len(partners)
    assert {p[1] for rnd in plan for p in rnd if p[0] == "s1"} == {"g1", "g3"}


def test_ambiguous_slow_node_or_slow_link_convicts_nobody():
    # gpu1 is slow with gpu2 and gpu3; gpu3 is slow with gpu1 and gpu6. "gpu1 slow
    # + bad link 3-6" and "gpu3 slow + bad link 1-2" fit equally: no drain, both
    # retest against proven-good nodes, whatever order the nodes come in.
    pairs = {("gpu2", "gpu7"): 392.8, ("gpu3", "gpu6"): 191.2, ("gpu4", "gpu5"): 380.6, ("gpu1", "gpu2"): 268.5,
             ("gpu4", "gpu7"): 388.5, ("gpu5", "gpu6"): 373.4, ("gpu1", "gpu3"): 261.2, ("gpu4", "gpu2"): 372.9,
             ("gpu6", "gpu7"): 396.7}
    ms = [Measurement(p, bw, REF, "all_reduce") for p, bw in pairs.items()]
    for order in (ms, ms[::-1]):
        a = analyze(order)
        assert a.drain == [] and {n for n, v in a.nodes.items() if v["verdict"] == "retest"} == {"gpu1", "gpu3"}
        assert all(a.nodes[g]["verdict"] == "pass" for rnd in a.retest_plan for _s, g in rnd)
    # One more pair that clears gpu3 settles it: gpu1 is the slow node.
    a = analyze(ms + [Measurement(("gpu3", "gpu5"), 381.0, REF, "all_reduce")])
    assert a.drain == ["gpu1"] and a.suspect_links == [["gpu3", "gpu6"]]


def test_uniform_fleet_slowdown_is_caught_by_baselines_not_the_median():
    nodes = names(20)
    baselines = {n: 380.0 for n in nodes}
    a = analyze(measure(nodes, {n: 0.7 for n in nodes}), baselines=baselines)
    assert a.drain == [] and not a.guard_tripped  # relative to itself the fleet looks fine
    assert a.fleet_slowdown and len(a.below_baseline) == 20
    assert any("fleet-wide slowdown: 20 of 20 nodes" in p for p in a.problems)
    one = analyze(measure(nodes, {nodes[3]: 0.85}, intra=False), baselines=baselines)
    assert not one.fleet_slowdown and list(one.below_baseline) == [nodes[3]]
