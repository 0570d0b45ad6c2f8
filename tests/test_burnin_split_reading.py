"""A key is "split in two levels" (the guard holds the run) when more nodes
than the guard allows read clearly above the fleet (pairs._settle_level).
A node's reading there is noise.upper_reference's: of four or more pairs
the second highest. A retest round gives some nodes new partners, and
with them new maxima: single high pairs of a heavy-tailed fleet (1.27-1.93
of its level) put six nodes "above" and held healthy runs with a NIC and a
slow node to drain. A node of a real fast half still shows it (with two
fast partners of four, or its best of round 0's three).

Runs played from bench/bench_components_sim.py's families as the run plays
them (runsim.play: submit, tasks, analysis jobs, the retest rounds)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (the issue 22 generator)
from bench_components_sim import FAMILIES, HELDOUT  # noqa: E402


def _played(family: str, base: int, seed: int):
    fam = next(f for f in FAMILIES + HELDOUT if f.name == family)
    fabric, rails, setup = runsim.scenario(fam, base, seed)
    run = runsim.play(fabric, seed, rails, setup)
    return fabric, run, runsim.judge(runsim.truth(fabric, run.first), run, rails)


def test_single_high_pairs_of_a_heavy_tail_do_not_split_the_fleet():
    # 48 nodes x 8 rails, student-t 5%, a slow leaf, a NIC at 0.60
    # (gpu00010 mlx5_5) and a node at 0.63 (gpu00047): round 1's rail key
    # mlx5_6 read "6 nodes clearly above the median of the rest": three
    # single pairs (1.27, 1.33, 1.93), each counted at both its ends.
    _fabric, run, r = _played("H heavy tail 5%", 7001, 7024)
    a = run.analysis
    assert not a.guard_tripped, a.problems
    assert r["right"], r["why"]
    assert run.drained.keys() == {"gpu00010", "gpu00047"} and "mlx5_5" in run.drained["gpu00010"]


@pytest.mark.parametrize("fast, slow", [(2, 0.6), (2, 0.8), (3, 0.6), (3, 0.8)])
def test_a_fleet_split_in_two_levels_still_holds_the_run(fast, slow):
    """Half, or two thirds, of a 64-node fleet slower (its median at the
    slow level): the guard holds the run and nothing is drained."""
    f = runsim.rail_fabric(64, 4, 16)
    f.noise = 0.02
    quick = set(f.nodes[::fast])
    for x in f.nodes:
        if x not in quick:
            f.host[x] = slow
    run = runsim.play(f, 3, True)
    assert run.analysis.guard_tripped and not run.drained
    assert any("split in two levels" in p for p in run.analysis.problems)
