"""Two nodes below the line with every other partner do not vouch for each
other through their one pair at or above it (pairs._vouched_by_a_low_partner):
neither passes on it, new partners decide them.

Found by bench_burnin_sim.py --only new --family "small fleets 10-15% 0.85"
--scenarios 300 --seed-base 5001, seed 5208: 64 nodes, whole-node tests
only, student-t 2%, 8 nodes at 0.85. gpu00004 and gpu00020, both at 0.85,
read 396 together (27% above their level: a student-t draw) and 297-312
with every other partner; each passed on that one pair. The fleet is
bench/runsim.py's (the issue 22 generator), played with the run's own code."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import bench_burnin_sim  # noqa: E402  (bench/bench_burnin_sim.py: the small fleets family)
import runsim  # noqa: E402  (bench/runsim.py)
from slurmqual.burnin.judge.pairs import judge_pairs  # noqa: E402
from slurmqual.burnin.records import Params, from_dicts  # noqa: E402


@pytest.fixture(scope="module")
def played():
    return runsim.replay(bench_burnin_sim.FAMILIES, "small fleets 10-15% 0.85", 5001, 5208)


def test_two_slow_nodes_whose_one_pair_read_high_do_not_pass(played):
    fabric, run = played
    pair = [m for m in run.first if m["nodes"] == ["gpu00004", "gpu00020"]]
    assert not fabric.healthy("gpu00004") and not fabric.healthy("gpu00020")
    assert pair and pair[0]["busbw"] > 1.05 * fabric.base_pair  # the premise: their pair read high
    for x in ("gpu00004", "gpu00020"):
        assert run.analysis.nodes[x]["verdict"] != "pass", run.analysis.nodes[x]


def test_on_the_first_rounds_pairs_both_are_retest_and_their_healthy_partners_pass(played):
    fabric, run = played
    ms = [m for m in from_dicts(run.first) if len(m.nodes) == 2 and m.ok]
    r = judge_pairs("all_reduce:pair", ms, Params())
    assert r.verdicts["gpu00004"] == r.verdicts["gpu00020"] == "retest"
    healthy_pass = [x for x in fabric.nodes if fabric.healthy(x) and r.verdicts.get(x) == "pass"]
    # the rule moves no healthy node of this fleet off `pass` (the few that
    # are not `pass` met slow partners: what they read before)
    assert len(healthy_pass) >= 50
