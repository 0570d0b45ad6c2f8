"""The stages of a pair key's judgement (slurmqual/burnin/judge/pairs.py), each on
measurements of the fabric model (tests/fleet.py)."""

import pytest

from fleet import Fabric, names, run
from slurmqual.burnin.records import Params
from slurmqual.burnin.judge.noise import margins
from slurmqual.burnin.judge.pairs import (Conviction, healthy_noise, judge_pairs, link_values, node_scores,
                                    suspect_links, top_level)
from slurmqual.burnin.judge.plan import rounds

NODES = names(16)


def pairs_of(fabric, seed=1, nodes=NODES):
    return [m for m in run(nodes, fabric, seed=seed, intra=False) if m.ok]


def test_link_values_one_value_per_link_median_of_repeats():
    link = tuple(sorted(rounds(NODES, 3)[0][1]))  # measured in the plan, and twice more
    g = link_values(pairs_of(Fabric(noise=0.01, repeat=[link, link])))
    assert len(g.repeats[link]) == 3 and g.value[link] == sorted(g.repeats[link])[1]
    a = link[0]
    assert len(g.adj[a]) == 3 and g.best[a] == max(v for _q, v in g.adj[a])


def test_node_scores_leave_convicted_partners_out():
    slow = "gpu0005"
    g = link_values(pairs_of(Fabric(node={slow: 0.6}, noise=0.01)))
    partner = g.adj[slow][0][0]
    before, after = node_scores(g, set()), node_scores(g, {slow})
    assert before[slow] < 0.7 * 380 and after[slow] == before[slow]  # a convict keeps all its pairs
    assert after[partner] > 0.95 * 380 and len([1 for q, _v in g.adj[partner] if q != slow]) == 2


def test_top_level_and_noise_ignore_slow_nodes():
    g = link_values(pairs_of(Fabric(node={n: 0.6 for n in NODES[:5]}, noise=0.02)))
    assert top_level(g, set(), 0.9) == pytest.approx(380, rel=0.03)
    sigma = healthy_noise(g, node_scores(g, set()), set(), 0.9, 0.01)
    assert sigma < 0.05  # not the spread between the two levels


def test_conviction_finds_two_slow_nodes_paired_together():
    nodes = names(8)
    assert ("gpu0001", "gpu0008") in rounds(nodes, 1)[0]
    g = link_values(pairs_of(Fabric(node={"gpu0001": 0.7, "gpu0008": 0.75}, noise=0.01), seed=2, nodes=nodes))
    convicted: set[str] = set()
    c = Conviction(g, 0.9 * 380, 0.01, 8, convicted, frozenset())
    assert c.suspect("gpu0001") and not c.suspect("gpu0002")
    c.run(node_scores(g, set()))
    assert convicted == {"gpu0001", "gpu0008"}


def test_suspect_links_need_both_ends_fine_elsewhere():
    link = tuple(sorted(rounds(NODES, 3)[1][2]))
    g = link_values(pairs_of(Fabric(link={link: 0.5}, noise=0.01)))
    assert suspect_links(g, set(), 0.9 * 380, 0.01, 0.01) == ([sorted(link)], [sorted(link)], [])  # clearly slow
    assert suspect_links(g, {link[0]}, 0.9 * 380, 0.01, 0.01) == ([], [], [])  # a convict explains its own pairs


def test_judge_pairs_one_key():
    r = judge_pairs("all_reduce:pair", pairs_of(Fabric(node={"gpu0004": 0.6}, noise=0.02)), Params())
    assert r.verdicts["gpu0004"] == "fail" and sum(v == "pass" for v in r.verdicts.values()) == 15
    assert r.median == pytest.approx(380, rel=0.03) and r.line == pytest.approx(0.9 * r.median)
    assert r.info["pairs"] == 24 and not r.info["split"]


def test_transient_model_counts_the_fleets_hits_and_their_agreement():
    from slurmqual.burnin.judge.pairs import Transients, near_line, transients
    nodes = names(256)
    g = link_values(pairs_of(Fabric(noise=0.01, transient=0.05), seed=4, nodes=nodes))
    score = node_scores(g, set(), 0.01)
    hits = transients(g, score, set(), 0.9 * 380, 380, 0.01)
    assert 0.03 < hits.rate < 0.12 and len(hits.ratios) >= 12
    assert all(0.4 < r < 0.9 for r in hits.ratios)
    # Hits spread over 0.45-0.85: three within 0.02 of each other are rare,
    # within 0.4 certain; more hits agreeing are rarer still.
    assert hits.agreement(3, 0.02) < 0.05 < hits.agreement(3, 0.2) and hits.agreement(3, 0.5) == 1.0
    assert hits.agreement(4, 0.1) < hits.agreement(3, 0.1)
    assert hits.chance(3, 3, 0.1) > hits.chance(4, 4, 0.1) > 0
    none = Transients(0.0, (), 256)
    assert none.chance(3, 3, 0.1) == 0.0
    # Margins are sized for the nodes that could be at the line, not the fleet.
    assert near_line({"a": 380.0, "b": 342.0, "c": 340.0, "d": None}, 342.0, 0.01) == 2
