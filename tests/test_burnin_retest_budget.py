"""The retest budget (analyze._apply_retest_budget): which retests a round
keeps. A node the budget left out of one round comes first in the next
(never left out of every round by a rank its unchanged values keep), and
nodes no estimate can decide are kept up to the guard's limit (at most 6),
where a 64-node fleet's 5% (3) left slow nodes undecided after both rounds.
On tests/fleet.py's generator and the issue 22 generator (bench/runsim.py),
judged by the analysis itself and played as the run plays its rounds."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import runsim  # noqa: E402  (the issue 22 generator)
from fleet import Fabric, names, run  # noqa: E402
from slurmqual.burnin.judge.analyze import analyze  # noqa: E402
from slurmqual.burnin.judge.plan import RoundState  # noqa: E402
from slurmqual.burnin.records import Measurement  # noqa: E402
from slurmqual.burnin.run import retest  # noqa: E402

FLEET128 = names(128)
EIGHT_LOW = {n: 0.87 for n in FLEET128[5::16]}  # 8 of 128: more retests than the budget (6) keeps


def _verdicts(a, verdict: str) -> set[str]:
    return {n for n, v in a.nodes.items() if v["verdict"] == verdict}


@pytest.mark.parametrize("seed", range(4))
def test_a_node_the_budget_left_out_of_one_round_comes_first_in_the_next(seed):
    ms = run(FLEET128, Fabric(net=EIGHT_LOW, noise=0.02), seed=seed)
    first = analyze(ms)
    kept = _verdicts(first, "retest")
    left_out = {n for n in EIGHT_LOW if first.nodes[n]["verdict"] != "retest"}
    assert len(kept) == 6 and left_out and any("retest budget (6)" in p for p in first.problems), first.problems
    # The same values judged after a round that retested `kept` (nothing new
    # measured for the others): the ones left out are kept now, and the
    # round stays the same size (the budget, not more).
    after = analyze(ms, rounds=RoundState(retested={n: 1 for n in kept}))
    again = _verdicts(after, "retest")
    assert left_out <= again and len(again) == len(kept), (left_out, again)
    assert not after.guard_tripped and not (_verdicts(after, "fail") - set(EIGHT_LOW))


def _small(seed: int):
    from bench_burnin_sim import FAMILIES

    fam = next(x for x in FAMILIES if x.name == "small fleets 10-15% 0.85")
    fabric, rails, setup = runsim.scenario(fam, 5001, seed)
    played = runsim.play(fabric, seed, rails, setup)
    return fabric, played, runsim.judge(runsim.truth(fabric, played.first), played, rails)


# small fleets (bench_burnin_sim, base 5001, 300 scenarios): 5044, 64 nodes
# whole-node only, 6 at 0.85 within the noise on 3 pairs each: the budget (3)
# decided gpu00059 `untested` in round 0, again in round 1 (its values
# unchanged, the same rank) and no round measured it; 5240, 7 at 0.85 under
# student-t noise: 4 of them undecided after both rounds.
@pytest.mark.parametrize("seed", [5044, 5240])
def test_slow_nodes_of_a_small_fleet_within_the_guard_are_all_retested_and_drained(seed):
    fabric, played, r = _small(seed)
    slow = set(fabric.gpu) | set(fabric.host)
    assert len(fabric.nodes) == 64 and 6 <= len(slow) <= 7
    assert r["right"], r["why"]  # every slow node with clean evidence drained, nothing healthy drained
    assert len(set(played.drained) & slow) >= 6 and not set(played.drained) - slow, (slow, played.drained)
    # the first round's undecidable retests were all kept (none `untested` past the budget)
    ms = [Measurement.from_dict(m) for m in played.first]
    a0 = analyze(ms)
    assert not [n for n, v in a0.nodes.items() if "past the retest budget" in (v.get("why") or "")], a0.problems
    assert len(_verdicts(a0, "retest")) <= 6


def test_the_budget_keeps_no_more_than_before_where_the_estimate_decides():
    # 6 of 64 nodes at 0.85 with many partners each: their estimates decide
    # them (fail) within the old budget; the room for undecidable retests
    # adds no retest (a round costs what it did).
    fleet = names(64)
    slow = {n: 0.85 for n in fleet[3::11]}
    for seed in range(4):
        a = analyze(run(fleet, Fabric(net=slow, noise=0.02), seed=seed))
        assert len(_verdicts(a, "retest")) <= 3 and not _verdicts(a, "untested"), seed
        assert not (_verdicts(a, "fail") - set(slow)), seed


def test_round_state_counts_the_rounds_that_retested_each_node(tmp_path, monkeypatch, capsys):
    # the run's own records: round 1's suspects (retest-1.json, written by
    # the analysis job that submitted it) are each retested once
    from test_burnin_rounds import BORDER, FLEET, Run

    r = Run(tmp_path, monkeypatch, FLEET)
    r.measure_first(Fabric(net=BORDER, noise=0.03), seed=1)
    r.job(0, capsys)
    suspects = retest.rundir.load_stage(r.dir, 1)["suspects"]
    state = retest.round_state(r.dir, None, None, FLEET, [], 2)
    assert suspects and state.retested == {n: 1 for n in suspects}
    assert retest.retested_in([{"round": 1, "state": "failed", "suspects": suspects}]) == {}
