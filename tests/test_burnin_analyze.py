"""Verdicts on fleets measured over the fabric model (tests/fleet.py): slow
nodes, slow links, noise, guard, untested, several tests, GPU models."""

import pytest

from fleet import follow_up, H100, H200, REF, Fabric, measure, names, run, run_pairs
from slurmqual.burnin.judge.analyze import analyze, judging_key, median_for
from slurmqual.burnin.records import Measurement, Params
from slurmqual.burnin.judge.plan import groups, retest_plan, rounds


def verdicts(a, v):
    return sorted(n for n, x in a.nodes.items() if x["verdict"] == v)


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
    assert a.nodes["gpu0005"]["key"] == "all_reduce:pair"
    assert median_for(a.to_dict(), "gpu0005") == ("all_reduce:pair", a.median["all_reduce:pair"])


def test_two_slow_nodes_even_when_paired_together():
    nodes = names(8)
    # In round 0 the circle method pairs gpu0001 with gpu0008.
    assert ("gpu0001", "gpu0008") in rounds(nodes, 1)[0]
    a = analyze(measure(nodes, {"gpu0001": 0.7, "gpu0008": 0.75}, noise=0.01, seed=2, intra=False))
    assert a.drain == ["gpu0001", "gpu0008"]
    assert verdicts(a, "pass") == sorted(set(nodes) - {"gpu0001", "gpu0008"})


def test_healthy_node_whose_only_partner_is_slow_is_retest_not_fail():
    nodes = names(8)
    a = analyze(measure(nodes, {"gpu0002": 0.6}, noise=0.01, seed=5, n_rounds=1, intra=False))
    partner = next(b if a_ == "gpu0002" else a_ for a_, b in rounds(nodes, 1)[0] if "gpu0002" in (a_, b))
    assert a.drain == [] and a.nodes[partner]["verdict"] == "retest"  # one partner: node, link or partner?
    # With three rounds the slow node is found and its neighbours pass.
    a = analyze(measure(nodes, {"gpu0002": 0.6}, noise=0.01, seed=5, intra=False))
    assert a.drain == ["gpu0002"] and verdicts(a, "pass") == sorted(set(nodes) - {"gpu0002"})


def test_one_lucky_pair_does_not_save_a_slow_node():
    nodes = names(16)
    fabric = Fabric(net={"gpu0003": 0.65}, noise=0.01)
    ms = run(nodes, fabric, seed=1, n_rounds=4, intra=False)
    # A measurement that happened to run at full speed with one partner.
    lucky = [Measurement(m.nodes, 380.0, m.size, m.test) if "gpu0003" in m.nodes and m.round == 2 else m for m in ms]
    a = analyze(lucky)
    assert a.drain == ["gpu0003"]


def test_slow_link_drains_nothing_and_is_one_link_when_measured_twice():
    nodes = names(8)
    link = ("gpu0002", "gpu0007")
    a = analyze(run(nodes, Fabric(link={link: 0.5}, noise=0.01), seed=1))
    assert a.drain == [] and a.suspect_links == [list(link)]
    assert a.nodes["gpu0002"]["verdict"] == "pass" and a.nodes["gpu0002"]["score"] > 0.9 * 380
    twice = analyze(run(nodes, Fabric(link={link: 0.5}, noise=0.01, repeat=[link]), seed=1))
    assert twice.suspect_links == [list(link)] and twice.drain == []
    assert verdicts(twice, "retest") == [] and twice.keys["all_reduce:pair"]["repeated"] == 1


def test_two_slow_links_sharing_a_node_are_links_not_a_slow_node():
    nodes = names(16)
    r = rounds(nodes, 3)
    hub = "gpu0004"
    partners = [b if a == hub else a for rnd in r[:2] for a, b in rnd if hub in (a, b)]
    a = analyze(run(nodes, Fabric(link={(hub, partners[0]): 0.5, (hub, partners[1]): 0.55}, noise=0.01), seed=4))
    assert a.drain == []
    assert sorted(a.suspect_links) == sorted(sorted([hub, p]) for p in partners)
    assert a.nodes[hub]["verdict"] in ("retest", "pass")


