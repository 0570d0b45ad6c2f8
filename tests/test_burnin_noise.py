"""The noise model and margins (slurmqual/burnin/judge/noise.py) that every burn-in
judgement shares: spreads of measured ratios, margins by fleet size."""

import random

import pytest

from fleet import Fabric, names, run
from slurmqual.burnin.judge.noise import (drain_line, level_estimate, margins, one_sided_z, robust_noise, top_half,
                                   upper_median, z_score)


def healthy_ratios(noise, seed=1, n=512):
    """Pair values of a healthy fleet, relative to its level (what judge_pairs feeds the estimator)."""
    ms = [m for m in run(names(n), Fabric(noise=noise), seed=seed, intra=False)]
    return [m.busbw / 380.0 for m in ms]


def test_upper_median_is_an_element_and_upper():
    assert upper_median([3.0, 1.0]) == 3.0 and upper_median([2.0, 9.0, 1.0]) == 2.0


def test_margin_grows_with_fleet_size_and_shrinks_with_partners():
    assert z_score(3, 4096, 0.01) > z_score(3, 512, 0.01) > z_score(3, 16, 0.01)
    assert z_score(5, 512, 0.01) < z_score(3, 512, 0.01) < z_score(1, 512, 0.01)
    m = margins(512, 0.01)  # for the mean of the top k // 2 + 1 of k partners
    assert m[3] == pytest.approx(one_sided_z(0.01, 512) / 2 ** 0.5)
    assert m[5] < m[3] < m[1] and one_sided_z(0.01, 1000) == pytest.approx(z_score(1, 1000, 0.01))
    assert drain_line(0.9, 0.02, 3.0) == pytest.approx(0.9 * 0.94)


@pytest.mark.parametrize("noise", [0.02, 0.05, 0.08])
def test_noise_of_a_healthy_fleet_is_its_spread(noise):
    assert robust_noise(healthy_ratios(noise), 0.01) == pytest.approx(noise, rel=0.15)


def test_noise_never_below_the_floor():
    assert robust_noise([1.0] * 50, 0.01) == 0.01 and robust_noise([1.0], 0.03) == 0.03


def test_a_heavy_low_tail_does_not_widen_the_noise():
    # 8% of pair measurements hit by transient congestion (x0.45-0.85): the bulk's scale stays 2%.
    ms = run(names(512), Fabric(noise=0.02, transient=0.08), seed=3, intra=False)
    assert robust_noise([m.busbw / 380.0 for m in ms], 0.01) == pytest.approx(0.02, rel=0.2)


def test_level_estimate_ignores_the_lowest_pair_of_three():
    assert top_half([0.5, 1.0, 0.98]) == [1.0, 0.98] and level_estimate([0.5, 1.0, 0.98]) == pytest.approx(0.99)
    assert level_estimate([0.8, 0.9]) == pytest.approx(0.85)  # two partners: both count


def test_kept_uses_every_clean_pair_and_leaves_out_far_hits():
    from slurmqual.burnin.judge.noise import kept
    assert kept([0.86, 0.84, 0.85], 0.02) == [0.86, 0.84, 0.85]  # no upward bias of a top-half mean
    assert level_estimate([0.86, 0.84, 0.85], 0.02) == pytest.approx(0.85)
    assert kept([1.0, 0.99, 0.55, 1.01], 0.02) == [1.0, 0.99, 1.01]  # a transient hit far below
    # More than half far below the best: the pairs disagree, the top half decides.
    assert kept([1.0, 0.6, 0.55], 0.02) == [1.0, 0.6]
    assert kept([1.0, 0.6, 0.55]) == top_half([1.0, 0.6, 0.55])  # no scale known: the top half
