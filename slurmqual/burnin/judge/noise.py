"""Run-to-run noise and the margins it sizes: plain functions that every
judgement (pair keys, intra keys, per-rail and per-GPU keys) shares, so a
node is drained only when noise alone could not have put it there.

Noise is *relative*: a measurement divided by the level it should be at
(1.0 = exactly at level); its spread is a relative standard deviation.
"""

from __future__ import annotations

import bisect
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


def margins(n: int, alpha: float, k_max: int = 16) -> dict[int, float]:
    """Margin in noise sds for a level estimated from 1..k_max partners
    (`level_estimate`: a mean of the top k // 2 + 1) at fleet size n; more
    partners use k_max's (conservative)."""
    return {k: fleet_margin(n, alpha, k // 2 + 1) for k in range(1, k_max + 1)}


def drain_line(line: float, sigma: float, z: float) -> float:
    """Where a score is clearly below `line`: z noise sds under it."""
    return line * (1 - z * sigma)


def one_sided_z(alpha: float, n: int) -> float:
    """Margin in sds for one value per item over n items (chance < alpha in all).
    Never below 0 (the bulk's centre): a run with as few values as `alpha`
    expects below the margin (one pair, asked where one healthy link per run
    lies) gets the centre, not a math error that ends its analysis."""
    return NORMAL.inv_cdf(max(0.5, 1 - alpha / max(n, 1)))


def robust_noise(ratios: list[float], floor: float) -> float:
    """Relative spread of the bulk: the MAD of the upper half, never below
    the floor. Only the upper half: the low side is where slow nodes,
    transient congestion and stragglers land, and where the selection of
    healthy-looking pairs cuts in; a heavy low tail must not widen the
    scale of the bulk (that margin would swallow every slow node). The
    tail is handled by the estimators instead: a single slow pair never
    convicts a node (see pairs.slow_rule)."""
    return _upper_mad(ratios, floor)[0]


def _upper_mad(ratios: list[float], floor: float) -> tuple[float, float]:
    """robust_noise and the median it measured from (clean_noise needs both:
    one sort of 24,000 healthy pairs per key at 16k x 8 rails, not two)."""
    if len(ratios) < 2:
        return floor, median(ratios) if ratios else 0.0
    ranked = sorted(ratios)  # once: the median and the upper half from one sort
    mid = median(ranked)
    upper = [r - mid for r in ranked[bisect.bisect_left(ranked, mid):]]
    mad = 1.4826 * median(upper) if len(upper) >= 2 else 0.0
    return max(mad / mid if mid else floor, floor), mid


def clean_noise(ratios: list[float], floor: float) -> float:
    """Relative spread of pairs between nodes not under suspicion, as an
    upper bound: the standard deviation of the bulk (values more than 3
    robust sds below the median, transient hits and stragglers, left out;
    the high side kept whole), plus two sds of its own uncertainty; never
    more than the upper half's MAD with its own bound (heavy tails). With the slow nodes' pairs out
    (pairs.healthy_noise) the sample is clean: a standard deviation has
    more than twice the precision of the upper half's MAD, and the bound
    for its uncertainty is that much tighter (a 16-node fleet read 0.034
    for a true 0.02 through the MAD's bound alone)."""
    # Too few pairs to say (a requalify's handful): the upper half's MAD
    # and its wide bound, (the floor, three times over, with none).
    upper_mad, mid = _upper_mad(ratios, floor)  # once: it sorts every healthy pair (131,000 at 16k x 8 rails)
    few = upper_mad * (1 + 2 / math.sqrt(max(len(ratios) // 2, 1)))
    if len(ratios) < 8:
        return few
    s0 = upper_mad * mid
    # A value far above the bulk is left out too: bandwidth has a ceiling,
    # and a pair that far above is a timing artefact, not spread (the width
    # `high_bounded` bounds a node's highest reading by: 4.5 pair-difference
    # sds). One at 2.2x a 64-node student-t rail's level took its sd past
    # the MAD's wide bound: 0.185 for a true 0.08, and a route at 0.575 was
    # never measured again (links 8% 9011). Only that far: a 3-sd cut on
    # the high side took a 16-node fleet's bound under its true noise.
    keep = [r for r in ratios if mid - 3 * s0 <= r <= mid + 4.5 * math.sqrt(2) * s0]
    if len(keep) < 8:
        return few
    mean = sum(keep) / len(keep)
    sd = math.sqrt(sum([(r - mean) ** 2 for r in keep]) / (len(keep) - 1)) / mean
    # A heavy-tailed spread (student-t) blows a standard deviation up far
    # past the bulk's: the MAD's bound is then the smaller, and the one kept.
    return max(min(sd * (1 + 2 / math.sqrt(2 * (len(keep) - 1))), few), floor)


def top_half(values: list[float]) -> list[float]:
    """The upper k // 2 + 1 of k values: what is left when up to half (less
    one) of a node's pairs are hit by transient congestion."""
    return sorted(values, reverse=True)[:len(values) // 2 + 1]


def kept(values: list[float], sigma: float | None = None) -> list[float]:
    """The pairs a node's level is estimated from. Without a noise scale:
    the top half (up to half, less one, may be transient hits). With one:
    every pair within 4.5 pair-difference sds of its best (`high_bounded`:
    one pair far above the rest is no reference and counts as at most that
    far above it), so a node with clean pairs uses them all (no upward
    bias from keeping only the top ones, and the margin shrinks with every
    pair); hits far below are left out. When more than half would be left
    out, the pairs disagree: the top half then."""
    if sigma is None:
        return top_half(values)
    values, ref = high_bounded(values, 4.5 * sigma * math.sqrt(2))
    band = ref * (1 - 4.5 * sigma * math.sqrt(2))
    use = [v for v in values if v >= band]
    return use if len(use) >= len(values) // 2 + 1 else top_half(values)


def upper_reference(values: list[float]) -> float:
    """Where a node's best pairs read, ignoring one high outlier: the second
    highest of four or more values, else the highest (of three, one high and
    two low may as well be a healthy node with two transient hits).
    Bandwidth has a hard ceiling (line rate): a single pair far above the
    rest is a measurement artefact (student-t noise puts one 15-30% high),
    not evidence of health; as the reference it cut a node at 0.85 down to
    that pair and its top half (small fleets: one pair at 1.04-1.07 and
    four to six at 0.80-0.92 read 0.93, at the line)."""
    return sorted(values)[-2] if len(values) >= 4 else max(values)


def high_bounded(values: list[float], width: float) -> tuple[list[float], float]:
    """`values` with one reading far above the rest bounded, and the
    reference it is bounded from (`upper_reference`): of four or more, the
    highest counts at most `width` (relative) above the second highest, as
    the lowest kept is at most that far below it. What every pair key's
    node levels, own levels and partners' vouching read (kept, _levels_of)."""
    if len(values) < 4:
        return values, max(values)
    top, ref = sorted(values)[-2:][::-1]
    cap = ref * (1 + width)
    if top > cap:
        return [v if v <= cap else cap for v in values], ref
    return values, ref


def level_estimate(values: list[float], sigma: float | None = None) -> float:
    """A node's level from its partners' values: the mean of `kept` values.
    Its chance to fall below c is at most that of the mean of all m kept
    (what is left out lies below the kept ones, so leaving it out only
    raises the mean): `fleet_margin` with that m bounds it."""
    use = kept(values, sigma)
    return sum(use) / len(use)


def fleet_margin(n: int, alpha: float, m: int) -> float:
    """Margin, in noise sds, for a mean of m values judged over n nodes:
    chance that noise alone puts any node at the line below it < alpha."""
    return one_sided_z(alpha, n) / math.sqrt(max(m, 1))