def test_noise_alone_drains_nothing_and_reports_no_links():
    for seed in range(10):
        a = analyze(run(names(256), Fabric(noise=0.05), seed=seed))
        assert a.drain == [] and a.suspect_links == [], seed
        assert a.noise["all_reduce:pair"] == pytest.approx(0.05, rel=0.3)


def test_heavy_tailed_noise_drains_nothing():
    for seed in range(5):
        a = analyze(run(names(512), Fabric(noise=0.02, stragglers=0.01), seed=seed))
        assert a.drain == [], seed


def test_a_third_of_the_fleet_slow_trips_the_guard():
    # The median over pairs would sit at the slow level; over node scores it does not.
    nodes = names(48)
    slow = {n: 0.6 for n in nodes[::3]}
    a = analyze(run(nodes, Fabric(node=slow, noise=0.01), seed=7))
    assert a.guard_tripped and a.drain == [] and a.would_drain == sorted(slow)
    assert a.median["all_reduce:pair"] == pytest.approx(380, rel=0.05)
    assert any("blast-radius guard" in p for p in a.problems)


def test_half_slow_fleet_trips_the_guard():
    nodes = names(12)
    a = analyze(measure(nodes, {n: 0.6 for n in nodes[:6]}))
    # Which half is "the fleet" is unknowable: two levels trip the guard.
    assert a.guard_tripped and a.drain == []
    assert any("split in two levels" in p for p in a.problems)


def test_guard_limit_is_max_of_min_and_fraction():
    nodes = names(40)
    two = analyze(measure(nodes, {nodes[0]: 0.6, nodes[1]: 0.6}))
    assert two.drain == nodes[:2] and not two.guard_tripped
    spread = {n: 0.6 for n in nodes[::8]}  # five slow nodes, each with healthy partners
    five = analyze(measure(nodes, spread))
    assert five.guard_tripped and five.would_drain == sorted(spread)  # 5 > max(2, 10% of 40)
    assert not analyze(measure(nodes, spread), params=Params(guard_fraction=0.2)).guard_tripped


def test_no_pass_without_pair_evidence():
    nodes = names(8)
    fabric = Fabric(pairless={"gpu0003"}, noise=0.01)
    a = analyze(run(nodes, fabric, seed=1), scope=nodes + ["gpu0099"])
    assert a.nodes["gpu0003"]["verdict"] == "untested" and a.nodes["gpu0003"]["score"] is None
    assert a.nodes["gpu0003"]["keys"]["all_reduce:intra:" + H100]["verdict"] == "pass"  # intra alone never passes
    assert a.nodes["gpu0099"] == {"verdict": "untested", "score": None, "key": None, "keys": {}, "failed_nics": [],
                                  "why": "nothing measured"}
    assert a.nodes["gpu0003"]["why"].startswith("no valid pair measurement")
    assert a.drain == [] and any("test error" in p for p in a.problems)


def test_a_task_killed_after_its_intra_tests_leaves_its_nodes_untested():
    nodes = names(32)
    a = analyze(run(nodes, Fabric(noise=0.01, dead_tasks={1: "after_intra"}), seed=1), scope=nodes)
    dead = groups(nodes, 16)[1]
    assert verdicts(a, "untested") == dead and verdicts(a, "pass") == groups(nodes, 16)[0]
    killed_early = analyze(run(nodes, Fabric(dead_tasks={0: "start"}), seed=1), scope=nodes)
    assert verdicts(killed_early, "untested") == groups(nodes, 16)[0]


