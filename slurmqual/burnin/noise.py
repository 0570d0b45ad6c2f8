"""Run-to-run noise and the margins it sizes: plain functions that every
judgement (pair keys, intra keys, per-rail and per-GPU keys) shares, so a
node is drained only when noise alone could not have put it there.

Noise is *relative*: a measurement divided by the level it should be at
(1.0 = exactly at level); its spread is a relative standard deviation.
"""

from __future__ import annotations

import math
from statistics import NormalDist, median

NORMAL = NormalDist()


def upper_median(values: list[float]) -> float:
    """The upper median (an element of `values`): the score of a node over its partners."""
    s = sorted(values)
    return s[len(s) // 2]


def z_score(k: int, n: int, alpha: float) -> float:
    """Margin in noise sds for a score that is the upper median of k values:
    below it, `need` values must all fall; chance over n nodes stays < alpha."""
    need = k // 2 + 1
    p = (alpha / (max(n, 1) * math.comb(k, need))) ** (1.0 / need)
    return NORMAL.inv_cdf(1.0 - min(max(p, 1e-15), 0.5))


def margins(n: int, alpha: float, k_max: int = 7) -> dict[int, float]:
    """z_score for 1..k_max values at fleet size n (more values use k_max's)."""
    return {k: z_score(k, n, alpha) for k in range(1, k_max + 1)}


def drain_line(line: float, sigma: float, z: float) -> float:
    """Where a score is clearly below `line`: z noise sds under it."""
    return line * (1 - z * sigma)


def one_sided_z(alpha: float, n: int) -> float:
    """Margin in sds for one value per item over n items (chance < alpha in all)."""
    return NORMAL.inv_cdf(1 - alpha / max(n, 1))


def robust_noise(ratios: list[float], floor: float) -> float:
    """Robust relative spread: the MAD of the upper half (the low side is where
    slow nodes and the selection of healthy-looking pairs cut in), widened
    when the low tail is heavier than a normal's (stragglers), never below
    the floor."""
    if len(ratios) < 2:
        return floor
    mid = median(ratios)
    upper = [r - mid for r in ratios if r >= mid]
    mad = 1.4826 * median(upper) if len(upper) >= 2 else 0.0
    tail = 0.0
    if len(ratios) >= 200:
        s = sorted(ratios)
        q = s[int(0.01 * len(s))]
        tail = (mid - q) / 2.326
    return max(mad / mid if mid else floor, tail / mid if mid else 0.0, floor)
