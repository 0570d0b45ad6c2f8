"""Slow parts the fleet's heavy tail still explains are retested and drained
(analyze._apply_retest_budget: a node left out of one round comes first in the next).

A node below the line within the noise (its level one the fleet's heavy
tail could still give a healthy node) is `untested` past the budget. In a
heavy-tailed fleet many healthy nodes sit there just under the line; ranked
all alike and taken by name (main dba61ac), a NIC at 0.52 and two nodes at
0.62-0.68 on agreeing pairs were left out of every round and the runs ended
with them undecided. These runs fail on dba61ac and pass since 93af326. Runs played
from bench/bench_components_sim.py's held-out family "H heavy tail 5%"
(student-t(3) at 5%, 2% transient hits, a slow leaf, 1% slow nodes, 1%
NICs at 0.5-0.7; seed base 7001), as the run plays them (runsim.play:
submit, tasks, analysis jobs, the retest rounds from the plan).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (the issue 22 generator)
from bench_components_sim import HELDOUT  # noqa: E402

FAMILY = next(f for f in HELDOUT if f.name == "H heavy tail 5%")


_PLAYED: dict[int, tuple] = {}


def _play(seed: int, monkeypatch) -> tuple[runsim.Fabric, runsim.RunResult, list]:
    """The scenario played (once per module: 7008 is 2,048 nodes); every
    analysis of the run, round by round."""
    if seed not in _PLAYED:
        fabric, rails, setup = runsim.scenario(FAMILY, 7001, seed)
        stages: list = []
        job = runsim.analysis_job

        def recorded(*args):
            a = job(*args)
            stages.append(a)
            return a

        with monkeypatch.context() as m:
            m.setattr(runsim, "analysis_job", recorded)
            _PLAYED[seed] = fabric, runsim.play(fabric, seed, rails, setup), stages
    return _PLAYED[seed]


@pytest.mark.parametrize("seed, nics", [
    # 32 nodes x 8 rails: gpu00027's mlx5_7 at 0.52 (three pairs at 0.51-0.53
    # in round 0), left out of the budget of 2 by name in both rounds.
    (7006, {("gpu00027", "mlx5_7")}),
    # 2,048 nodes x 8 rails, 39 slow nodes and NICs: gpu01778 (its GPU side
    # at 0.68: three whole-node pairs at 0.68-0.69) and gpu02044 (its
    # network side at 0.62) were never retested.
    (7008, {("gpu01778", None), ("gpu02044", None)}),
])
def test_a_slow_part_the_tail_still_explains_is_retested_and_drained(seed, nics, monkeypatch):
    fabric, run, stages = _play(seed, monkeypatch)
    t = runsim.truth(fabric, run.first)
    r = runsim.judge(t, run)
    assert r["right"], r["why"]
    assert r["false"] == 0
    for node, nic in nics:
        assert node in t.must_fail
        assert node in run.drained
        if nic is not None:
            assert (node, nic) in fabric.nic and nic in run.drained[node]
    # A retest round measured them with new partners before the last analysis.
    for node, _nic in nics:
        assert any(a.nodes[node]["verdict"] == "retest" for a in stages[:-1]), [a.nodes[node] for a in stages]