def test_conflicting_evidence_gets_retest_with_plan():
    nodes = names(16)
    # gpu0003 is slow only on the network, and only barely: below the line, inside the noise margin.
    a = analyze(run(nodes, Fabric(net={"gpu0003": 0.88}, noise=0.03), seed=3))
    assert a.nodes["gpu0003"]["verdict"] == "retest" and a.drain == []
    assert a.retest_plan and all(pair[0] == "gpu0003" and a.nodes[pair[1]]["verdict"] == "pass"
                                 for rnd in a.retest_plan for pair in rnd)


def test_mixed_gpu_models_get_their_own_intra_median():
    nodes = names(16)
    models = {n: (H200 if i % 2 else H100) for i, n in enumerate(nodes)}
    a = analyze(run(nodes, Fabric(models=models, noise=0.01), seed=2))
    assert verdicts(a, "pass") == nodes
    assert a.median[f"all_reduce:intra:{H200}"] > a.median[f"all_reduce:intra:{H100}"]
    assert a.versions["gpu_model"] == sorted([H100, H200])


def test_intra_only_slow_node_fails_on_its_intra_key_once_repeated():
    nodes = names(16)
    fabric = Fabric(intra_only={"gpu0009": 0.6}, noise=0.01)
    once = analyze(run(nodes, fabric, seed=2))
    # One intra run is one number: a straggler could put it there. Retest.
    assert once.drain == [] and once.nodes["gpu0009"]["verdict"] == "retest"
    assert any("gpu0009" in pair for rnd in once.retest_plan for pair in rnd)
    # The retest round runs the intra test again: two runs down, it fails.
    a = analyze(run(nodes, fabric, seed=2) + follow_up(once.retest_plan, fabric, 7, 4))
    assert a.drain == ["gpu0009"]
    v = a.nodes["gpu0009"]
    assert v["key"] == f"all_reduce:intra:{H100}" and v["keys"]["all_reduce:pair"]["verdict"] == "pass"
    assert median_for(a.to_dict(), "gpu0009") == (v["key"], a.median[v["key"]])


def test_several_tests_keep_their_own_medians_and_verdicts():
    nodes = names(16)
    # alltoall runs at a different level; gpu0005 is slow in both (its NIC).
    ms = run(nodes, Fabric(net={"gpu0005": 0.6}, noise=0.01), seed=1, tests=("all_reduce", "alltoall"))
    ms = [Measurement(m.nodes, m.busbw * (0.5 if m.test == "alltoall" else 1), m.size, m.test, m.ok, m.gpu_model)
          for m in ms]
    a = analyze(ms)
    assert a.median["alltoall:pair"] == pytest.approx(0.5 * a.median["all_reduce:pair"], rel=0.05)
    assert a.drain == ["gpu0005"]
    v = a.nodes["gpu0005"]["keys"]
    assert v["all_reduce:pair"]["verdict"] == v["alltoall:pair"]["verdict"] == "fail"
    healthy = a.to_dict()
    assert judging_key(healthy, "gpu0001", "alltoall") == "alltoall:pair"
    assert median_for(healthy, "gpu0001", "alltoall")[1] == a.median["alltoall:pair"]
    # A node failing only one test fails.
    only = run(nodes, Fabric(noise=0.01), seed=1, tests=("all_reduce", "alltoall"))
    only = [Measurement(m.nodes, m.busbw * (0.6 if m.test == "alltoall" and "gpu0007" in m.nodes else 1),
                        m.size, m.test, m.ok, m.gpu_model) for m in only]
    b = analyze(only)
    assert b.drain == ["gpu0007"] and b.nodes["gpu0007"]["key"] == "alltoall:pair"
    assert b.nodes["gpu0007"]["keys"]["all_reduce:pair"]["verdict"] == "pass"


def test_below_own_baseline_is_reported_per_key_not_drained():
    nodes = names(8)
    a = analyze(measure(nodes), baselines={"all_reduce:pair": {"gpu0004": 500.0, "gpu0005": 381.0},
                                           "alltoall:pair": {"gpu0006": 900.0}})
    assert list(a.below_baseline) == ["gpu0004"] and a.drain == []
    assert a.below_baseline["gpu0004"]["key"] == "all_reduce:pair"


def test_reference_size_and_fallback():
    small = run(["a", "b", "c", "d"], Fabric(base=100.0), intra=False)
    big = run(["a", "b", "c", "d"], Fabric(base=300.0), intra=False)
    ms = [Measurement(m.nodes, m.busbw, 1 << 30, m.test) for m in small] + big
    assert analyze(ms).median == {"all_reduce:pair": 300.0}
    a = analyze([Measurement(m.nodes, m.busbw, 1 << 30, m.test) for m in small])
    assert a.median == {"all_reduce:pair": 100.0} and any("no measurement at reference size" in p for p in a.problems)


def test_retest_plan_uses_distinct_good_partners():
    plan = retest_plan(["s1", "s2"], ["g1", "g2", "g3"])
    assert len(plan) == 2
    for rnd in plan:
        partners = [p[1] for p in rnd]
        assert len(set(partners)) == len(partners)
    # each suspect meets two different partners; a partner serves one
    # suspect per round, so two of them serve both (g3 is not rerun)
    assert {p[1] for rnd in plan for p in rnd if p[0] == "s1"} == {"g1", "g2"}
    assert {p[1] for rnd in plan for p in rnd if p[0] == "s2"} == {"g1", "g2"}


def test_uniform_fleet_slowdown_is_caught_by_baselines_not_the_median():
    nodes = names(20)
    baselines = {"all_reduce:pair": {n: 380.0 for n in nodes}}
    a = analyze(measure(nodes, {n: 0.7 for n in nodes}), baselines=baselines)
    assert a.drain == [] and not a.guard_tripped  # relative to itself the fleet looks fine
    assert a.fleet_slowdown and len(a.below_baseline) == 20
    assert any("fleet-wide slowdown: 20 of 20 nodes" in p for p in a.problems)
    one = analyze(measure(nodes, {nodes[3]: 0.85}, intra=False), baselines=baselines)
    assert not one.fleet_slowdown and list(one.below_baseline) == [nodes[3]]


def test_measurement_lines_round_trip_with_optional_fields():
    m = run(["a", "b"], Fabric(), intra=False)[0]
    d = m.to_dict()
    assert d["gpu_model"] == H100 and d["nccl_version"] == "2.21.5" and d["round"] == 1
    assert Measurement.from_dict(d) == m
    old = {"nodes": ["a", "b"], "busbw": 1.0, "size": REF}  # lines from before the optional fields
    assert Measurement.from_dict(old).key == "all_reduce:pair"
    assert Measurement.from_dict(dict(old, test="alltoall_perf")).test == "alltoall"
    for bad in ({"gpu_model": 3}, {"test": "a:b"}, {"task": "x"}, {"busbw": float("nan")}):
        with pytest.raises(ValueError):
            Measurement.from_dict(dict(old, **bad))


def test_a_requalify_is_judged_against_the_fleet_not_its_references():
    nodes = names(32)
    full = analyze(run(nodes, Fabric(noise=0.01), seed=1))
    swapped, refs = "gpu0007", ["gpu0001", "gpu0002"]
    plan = retest_plan([swapped], refs)  # what requalify runs: the swapped node meets each reference
    still_slow = run_pairs(plan, Fabric(net={swapped: 0.6}, noise=0.01), seed=2)
    # Three nodes judged against each other: every pair is slow, so is "the fleet".
    alone = analyze(still_slow)
    assert alone.nodes[swapped]["verdict"] == "pass"
    judged = analyze(still_slow, fleet_level=full.median, trusted=set(refs))
    assert judged.drain == [swapped] and judged.median["all_reduce:pair"] == full.median["all_reduce:pair"]
    assert set(judged.nodes) == {swapped}  # the references are evidence, not judged (their verdicts stand)
    fixed = analyze(run_pairs(plan, Fabric(noise=0.01), seed=3), fleet_level=full.median, trusted=set(refs))
    assert fixed.nodes[swapped]["verdict"] == "pass" and fixed.drain == []


def test_retest_budget_decides_the_least_ambiguous_by_their_estimate():
    # 8% of 512 nodes at 0.88 (2% noise, 3 partners: within the margin;
    # at 0.87 the clean pairs' noise bound, 0.021 for the true 0.02,
    # convicts them all): more below the line than max(2, 5%) retests.
    nodes = names(512)
    slow = {n: 0.88 for n in nodes[::12]}
    a = analyze(run(nodes, Fabric(net=slow, noise=0.02), seed=11), nodes, params=Params(guard_fraction=0.2))
    budget = max(2, int(0.05 * 512))
    assert len(verdicts(a, "retest")) <= budget
    assert not set(a.drain) - set(slow)  # decided by the estimate, never a healthy node
    assert not set(slow) & set(verdicts(a, "pass"))
    assert any(p.startswith(f"retest budget ({budget})") for p in a.problems)
    # Without the budget (everything may stay retest) the same run decides fewer.
    loose = analyze(run(nodes, Fabric(net=slow, noise=0.02), seed=11), nodes,
                    params=Params(guard_fraction=0.2, retest_fraction=1.0))
    assert len(loose.drain) < len(a.drain) and len(verdicts(loose, "retest")) > budget


def test_transient_congestion_neither_widens_the_noise_nor_drains():
    nodes = names(512)
    slow = {n: 0.8 for n in nodes[5::50]}
    a = analyze(run(nodes, Fabric(node=slow, noise=0.02, transient=0.04), seed=5, n_rounds=4), nodes)
    assert a.noise["all_reduce:pair"] < 0.03  # the old 1%-quantile widening read ~0.1 here
    assert a.drain == sorted(slow)
    assert 0.02 < a.keys["all_reduce:pair"]["transient_rate"] < 0.1  # the fleet's own hits, seen


def test_three_hit_pairs_do_not_convict_where_transients_are_common():
    # 4% of pairs hit: a healthy node with all three pairs hit is expected
    # about once in 30 runs of 512 nodes, so three slow pairs do not decide
    # (retest: new partners do); four do (previous test). Without transient
    # hits in the fleet three decide.
    nodes = names(512)
    slow = {n: 0.8 for n in nodes[5::50]}
    a = analyze(run(nodes, Fabric(node=slow, noise=0.02, transient=0.04), seed=5), nodes)
    assert a.drain == [] and all(a.nodes[n]["verdict"] == "retest" for n in slow)
    assert sorted(n for n in slow if n in {m for rnd in a.retest_plan for pair in rnd for m in pair}) == sorted(slow)
    clean = analyze(run(nodes, Fabric(node=slow, noise=0.02), seed=5), nodes)
    assert clean.drain == sorted(slow) and clean.keys["all_reduce:pair"]["transient_rate"] == 0.0


def test_a_run_with_one_valid_pair_is_judged_not_a_crash():
    """A run whose other tasks were killed leaves one pair measured: the
    analysis (asking where one healthy link per run lies, over one value)
    judges it; it crashed with statistics' 'p must be in the range' on
    real Slurm (test_slurm_burnin_pinning's SIGKILL run)."""
    nodes = names(8)
    for slow in ({}, {"gpu0001": 0.7}):
        a = analyze(run_pairs([[("gpu0001", "gpu0002")]], Fabric(node=dict(slow), noise=0.02), seed=1), nodes)
        assert verdicts(a, "untested") == nodes[2:] and a.drain == []
        assert a.nodes["gpu0002"]["verdict"] == "pass"
        assert a.nodes["gpu0001"]["verdict"] == ("retest" if slow else "pass")
