"""Judging one pair key (``test:pair``): which nodes are slow, which links.

Stages, each a plain function or small class:

- `link_values`: a link measured more than once is one link (median of its
  repeats); the adjacency of nodes and their partners;
- `node_scores`: each node's level over partners not convicted (the mean
  of the top half of its pairs: a transient on one pair does not move it);
- `top_level` / `healthy_noise`: the level healthy nodes run at and the
  noise of pairs between healthy-looking nodes;
- `Conviction`: the conviction loop at one line and noise, slowest first,
  each conviction removing that node from its partners' evidence;
- `convict`: passes of that loop until the fleet median settles;
- `suspect_links`: slow pairs between two nodes fine elsewhere;
- `judge_bounded`: a node whose pairs ran through a slow switch it is not
  behind judged on its other pairs (such a pair bounds it, see fabricmodel);
- `judge_pairs`: all of the above, plus the split-fleet and guard re-judging,
  and for each `retest` how ambiguous it is and which way its estimate leans
  (analyze's retest budget decides the least ambiguous ones by that).
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field, replace
from operator import itemgetter
from statistics import median
from typing import TYPE_CHECKING, Collection, Iterable

from .plan import LINK_VALUES
from .noise import NORMAL, clean_noise, drain_line, fleet_margin, kept, level_estimate, margins, one_sided_z, robust_noise, top_half, high_bounded, upper_reference

if TYPE_CHECKING:
    from ..records import Measurement, Params

Pair = tuple[str, str]
# Where a decision rests on a fitted model (the transient hits' rate and
# spread; an estimate the margin left undecided), its chance of a false
# drain is held this many times below alpha: the model is itself estimated.
MODEL_SAFETY = 10
LUCKY_ODDS = 10  # a healthy pair among hits: healthy node vs intermittently slow one
MIN_HITS = 3  # clearly low healthy pairs before the fleet is said to have transient hits
DESCRIBED_HITS = 12  # ... before their spread (and how low they go) is taken from them
# Poisson mean under which MIN_HITS or more values are a 1% chance: fewer
# pairs this low expected from the gaussian bulk than this, and MIN_HITS seen, is a heavy tail.
HEAVY_COUNT = 0.436
OUTLIER_Z = 3.0  # a node's lowest pair this many pair-difference sds below its others: a link's, not its own
# The most pairs a run gives a node: three in the first round, two new
# partners in each of two retest rounds, less one for a dead task or a link.
BOUND_PAIRS = 6
PEERS = 3  # nodes behind the same slow switches before their level is a reference (judge_behind)
# Healthy links per key that a value within the one-measurement margin but
# below this many's gaussian cut sends to be measured again (`suspect_links`):
# a slow route the rounds' three values would settle reads there on its one.
AGAIN_HEALTHY = 1.0
# Noise sds under the healthy level where a pair is clearly low (a cable or
# a transient hit, not the bulk): counted as such by `suspect_links`, and on a
# rail key, measured once more.
CLEARLY_LOW = 4.0


@dataclass
class KeyResult:
    """The verdicts of one measurement key, and what judged them."""
    key: str
    median: float
    noise: float
    line: float
    verdicts: dict[str, str]
    scores: dict[str, float | None]
    links: list[list[str]] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    # Per `retest` node: (ambiguity in noise sds from the line, smaller is
    # more ambiguous, None when nothing can decide it; best-estimate verdict).
    leaning: dict[str, tuple[float | None, str]] = field(default_factory=dict)
    # Each node's own level where it differs from its score (pairs.own_levels:
    # without suspect partners and links): what baselines compare.
    own: dict[str, float | None] = field(default_factory=dict)
    # The links of `links` the evidence settles (pairs.suspect_links): no round re-measures them.
    clear: list[list[str]] = field(default_factory=list)
    # Links slow on one measurement that transient hits could explain: not named, measured again.
    again: list[list[str]] = field(default_factory=list)


@dataclass
class PairGraph:
    """One value per link, and each node's partners with those values."""
    repeats: dict[Pair, list[float]]
    value: dict[Pair, float]
    adj: dict[str, list[tuple[str, float]]]
    best: dict[str, float]  # each node's best pair
    # Each node's level over all its partners, per noise scale asked for
    # (most nodes have no convicted partner: a conviction pass and the
    # scores after it share these instead of estimating 16k levels again).
    _levels: dict[float | None, dict[str, float]] = field(default_factory=dict, repr=False)
    # The unconvicted first pass's (fleet level, noise, tail): `first_tail`
    # reads it for the pool of a run's rail keys, `convict` starts from it.
    _first: tuple | None = field(default=None, repr=False)
    # Whether a node's lowest pair may be set aside as one slow link's
    # (`Conviction.link_low`): on whole-node keys; not on rail keys, where a
    # NIC slow by a little reads low with every partner, each of whom reads
    # fine elsewhere, and the rule would leave it undecided round after round
    # and name the node instead of the NIC (judge_pairs sets it per key).
    link_lows: bool = field(default=True, repr=False)
    # What `transients` asks on every conviction pass (27 per run at 16k x 8
    # rails), once per graph: the nodes whose pairs may leave them not fine
    # elsewhere near a line, with their pairs' (sum, count); the pairs under it.
    _tight: tuple[float, list[float], list[tuple[str, float, int]]] | None = field(default=None, repr=False)
    _low: tuple[float, list[float], list[Pair]] | None = field(default=None, repr=False)
    _ranked: tuple[list[float], list[str]] | None = field(default=None, repr=False)
    _multi: dict[Pair, list[float]] | None = field(default=None, repr=False)

    def multi(self) -> dict[Pair, list[float]]:
        """The pairs measured more than once, with their values (a retest
        round's links measured again: a few hundred at most)."""
        if self._multi is None:
            self._multi = {p: vs for p, vs in self.repeats.items() if len(vs) > 1}
        return self._multi

    def levels(self, sigma: float | None) -> dict[str, float]:
        if sigma not in self._levels:
            if len(self._levels) > 4:
                self._levels.clear()
            self._levels[sigma] = _levels_of(self.adj, sigma)
        return self._levels[sigma]

    def tight(self, line: float) -> list[tuple[str, float, int]]:
        """(node, sum of its pairs' values, their count) of the nodes one of
        whose pairs may exceed (sum) - line x (count - 1) (transients' "fine
        elsewhere" bound): those whose pairs other than their best average
        under the line, with a margin for rounding (the caller checks each
        pair exactly), and nodes with fewer than two pairs. Every other
        node's pairs are all within it. Found once per graph for lines up
        to 2% above the first one asked (a conviction pass moves it less)."""
        want = line * (1 + 1e-9) + 1e-9
        if self._tight is None or want >= self._tight[0]:
            bound = want * 1.02
            best, rows = self.best, []
            for n, pairs in self.adj.items():
                count = len(pairs)
                if count < 2:
                    rows.append((-math.inf, n, 0.0, count))
                    continue
                total = sum(list(map(_value, pairs)))
                k = (total - best[n]) / (count - 1)
                if k < bound:
                    rows.append((k, n, total, count))
            rows.sort()
            self._tight = (bound, [r[0] for r in rows], [r[1:] for r in rows])
        _bound, keys, rows = self._tight
        return rows[:bisect.bisect_right(keys, want)]

    def ranked_best(self, pairs_once: bool = False) -> tuple[list[float], list[str]]:
        """The nodes' best pairs, lowest first (values, nodes): top_level asks
        on every pass, most of them with no convict to leave out. `pairs_once`:
        each pair once (under the first of its ends by name), for the switch
        search's level (components.attribute): a lucky pair is the best of
        both its ends, and counted twice two of them were a quarter of a
        16-node fleet's best pairs and set its level 17% high (every healthy
        pair read 0.85 of it, and a unit of healthy nodes was named a slow
        switch)."""
        if not pairs_once:
            if self._ranked is None:
                ranked = sorted((v, n) for n, v in self.best.items())
                self._ranked = ([v for v, _n in ranked], [n for _v, n in ranked])
            return self._ranked
        once: dict[Pair, tuple[float, str]] = {}
        for n, pairs in self.adj.items():
            q, v = max(pairs, key=_value)
            pair = (n, q) if n < q else (q, n)
            if pair not in once or n < once[pair][1]:
                once[pair] = (v, n)
        out = sorted(once.values())
        return [v for v, _n in out], [n for _v, n in out]

    def below(self, line: float) -> tuple[list[float], list[Pair]]:
        """The pairs whose value is under `line`, lowest first (values, pairs):
        found once per graph for lines up to 2% above the first one asked."""
        if self._low is None or line >= self._low[0]:
            bound = line * 1.02
            ranked = sorted((v, p) for p, v in self.value.items() if v < bound)
            self._low = (bound, [v for v, _p in ranked], [p for _v, p in ranked])
        _bound, values, pairs = self._low
        i = bisect.bisect_left(values, line)
        return values[:i], pairs[:i]


_value = itemgetter(1)  # (partner, value) -> value, in C


def _levels_of(adj: dict[str, list[tuple[str, float]]], sigma: float | None) -> dict[str, float]:
    """noise.level_estimate of every node's partners' values, inlined (the
    same operations in the same order, so the same floats): 16k nodes x 8
    rails ask it 300,000 times."""
    out: dict[str, float] = {}
    if sigma is None:
        for n, pairs in adj.items():
            use = sorted(map(_value, pairs), reverse=True)[:len(pairs) // 2 + 1]
            out[n] = sum(use) / len(use)
        return out
    width = 4.5 * sigma * math.sqrt(2)
    shrink = 1 - width
    for n, pairs in adj.items():
        values, ref = high_bounded(list(map(_value, pairs)), width)
        band = ref * shrink
        use = [v for v in values if v >= band]
        if len(use) < len(values) // 2 + 1:
            use = sorted(values, reverse=True)[:len(values) // 2 + 1]
        out[n] = sum(use) / len(use)
    return out


def link_values(ms: Iterable["Measurement"]) -> PairGraph:
    repeats: dict[Pair, list[float]] = {}
    get = repeats.get
    for m in ms:
        a, b = m.nodes
        if a == b:
            continue
        pair = (a, b) if a < b else (b, a)
        seen = get(pair)
        if seen is None:
            repeats[pair] = [m.busbw]
        else:
            seen.append(m.busbw)
    value = {pair: (vs[0] if len(vs) == 1 else median(vs)) for pair, vs in repeats.items()}
    adj: dict[str, list[tuple[str, float]]] = {}
    for (a, b), v in value.items():
        adj.setdefault(a, []).append((b, v))
        adj.setdefault(b, []).append((a, v))
    best = {n: max(map(_value, pairs)) for n, pairs in adj.items()}
    return PairGraph(repeats, value, adj, best)


def node_scores(g: PairGraph, convicted: set[str], sigma: float | None = None) -> dict[str, float | None]:
    """Level estimate over partners not convicted (a convict keeps all its pairs).
    Only the convicts' partners are estimated afresh: linear in the pairs
    once per noise scale, then in the convicts' pairs."""
    out: dict[str, float | None] = dict(g.levels(sigma))
    adj = g.adj
    for n in {q for c in convicted for q, _v in adj.get(c, ())} - convicted:
        vals = [v for q, v in adj[n] if q not in convicted]
        out[n] = level_estimate(vals, sigma) if vals else None
    return out


def fleet_level(g: PairGraph, convicted: set[str], sigma: float | None, threshold: float) -> float:
    """The fleet median the line is drawn from: a median over node levels,
    each leaving out its partners that look slow themselves (their top-half
    level under the provisional line), so that a slow node does not pull its
    healthy partners' levels, and through them the median, down (in a small
    fleet three partners of one slow node move it by percents)."""
    top = node_scores(g, convicted)
    provisional = [s for s in top.values() if s is not None]
    if not provisional:
        return 0.0
    cut = threshold * median(provisional)
    levels = []
    whole = g.levels(sigma)  # a node with no partner left out keeps its level over all (most nodes)
    # The nodes whose pairs leave one out: partners of a convict or of a
    # node under the cut (found from those few, not by scanning every pair).
    left_out = [q for q in g.adj if q in convicted or not (top.get(q) or 0) >= cut]
    affected = {n for q in left_out for n, _v in g.adj[q]}
    for n, pairs in g.adj.items():
        if n in convicted or n not in affected:
            levels.append(whole[n])
            continue
        vals = [v for q, v in pairs if q not in convicted and (top.get(q) or 0) >= cut] or \
            [v for q, v in pairs if q not in convicted]
        if vals:
            levels.append(level_estimate(vals, sigma))
    return median(levels)


def top_level(g: PairGraph, convicted: set[str], threshold: float, pairs_once: bool = False) -> float:
    """The level healthy nodes run at: the median of the nodes' best pairs
    near the top (a healthy node with one healthy partner shows it);
    `pairs_once`: each pair once (PairGraph.ranked_best)."""
    values, names = g.ranked_best(pairs_once)
    ranked = [v for v, n in zip(values, names) if n not in convicted] if convicted else values
    if not ranked:
        return 0.0
    top = ranked[(3 * len(ranked)) // 4]
    return median(ranked[bisect.bisect_left(ranked, threshold * top):])  # (sorted: the values >= the cut)


def healthy_noise(g: PairGraph, score: dict, convicted: set[str], threshold: float, floor: float) -> float:
    """Noise from pairs of healthy-looking nodes: scores near the fleet's top
    level (with half the fleet slow the median itself is not)."""
    top = top_level(g, convicted, threshold)
    if not top:
        return floor
    # The healthy nodes' level: the median score of the nodes near the top.
    # The top level itself (a median of best pairs) sits a noise sd or more
    # above it (the best of 3-5 pairs): at 8% noise a cut at 90% of it
    # left out half the healthy nodes, and with them the low half of the
    # pairs: the noise read 0.063 for a true 0.08, and healthy nodes failed.
    at = threshold * top
    near = [s for n, s in score.items() if s is not None and n not in convicted and s >= at]
    level = median(near) if near else top
    # The pairs of nodes not under suspicion: both ends' levels at or above
    # the line. Slow nodes not yet convicted (a tenth of a small fleet at
    # 0.85) put their pairs below the bulk and move its median down: their
    # spread read 0.04-0.05 for a true 0.02 and kept them undecided. The
    # line is far enough below the level (5 sds of a pair at 2% noise, more
    # for a node's mean of pairs) that it does not cut the healthy bulk.
    # Too few such pairs (most of a tiny fleet suspect): a looser cut.
    healthy: list[float] = []
    for cut in (threshold * level, (threshold - 0.15) * level):
        # (the nodes first, then their pairs: a pair is in when both ends are)
        fine = {n for n in g.adj if n not in convicted and (score[n] or 0) >= cut}
        healthy = [v / level for (a, b), v in g.value.items() if a in fine and b in fine]
        if len(healthy) >= 8:
            break
    # An upper bound, not the estimate (noise.clean_noise): a scale
    # estimated too small is what drains a healthy node.
    return clean_noise(healthy, floor)


@dataclass(frozen=True)
class Transients:
    """The low tail of pairs between healthy nodes, from the fleet's own
    pairs: how often such a pair comes out low (transient congestion, a
    straggling run, a heavy-tailed spread) and how low. A healthy node looks
    slow only when most of its pairs land in that tail together: the chance
    of that over the fleet decides whether a node's low pairs can be its own
    fault. `ratios` are the clearly low ones (hits: 4 noise sds under the
    healthy level, or the line), `rate` their share (an upper bound);
    `tail` every sample pair below the line (ratios to the healthy level),
    `total` the sample's size: a heavy tail (student-t) puts far more pairs
    between 4 sds and the line than a gaussian would, and a node whose
    pairs all land there is no slower than the fleet's healthy ones."""
    rate: float
    ratios: tuple[float, ...]
    nodes: int
    tail: tuple[float, ...] = ()
    total: int = 0
    sigma: float = 0.0
    # The tail of every key of the same test and kind (the rails of a run:
    # one fabric, one noise source), pooled (`pool_tails`): a rail key of a
    # small fleet has 100-200 sample pairs, too few to show a student-t
    # tail its 8 rails together show plainly. An upper bound, like `tail`.
    pool: tuple[float, ...] = ()
    pool_total: int = 0

    def chance(self, low: int, k: int, width: float, agree: int | None = None) -> float:
        """Expected number of healthy nodes, fleet-wide, with `low` of their
        `k` pairs hit and `agree` of those hits (default all) within `width`
        (relative) of each other: binomial count times the agreement chance
        of the hits the fleet showed."""
        if low <= 0:
            return float(self.nodes)
        return self.nodes * math.comb(k, low) * self.rate ** low * self.agreement(min(agree or low, low), width)

    def cdf(self, x: float) -> float:
        """An upper bound on the chance that a pair between healthy nodes
        reads at most `x` of the healthy level: the fleet's own share of
        such pairs (two sds of the count above what was seen), never below
        the gaussian bulk's. Below the lowest MIN_HITS sample pairs the
        count says nothing: the bulk's where those are what a gaussian puts
        there; where they are far lower (a heavy tail), the share at the
        lowest of them, which bounds every lower value too (a 128-node
        student-t fleet's two pairs at 0.43 and 0.50 of one healthy node,
        extrapolated as gaussian, read one in ten million and drained it)."""
        bulk = NORMAL.cdf((x - 1) / self.sigma) if self.sigma > 0 else 0.0
        # The key's own sample and the pool of its test's keys: the larger
        # bound (each is one; a key that shows more tail than its pool keeps it).
        return min(1.0, max(bulk, self._share(self.tail, self.total, x), self._share(self.pool, self.pool_total, x)))

    def _share(self, tail: tuple[float, ...], total: int, x: float) -> float:
        """One sample's bound at `x` (0: it says nothing beyond the bulk)."""
        if not total:
            return 0.0
        h = bisect.bisect_right(tail, x)
        if h < MIN_HITS:
            if not self._heavy(tail, total):
                return 0.0
            h = MIN_HITS
        return (h + 2 * math.sqrt(h)) / total

    def _heavy(self, tail: tuple[float, ...], total: int) -> bool:
        if len(tail) < MIN_HITS or self.sigma <= 0:
            return False
        return total * NORMAL.cdf((tail[MIN_HITS - 1] - 1) / self.sigma) < HEAVY_COUNT

    @property
    def heavy(self) -> bool:
        """The sample's lowest MIN_HITS pairs are lower than a gaussian bulk
        puts that many (chance under 1%): its tail is heavier than the bulk's
        (the key's own sample or its pool)."""
        return self._heavy(self.tail, self.total) or self._heavy(self.pool, self.pool_total)

    def chance_low(self, low: list[float], k: int, below: float = 0.0) -> float:
        """Expected number of healthy nodes, fleet-wide, whose `k` pairs
        read as low as `low` (sorted ratios to the healthy level of the pairs
        below the line): for each j from a majority (k // 2 + 1: a node's
        level is low only when most of its pairs are) to len(low), j of k
        pairs at or below the j-th lowest and agreeing as closely as the
        lowest j do (`agreement` over the fleet's pairs that low). The node
        shows every one of these at once: the least bound holds. `below`:
        stop refining once a bound is under it (the caller's limit)."""
        best = 1.0
        for j in range(k // 2 + 1, len(low) + 1):
            x = low[j - 1]
            b = math.comb(k, j) * self.cdf(x) ** j
            if j > 1 and self.nodes * b >= below:
                b *= self.agreement(j, max(x - low[0], self.sigma), x)
            best = min(best, b)
        return self.nodes * best

    @property
    def described(self) -> bool:
        """Enough hits seen to say how low they go: a dozen low pairs between
        healthy nodes are congestion, not a dozen bad cables (a few are
        either, and are named as links)."""
        return len(self.ratios) >= DESCRIBED_HITS

    def below(self, ratio: float, slack: float) -> float:
        """Share of the fleet's *other* hits at or below `ratio` (of the
        healthy level) + `slack` (the lowest of a few dozen hits is not the
        lowest a hit goes): a pair's own value, itself counted as a hit when
        both its ends look healthy, does not explain it."""
        r = self.ratios
        if not r:
            return 0.0
        i = bisect.bisect_left(r, ratio)
        own = 1 if i < len(r) and r[i] == ratio else 0
        return (bisect.bisect_right(r, ratio + slack) - own) / len(r)

    def agreement(self, m: int, width: float, upto: float | None = None) -> float:
        """Chance that m hits land within `width` of each other (their spread
        in the fleet's observed hits; with `upto`, in its tail pairs at or
        below that ratio, the key's own or its pool's, whichever has more:
        a small fleet's rail shows too few hits to say how they scatter,
        its rails together do); 1 while too few were seen to say."""
        if upto is None:
            r = self.ratios
        else:
            own, pooled = bisect.bisect_right(self.tail, upto), bisect.bisect_right(self.pool, upto)
            r = self.tail[:own] if own >= pooled else self.pool[:pooled]
        if m <= 1 or len(r) < DESCRIBED_HITS:
            return 1.0
        # Fraction of windows: for each observed hit as the lowest, the share
        # of hits within `width` above it, to the power m - 1 (hits are
        # independent draws from what was observed).
        total = 0.0
        j = 0
        n = len(r)
        for i in range(n):
            if j < i:
                j = i
            while j + 1 < n and r[j + 1] - r[i] <= width:
                j += 1
            total += ((j - i + 1) / n) ** (m - 1)
        return min(1.0, m * total / n)


def runs_tail(per: dict, line: float, fleet: float, sigma: float) -> Transients:
    """The low tail of a single-node key's healthy runs (intra-node runs per
    node, a GPU test's runs per GPU), as `transients` takes a pair key's: a
    run is in the sample when every other run of its item is at or above
    the line (an item whose retest came back fine: its low first run was
    the fleet's tail), or it is its item's only run and at or above the
    line. Chosen by the item's other runs, never by the run's own value; an
    item low on two runs (slow, or the one asked about) is out. Ratios to
    the fleet level."""
    total, tail = 0, []
    for vs in per.values():
        below = sum(1 for v in vs if v < line)
        for v in vs:
            low = v < line
            if below - low or (low and len(vs) == 1):
                continue
            total += 1
            if low:
                tail.append(v / fleet)
    tail.sort()
    return Transients(0.0, (), len(per), tail=tuple(tail), total=total, sigma=sigma)


def transients(g: PairGraph, score: dict, convicted: set[str], line: float, level: float,
               sigma: float) -> Transients:
    """The fleet's healthy pairs and their low tail.

    `tail` (and `total`): pairs whose ends are each fine elsewhere (not
    convicted, their other pairs averaging at or above the line: chosen by
    their other pairs, never by their own value, the tail is the healthy
    pairs' tail; all other pairs at or above the line left a 128-node
    student-t fleet's rail 56 of 192 pairs, too few to show its tail, and
    a healthy node drained), below the line.
    Not the pairs of nodes whose *level* is above the line: at 8% noise
    with three partners one transient hit puts a node's level under the
    line, and a sample of only the nodes without hits shows none (a
    heavy-tailed fleet read as tail-free: three of its tail pairs on one
    healthy node drained it, and single transient hits were named as
    cables on one measurement).

    `ratios` (hits) and `rate`: the pairs between nodes whose level is at
    or above the line that came out clearly low (below the line and 4
    noise sds under the healthy level); what the link rules ask whether
    the fleet's hits explain a single low value. The rate is an upper
    bound (two sds of the count above what was seen), so that a fleet that
    showed a few hits is not trusted to have that few. Fewer than MIN_HITS
    are no rate at all: one or two low pairs are as likely slow links (a
    small fleet would read one bad cable as a 15% transient rate), and a
    rate that low costs no margin anyway (at 1 in 400, three hits on one
    node are 1 in 64 million)."""
    cut = min(line, level * (1 - 4 * sigma))
    # node -> the highest value one of its pairs may have for the node to be
    # fine elsewhere: its other pairs average at or above the line when the
    # pair's value is at most (sum of its pairs) - line x (its other pairs).
    # Only nodes where some pair can exceed it are asked (g.tight: the few
    # near the line, and the partners of convicts, whose sums change), and
    # only their pairs; the counts are the fleet's pairs less those left out
    # (16k nodes x 8 rails: a pass over every pair per conviction pass was a
    # sixth of the analysis).
    adj = g.adj
    upto: dict[str, float] = {}
    around = {q for c in convicted for q, _v in adj[c]} - convicted if convicted else set()
    for n in around:
        free = [v for q, v in adj[n] if q not in convicted]
        upto[n] = sum(free) - line * (len(free) - 1) if len(free) >= 2 else -math.inf
    for n, total_n, count in g.tight(line):
        if n not in convicted and n not in around:
            upto[n] = total_n - line * (count - 1) if count >= 2 else -math.inf
    out: set[Pair] = set()  # pairs whose ends are not both fine elsewhere
    for c in convicted:
        out.update([(c, q) if c < q else (q, c) for q, _v in adj[c]])
    for n, t in upto.items():
        for q, v in adj[n]:
            if v > t:
                out.add((n, q) if n < q else (q, n))
    # The tail counts measurements, not links: a pair measured again was
    # picked for reading low once (a retest round re-measures links slow on
    # one value), and the median of its hit and a fine repeat is no hit:
    # 167 rail pairs re-measured in a 1,024-node student-t fleet took two
    # thirds of its tail below 0.6 away, and a healthy NIC whose three pairs
    # read 0.53-0.66, explained by that tail in round 0, was drained on the
    # same three values in round 1.
    multi = g.multi()
    tail: list[float] = []
    total = len(g.value) - len(out) + sum(len(vs) - 1 for pair, vs in multi.items() if pair not in out)
    for pair, vs in multi.items():
        if pair not in out:
            tail.extend(v / level for v in vs if v < line)
    # Pairs with an end whose level is under the line (or convicted) are no
    # hits; the rest of the fine-elsewhere pairs count for the rate.
    unsure = set(out)
    for n in adj:
        if n in convicted or (score[n] or 0) < line:
            unsure.update([(n, q) if n < q else (q, n) for q, _v in adj[n]])
    strict = len(g.value) - len(unsure)
    hits = []
    values, pairs = g.below(line)
    for v, pair in zip(values, pairs):
        if pair in out:
            continue
        if pair not in multi:
            tail.append(v / level)
        if v < cut and pair not in unsure:
            hits.append(v / level)
    h = len(hits)
    tail.sort()
    hits.sort()
    rate = 0.0 if h < MIN_HITS else min(1.0, (h + 2 * math.sqrt(h)) / max(strict, 1))
    return Transients(rate, tuple(hits), len(g.adj), tuple(tail), total, sigma)


def near_line(score: dict, line: float, sigma: float) -> int:
    """How many nodes could be at the line: their level within 4 sds (of a
    two-pair estimate) of it. The drain margin is sized for these, not the
    whole fleet: a healthy node far above the line cannot be pushed under
    the margin by gaussian noise, so counting it only blunts the test
    (outliers are the transient model's job)."""
    sd = line * sigma / math.sqrt(2)
    return max(1, sum(1 for s in score.values() if s is not None and abs(s - line) <= 4 * sd))


class Conviction:
    """One pass of convictions at a fixed line and noise: nodes below the
    line, slowest first; `convicted` grows in place."""

    def __init__(self, g: PairGraph, line: float, sigma: float, judged: int,
                 convicted: set[str], trusted: frozenset[str], threshold: float = 0.9,
                 hits: Transients | None = None, alpha: float = 0.01):
        """`judged`: how many nodes the margin is sized for (those near the line)."""
        self.g, self.line, self.sigma, self.trusted, self.threshold = g, line, sigma, trusted, threshold
        self.hits, self.alpha, self.judged = hits, alpha, judged
        self.convicted = convicted
        self._drain_at: dict[int, float] = {}

    def healthy_floor(self, m: int) -> float:
        """Below it, a level from m pairs is not a healthy node's (at the
        fleet level, line / threshold), at alpha / MODEL_SAFETY over the
        whole fleet: it decides nodes the margin left undecided."""
        z = fleet_margin(len(self.g.adj), self.alpha / MODEL_SAFETY, m)
        return self.line / self.threshold * (1 - z * self.sigma)

    def drain_line(self, m: int) -> float:
        """Where a level averaged over m pairs is clearly below the line."""
        if m not in self._drain_at:
            self._drain_at[m] = drain_line(self.line, self.sigma, fleet_margin(self.judged, self.alpha, m))
        return self._drain_at[m]

    def est(self, vals: list[float]) -> float:
        return level_estimate(vals, self.sigma)

    def free(self, n: str) -> list[float]:
        return [v for q, v in self.g.adj[n] if q not in self.convicted]

    def consistent(self, vals: list[float], s: float) -> bool:
        """(Nearly) no pair above the line: a slow node bottlenecks every
        pair; a pair far above the node's own level (beyond what noise
        spreads runs of one level apart) contradicts it. One lucky pair
        does not save a node slow with three others: whether hits on a
        healthy node explain the slow ones is `hit_by_transients`' call."""
        high = min(self.line, s * (1 + 6 * self.sigma))
        if sum(1 for v in vals if v >= high) >= len(vals) // 2:
            return False
        # The pairs that make the level agree with one level: transient
        # congestion scatters its hits (x0.45-0.85), a slow node does not.
        top = top_half([v for v in vals if v < high])
        return max(top) - min(top) <= s * 4.5 * self.sigma * math.sqrt(2)

    def slow_rule(self, vals: list[float], s: float, explained: int = 0,
                  each: list[float] | None = None, link: bool = False) -> bool:
        """Slow with at least two distinct partners, its level clearly below
        the line (the margin for the mean of its top half), consistently,
        and not something transient hits on a healthy node explain. Hits
        strike measurements, whoever the partner: `each` (default `vals`)
        are the node's measurements one by one (a pair measured twice is
        two; a suspect partner's too, unless that partner reads as low
        without this node), and `explained` more were measured (with such
        suspect partners) that the question counts as measured, never as
        the node's lows. `link`: its lowest pair may be a slow link's
        (`link_low`)."""
        return len(vals) >= 2 and s < self.drain_line(len(kept(vals, self.sigma))) \
            and not self.one_link(vals, link=link) \
            and self.consistent(vals, s) and not self.hit_by_transients(each or vals, s, explained)

    def each(self, n: str, partners: Iterable[str]) -> list[float]:
        """`n`'s measurements with `partners`, one by one: a pair measured
        again (a suspect link re-measured) is two measurements, not their
        median. A healthy node whose three pairs were measured twice, four
        of the six hit (0.5-0.6), read three pairs at 0.8 and was drained;
        its other three values, at the fleet's level, are what a slow node
        never shows."""
        rep = self.g.repeats
        return [x for q in partners for x in rep[(n, q) if n < q else (q, n)]]

    def one_link(self, vals: list[float], below=None, link: bool = False) -> bool:
        """Slow only through its lowest pair. A slow node or NIC is slow
        with every partner; a slow route or cable is slow on one pair, and
        at 8% noise the band `kept` keeps reaches down to half the level (a
        route at 0.48 and four healthy pairs drained the NIC). With three
        pairs or more: the drain (`below` None) leaves the lowest pair out
        when it is an outlier from the others (3 sds of a pair difference
        below their level; a NIC at 0.86 reads 0.82-0.91 and keeps all); a
        budget decision (`below(m)`: where m pairs cannot be a healthy
        node's) always asks the others alone to be below it: a healthy node
        with one heavy-tailed pair is not decided `fail` past the margin;
        nor is a node whose lowest pair the other end disowns (`link`:
        `link_low`), outlier or not."""
        if len(vals) < 3:
            return False
        low, *rest = sorted(vals)
        est = self.est(rest)
        if below is None and not link and \
                low >= est * (1 - OUTLIER_Z * self.sigma * math.sqrt(1 + 1 / len(rest))):
            return False
        return est >= (below or self.drain_line)(len(kept(rest, self.sigma)))

    def hit_by_transients(self, vals: list[float], s: float, explained: int = 0) -> bool:
        """Would healthy nodes show pairs this low by chance somewhere in the
        fleet (expected count >= alpha / MODEL_SAFETY)? A healthy node reads
        this low only when most of its pairs land in the fleet's low tail
        together (`Transients.chance_low`: the tail as the fleet's own
        healthy pairs show it, heavy or not), and those agree as closely as
        these do (a slow node's pairs agree to within the noise; transient
        hits scatter). Then the pairs do not decide: more partners (a retest) do.
        `explained`: pairs measured besides `vals` whose lows their partners
        explain (suspects: below the line with everyone). They count among
        the measurements a hit could strike, not among the lows: a healthy
        node whose third partner was a NIC at 0.65 and two other pairs hit
        (0.57, 0.62) showed "three lows of three" and was drained."""
        if self.hits is None:
            return False
        level = self.line / self.threshold
        low = sorted(v / level for v in vals if v < self.line)
        if not low:
            return False
        k = len(vals) + explained
        if 2 * len(low) <= k:
            return True  # most of its pairs at or above the line: its low ones are hits
        # A pair clearly above the node's level is what a healthy node hit
        # on its other pairs shows; a slow node shows it only when its
        # slowness comes and goes: held to be ten times rarer.
        lucky = max(vals) > s * (1 + 4.5 * self.sigma * math.sqrt(2))
        limit = self.alpha / MODEL_SAFETY / (LUCKY_ODDS if lucky else 1)
        return self.hits.chance_low(low, k, limit) >= limit

    def link_low(self, n: str, pairs: list[tuple[str, float]]) -> bool:
        """Could one slow link explain `n`'s lowest pair (of `pairs`)? It is
        below the line and low for both ends: the other end's lowest too,
        while it reads fine elsewhere (a pair at or above the line; convicts'
        left out).
        Then `n` is convicted only on the pairs the link does not explain
        (`one_link`); with too few left it is retested with new partners,
        and the link is measured again. A healthy node of a 64-node 8% fleet
        read 0.76, 0.85 and 0.64 (a slow route; its other end read 0.95 and
        0.90 elsewhere), was drained just past the 3-pair margin, and the
        route was never named."""
        if not self.g.link_lows or not pairs:
            return False
        q, v = min(pairs, key=lambda x: x[1])
        if v >= self.line:
            return False
        others = [w for r, w in self.g.adj[q] if r != n and r not in self.convicted]
        return bool(others) and max(others) >= self.line and v < min(others)

    def suspect(self, q: str) -> bool:
        """Below the line with every partner: its pairs may be its own fault
        (a node with a pair above the line is not slow)."""
        if q in self.trusted:
            return False
        vals = self.free(q)
        return bool(vals) and max(vals) < self.line

    def robust(self, n: str, skip: Collection[str] = frozenset()) -> bool:
        """Slow even without the partners that are convicted or suspects:
        with two such partners by the rule above; with one, when that
        partner is fine with someone else and every pair of the node
        (suspects' and convicts' too) is clearly below the line. `skip`:
        partners whose pairs are no evidence of `n`'s level (through a slow
        switch `n` is not behind: `judge_bounded`)."""
        adj, convicted = self.g.adj, self.convicted
        clean = [(q, v) for q, v in adj[n] if q not in convicted and q not in skip and not self.suspect(q)]
        if len(clean) >= 2:
            vals = [v for _q, v in clean]
            # A suspect partner's pair is its low, not this node's, where the
            # partner reads that low without this node too; else it is one
            # of the node's lows (a slow node makes its partners suspects).
            asked, explained = [q for q, _v in clean], 0
            for q, v in adj[n]:
                if q in convicted or q in skip or not self.suspect(q):
                    continue
                if self._partners_low(n, q, v):
                    explained += len(self.g.repeats[(n, q) if n < q else (q, n)])
                else:
                    asked.append(q)
            return self.slow_rule(vals, self.est(vals), explained, self.each(n, asked), self.link_low(n, clean))
        if len(clean) == 1 and len(adj[n]) - len(skip) >= 2:
            q, v = clean[0]
            # Its other pairs back the one clean pair only where they are
            # its lows, not its partners': a partner (suspect or convicted)
            # that reads as low without `n` explains its pair with `n`, as
            # above. A healthy node whose partners were a slow node and a
            # NIC at 0.8, its one clean pair hit (0.85), read "every pair
            # below the line" and was drained (runsim, 48 nodes).
            every = [v] + [w for r, w in adj[n] if r not in skip and r != q and not self._partners_low(n, r, w)]
            if len(every) < 2:
                return False
            # The one pair that is evidence of `n` alone must show its level:
            # far below its other pairs (left out of `kept`) it is a hit or a
            # link, and the rest is its suspect partners' (a healthy node of a
            # 16-node fleet, one hit at 0.69 and two slow partners, drained).
            if v < min(kept(every, self.sigma)):
                return False
            return max(every) < self.drain_line(len(every)) and \
                not self.hit_by_transients(every, self.est(every)) and \
                (q in self.trusted or any(w >= self.line for r, w in adj[q] if r != n and r not in convicted))
        return False

    def _partners_low(self, n: str, q: str, v: float) -> bool:
        """Does partner `q` read as low as its pair with `n` (`v`) without
        `n` (its other pairs, partners not convicted; within a pair
        difference's outlier margin)? Then the pair shows `q`'s level, not `n`'s."""
        others = [w for r, w in self.g.adj[q] if r != n and r not in self.convicted]
        return bool(others) and v >= self.est(others) * (1 - OUTLIER_Z * self.sigma * math.sqrt(2))

    def _push_around(self, n: str, heap: list) -> None:
        """Re-check the partners of a new convict and theirs (their suspects changed)."""
        adj = self.g.adj
        for q, _v in adj[n]:
            for r in (q, *(r for r, _w in adj[q])):
                if r not in self.convicted:
                    rv = self.free(r)
                    if rv:
                        heapq.heappush(heap, (self.est(rv), -len(rv), r))

    def run(self, score: dict[str, float | None]) -> None:
        """Convict, slowest first; nodes below the line whose slowness may be
        explained by their suspect partners are convicted tentatively, one at
        a time, and kept only if the evidence left still says so."""
        adj, convicted, line = self.g.adj, self.convicted, self.line
        # Only nodes below the line can be guilty; a node whose evidence
        # changes (a partner convicted) is pushed again.
        heap = [(s, -len(adj[n]), n) for n, s in score.items() if s is not None and s < line]
        heapq.heapify(heap)
        deferred: list[tuple[float, int, str]] = []
        tentative: set[str] = set()
        while True:
            while heap:
                s, _k, n = heapq.heappop(heap)
                if n in convicted:
                    continue
                vals = self.free(n)
                if not vals:
                    continue
                now = self.est(vals)
                if now != s:
                    heapq.heappush(heap, (now, -len(vals), n))
                    continue
                if now >= line:
                    continue
                if self.robust(n):
                    convicted.add(n)
                    self._push_around(n, heap)
                elif self.slow_rule(vals, s, each=self.each(n, (q for q, _v in adj[n] if q not in convicted)),
                                    link=self.link_low(n, [x for x in adj[n] if x[0] not in convicted])):
                    heapq.heappush(deferred, (s, -len(vals), n))  # its suspects may explain it
            # Only suspects explaining each other are left: convict the
            # slowest one (one at a time) and look again.
            while deferred:
                s, _k, n = heapq.heappop(deferred)
                vals = self.free(n) if n not in convicted else []
                if vals and self.est(vals) == s and \
                        self.slow_rule(vals, s, each=self.each(n, (q for q, _v in adj[n] if q not in convicted)),
                                       link=self.link_low(n, [x for x in adj[n] if x[0] not in convicted])):
                    convicted.add(n)
                    tentative.add(n)
                    self._push_around(n, heap)
                    break
            if not heap:
                break
        # A node convicted only to explain its partners stays convicted if
        # the evidence left once they are convicted still says so.
        for n in sorted(tentative):
            convicted.discard(n)
            if self.robust(n):
                convicted.add(n)


def judge_at(g: PairGraph, score: dict, convicted: set[str], fleet: float, p: "Params",
             trusted: frozenset[str], pool: "Pool | None" = None, first: bool = False) -> Conviction:
    """The judge for one pass at fleet level `fleet`: the line, the healthy
    pairs' noise, margins sized for the nodes near the line, and the
    fleet's transient hits (with `pool`, the tail of its test's other keys).
    `first`: the unconvicted first pass (`first_tail` computed it already
    when the run's rail keys were pooled)."""
    line = p.threshold * fleet
    if first and not convicted:
        hits = first_tail(g, fleet, p)
        sigma = hits.sigma
    else:
        # Rounded up to 0.1%: conservative, and passes whose noise moved by less
        # share the nodes' levels (PairGraph.levels, one per noise scale).
        sigma = math.ceil(healthy_noise(g, score, convicted, p.threshold, p.noise_floor) * 1000 - 1e-9) / 1000
        hits = transients(g, score, convicted, line, fleet, sigma)
    if pool is not None:
        # A healthy NIC reading this low is looked for among every NIC of
        # the pooled rails, not one rail's: a run with 8 rails judges 8 NICs
        # per node, and held per rail, a 64-node student-t fleet at 8% drained a
        # healthy NIC whose six values read 0.70-0.83 (one in 400 per rail).
        hits = replace(hits, pool=pool[0], pool_total=pool[1], nodes=hits.nodes * pool[2])
    return Conviction(g, line, sigma, near_line(score, line, sigma), convicted, trusted, p.threshold, hits, p.alpha)


Pool = tuple[tuple[float, ...], int, int]  # sorted tail ratios, sample size, keys pooled


def first_fleet(g: PairGraph) -> float:
    """The fleet level a key's judging starts from (no level given)."""
    first = g.levels(None)
    return median(first.values()) if first else 0.0


def first_tail(g: PairGraph, fleet: float, p: "Params") -> Transients:
    """The first pass's tail sample (nothing convicted yet, at `fleet`),
    computed once per graph: pooling a run's rail keys needs each key's
    tail before any key is judged, and `convict`'s first pass is the same."""
    if g._first is None or g._first[0] != fleet:
        score = node_scores(g, set())
        sigma = math.ceil(healthy_noise(g, score, set(), p.threshold, p.noise_floor) * 1000 - 1e-9) / 1000
        g._first = (fleet, transients(g, score, set(), p.threshold * fleet, fleet, sigma))
    return g._first[1]


def pool_tails(graphs: Iterable[PairGraph], p: "Params") -> Pool:
    """The tails of keys measuring one thing on one fabric (a run's rails
    of one test), pooled: each key's healthy pairs below its line, as
    ratios to its own level, and the sample sizes summed. A healthy node's
    low pairs on one rail are judged by how often the whole fabric's
    healthy pairs read that low, not only its rail's 100-200; and counted
    over the keys pooled (a NIC is one of nodes x rails)."""
    tails, total = [], 0
    for g in graphs:
        if g.value:
            t = first_tail(g, first_fleet(g), p)
            tails.append(t.tail)
            total += t.total
    return tuple(heapq.merge(*tails)), total, len(tails)


def convict(g: PairGraph, fleet: float, pinned: bool, p: "Params", trusted: frozenset[str],
            pool: Pool | None = None) -> tuple[set[str], dict[str, float | None], float, Conviction]:
    """Passes of `Conviction` until the convicts and the fleet median settle
    (convictions only grow). `pinned`: the fleet level is given, not re-estimated.
    Returns (convicted, scores, fleet level, the last pass's judge)."""
    convicted: set[str] = set()
    score = node_scores(g, convicted)
    for i in range(8):
        judge = judge_at(g, score, convicted, fleet, p, trusted, pool, first=i == 0)
        before = len(convicted)
        judge.run(node_scores(g, convicted, judge.sigma))
        score = node_scores(g, convicted, judge.sigma)
        new_fleet = fleet if pinned else fleet_level(g, convicted, judge.sigma, p.threshold)
        if len(convicted) == before and new_fleet == fleet:
            break
        fleet = new_fleet
    return convicted, score, fleet, judge


def suspect_links(g: PairGraph, convicted: set[str], line: float, sigma: float, alpha: float,
                  hits: Transients | None = None, level: float = 0.0, run_values: int = 0,
                  within: bool = True
                  ) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """Links below the line and clearly below the healthy level `level` (the
    margin measured from where a healthy pair reads, not down from the
    line: at 5-8% noise the line's margin asked a link to read below 0.56
    of the median), sized for the evidence the link has (a value measured
    r times: sigma / sqrt(r)) and the number of links judged; between two
    nodes that are each fine with another partner, and not what the
    fleet's transient hits explain: where healthy pairs come out this low
    by chance somewhere in the fleet (`hits`), one low value is no cable to
    replace (at 4% transients, a thousand of them per rail).

    Returns (links, clear, again): `clear` are the links the evidence already
    settles, so that no retest round re-measures them; `again` the links
    slow by the same margin on their one measurement that the fleet's
    transient hits could explain: not named, measured once more (slow
    twice, they are). Clear: measured
    twice (slow both times), or once and below the healthy level by the
    fleet margin at alpha / MODEL_SAFETY over the links judged in a fleet
    that shows no other clearly low pair between nodes fine elsewhere,
    away from its ends (a heavy low tail, student-t at 5%, puts single
    healthy pairs at 0.2-0.75, and transient hits too few to describe
    could be there: such a fleet's links are measured again; counted
    among the nodes whose level is above the line, which one hit at 8%
    noise takes away, the hits were missed and single transient hits
    named as cables).

    A repeat far above the healthy level (past the fleet margin over the
    key's links, on the high side: no healthy pair reads that far above it
    by noise; a busbw over the line rate is a timing artefact, not a
    healthy route) is no reading of the link: it is left out of the
    link's values as a failed test is, and the link is judged on the rest
    (a route at 0.68 read 1.447 and 0.667 on its rail: the median of the
    two, 1.06, looked healthy and the route was never named)."""
    links, clear, again = [], [], []
    z_clear = one_sided_z(alpha / MODEL_SAFETY, len(g.value))
    z_link = one_sided_z(alpha, len(g.value))
    # Where the gaussian bulk puts AGAIN_HEALTHY healthy links of the run
    # (`run_values`: the pair values of all its pair and rail keys; a run
    # with eight rail keys and a whole-node key measures no more healthy
    # links again than one with a whole-node key): below it (and within
    # the margin), a value is measured again. On a rail key (`within`
    # False) only a value also clearly low (`cut`: CLEARLY_LOW noise sds
    # under the healthy level, where the gaussian bulk puts one healthy
    # value in 30,000: a cable or a transient hit). Every rail value under
    # the run's cut was too many: most of them heavy-tail draws and hits,
    # their repeats left medians of a hit and a fine value in healthy NICs'
    # levels (two drained in 100 per-rail fleets at 5% noise) and half the
    # fleet reran at 8%. Measuring none missed routes at 0.56-0.61 that
    # read 0.63-0.66 of the healthy level on their one rail value, within
    # the one-value margin or their ends': under adaptive routing ("mean")
    # no whole-node value shows them (4 of 100 fleets at 8% noise).
    z_again = one_sided_z(AGAIN_HEALTHY, max(run_values, len(g.value)))
    # A link already measured twice, slow both times within the margins, gets
    # its third value on every key, rail keys too: the rounds give a link up
    # to LINK_VALUES values (plan.py), and a route at 0.55-0.62 that read
    # 0.49-0.68 and 0.62-0.79 was dropped unsettled on rail keys. Only pairs
    # a round measured again are asked (no healthy rail pair's single low value).
    z_twice = one_sided_z(AGAIN_HEALTHY, max(run_values, len(g.value)))
    healthy = level or line
    artefact = healthy * (1 + z_link * sigma)
    repeated = 0
    real: dict[Pair, list[float]] = {}  # links measured again with an artefact: their other values
    for pair, vs in g.repeats.items():
        if len(vs) > 1:
            repeated += 1
            if max(vs) > artefact:
                real[pair] = [x for x in vs if x <= artefact]
    z_repeat = one_sided_z(alpha, repeated)
    # An end of a link measured again is fine elsewhere: a pair of it at or
    # above the line and no lower than a healthy pair reads at alpha.
    end_cut = max(line, healthy * (1 - one_sided_z(alpha, 1) * sigma))
    # Clearly low pairs (4 noise sds under the healthy level) between nodes
    # each fine with another partner: hits or cables. A single value is
    # not unique where the fleet shows another such pair away from its
    # ends (one node's two low pairs are a question about that node).
    cut = min(line, healthy * (1 - CLEARLY_LOW * sigma))

    def once_again(v: float, a: str, b: str) -> bool:
        """A link's one value, not named, measured again: below its ends'
        levels by the run's cut (and on a rail key clearly low)."""
        return (within or v < cut) and _ends_below(g, a, b, v, convicted, end_cut, 1 - z_again * sigma)
    low_at: dict[str, int] = {}
    low_pairs: set[Pair] = set()
    for (a, b), v in g.value.items():
        if v < cut and a not in convicted and b not in convicted and \
                _fine_level(g, a, b, convicted, line) is not None and _fine_level(g, b, a, convicted, line) is not None:
            low_pairs.add((a, b))
            low_at[a] = low_at.get(a, 0) + 1
            low_at[b] = low_at.get(b, 0) + 1
    for (a, b), v in g.value.items():
        if a in convicted or b in convicted:
            continue
        if real and (a, b) in real:
            vs = real[(a, b)]
            if not vs:
                continue
            v = median(vs)
        elif v >= line:
            continue
        else:
            vs = g.repeats[(a, b)]
        if v >= line:
            continue
        r = len(vs)
        z, r_eff = z_link, r
        if r >= 3 and max(vs) >= line:
            # Slow on every value, as on two: a healthy pair picked out by
            # one low value reads 0.74, 0.85 and 0.96 (its median is below
            # three values' margin at 5% noise: it was named a cable).
            continue
        if r == 2:
            # Measured again (a retest round re-measures a suspect link):
            # slow both times, each value on its own (the mean of a transient
            # hit and a healthy value is not a slow link): the lower one
            # below the margin over every link judged (it picked the link
            # out), the higher one below the margin over the links measured
            # again (it is a test of those few, not of the fleet: against
            # the fleet's margin a route at 0.61 at 8% noise was missed one
            # time in three).
            if max(vs) >= line:
                continue
            if min(vs) >= healthy * (1 - z_link * sigma) or max(vs) >= healthy * (1 - z_repeat * sigma):
                # Slow twice, neither value past its margin: a third settles it.
                if _ends_below(g, a, b, sum(vs) / 2, convicted, end_cut, 1 - z_twice * sigma / math.sqrt(2)):
                    again.append([a, b])
                continue
            v, z, r_eff = max(vs), z_repeat, 1
        if v >= line:
            continue
        if v >= healthy * (1 - z * sigma / math.sqrt(r_eff)):
            # Within one value's margin: a slow route (0.6 at 8% noise reads
            # 0.65-0.75 a third of the time) or a healthy pair's low draw.
            # Below where the bulk puts one healthy pair of the key, it is
            # measured again (the link and its ends with new partners);
            # the repeats decide.
            if r == 1 and once_again(v, a, b):
                again.append([a, b])
            continue
        explained = False
        if hits is not None and hits.described and level:
            # Where the fleet's transient hits explain it: measured once, by
            # chance among all its pairs; measured again and again (selected
            # for being low), among the pairs measured again, every later
            # value a hit. Measured once, it is not named but measured again
            # (`again`): a slow route reads as low as a hit once, not twice (a
            # 1,024-node fleet with 2% transients has ~200 hits; its slow
            # links were in none of them, never re-measured and never found).
            explained = r == 1 and hits.below(v / level, 4 * sigma) * hits.rate * len(g.value) >= alpha / MODEL_SAFETY
            if r >= 3 and hits.below(v / level, 4 * sigma) * hits.rate ** (r // 2) * repeated >= alpha:
                continue
        # Both ends are fine elsewhere (another partner not convicted at or
        # above the line), and the link is clearly below what those fine
        # pairs read (a node a little slow, at 0.88, with one pair above the
        # line by noise would otherwise have its other pairs named as links).
        ends = [_fine_level(g, x, y, convicted, line) for x, y in ((a, b), (b, a))]
        if all(e is not None and v < e * (1 - z * sigma / math.sqrt(r_eff)) for e in ends):
            if explained:
                again.append([a, b])
                continue
            links.append([a, b])
            away = len(low_pairs) - low_at.get(a, 0) - low_at.get(b, 0) + ((a, b) in low_pairs)
            if r >= 2 or (v < healthy * (1 - z_clear * sigma) and away <= 0):
                clear.append([a, b])
        elif r == 1 and once_again(v, a, b) or \
                1 < r < LINK_VALUES and _ends_below(g, a, b, sum(vs) / r, convicted, end_cut,
                                                    1 - z_twice * sigma / math.sqrt(r)):
            # Past the fleet's margin but within its ends' (a healthy end at
            # 0.95 asks a route to read under 0.61 at 8% noise): measured again.
            again.append([a, b])
    return sorted(links), sorted(clear), sorted(again)


def _ends_below(g: PairGraph, a: str, b: str, v: float, convicted: set[str], cut: float, factor: float) -> bool:
    """Both ends fine elsewhere and `v` below `factor` of each one's level
    there (`_fine_level` at `cut`: the mean of its other pairs at or above
    it). `cut` is the line, or a healthy pair's reading less `z_end` of
    its sds where that is higher: at 3% noise a node at 0.87 has a pair
    above the line now and then, and its lowest pair is its own, not a
    link's; at 8% a healthy end's pairs read below the line one time in ten."""
    for x, y in ((a, b), (b, a)):
        e = _fine_level(g, x, y, convicted, cut)
        if e is None or v >= e * factor:
            return False
    return True


def _fine_level(g: PairGraph, n: str, other: str, convicted: set[str], line: float) -> float | None:
    """The mean of `n`'s pairs at or above the line with partners other than
    `other` and not convicted (None: it has none: not fine elsewhere)."""
    vals = [w for q, w in g.adj[n] if q != other and q not in convicted and w >= line]
    return sum(vals) / len(vals) if vals else None


def judge_pairs(key: str, ms: list["Measurement"], p: "Params", level: float | None = None,
                trusted: frozenset[str] = frozenset(), graph: PairGraph | None = None,
                through: dict[str, dict[str, float]] | None = None, pool: Pool | None = None,
                behind: dict[str, tuple[frozenset[str], float]] | None = None,
                run_values: int = 0, within: bool = True) -> KeyResult:
    """`level`: the fleet median to judge against when this run is not a fleet
    (a requalify: a few swapped nodes and their `trusted` reference nodes).
    `graph`: `link_values(ms)` when the caller has it already. `through`:
    node -> partners whose pairs ran through a slow switch the node is not
    behind, with its factor (fabricmodel.bounded_ends): where it is slow
    enough to hide a slow node, no evidence of its level (`judge_bounded`).
    `pool`: the tail of the run's keys of this test and kind (`pool_tails`).
    `behind`: node -> the switches slow below the line it sits behind on
    this key (divided out of its pairs) and their lowest factor: judged
    against those switches' own nodes too (`judge_behind`).
    `run_values`: the pair measurements of every pair and rail key of the
    run (how many healthy links `suspect_links` may measure again); `within`:
    whether a link within one value's margin is measured again (not on rail keys)."""
    g = graph if graph is not None else link_values(ms)
    g.link_lows = within
    convicted, score, fleet, judge, above, split = _settle_level(g, p, level, trusted, pool)
    line, sigma = judge.line, judge.sigma
    bounded = bounding(through, judge, top_level(g, set(), p.threshold)) if through else {}

    verdicts = _first_verdicts(g, score, convicted, line)
    leaning = retest_leaning(g, verdicts, convicted, judge)
    links, clear, again = suspect_links(g, convicted, line, sigma, p.alpha, judge.hits, fleet, run_values, within)
    bad = {(a, b) for a, b in links}
    own = _not_their_fault(g, verdicts, score, leaning, convicted, line, sigma, bad, bounded)
    if bounded:
        late = judge_bounded(g, bounded, verdicts, score, leaning, convicted, judge, bad)
        if late:  # a convicted end is no link's (suspect_links)
            links = [x for x in links if not late & set(x)]
            clear = [x for x in clear if not late & set(x)]
    if behind:
        below = judge_behind(g, behind, verdicts, score, leaning, convicted, judge, bad, p.alpha)
        if below:
            links = [x for x in links if not below & set(x)]
            clear = [x for x in clear if not below & set(x)]
    info = _key_info(g, ms, verdicts, score, convicted, judge, line, sigma, above, split, p)
    if bounded:
        info["bounded"] = len(bounded)  # nodes judged without their pairs through a slow switch
    return KeyResult(key, fleet, sigma, line, verdicts, {n: _r(s) for n, s in score.items()}, links, info, leaning,
                     {n: _r(x) for n, x in own.items() if x != score.get(n)}, clear, again)


def _settle_level(g: PairGraph, p: "Params", level: float | None, trusted: frozenset[str],
                  pool: Pool | None) -> tuple[set[str], dict[str, float | None], float, Conviction, int, bool]:
    """The level a key is judged against and the convictions at it: the
    given `level` (a requalify), else the fleet's own; the top level when
    the fleet is split in two (its median sits at the slow one); the level
    of the rest when more nodes are convicted than the guard allows.
    Returns the convicted, scores, fleet level, the final judge, and how
    many nodes are clearly above it and whether that splits the fleet."""
    n_nodes = len(g.adj)
    cap = max(p.guard_min, int(p.guard_fraction * n_nodes))
    if level:
        convicted, score, fleet, judge = convict(g, level, True, p, trusted, pool)
    else:
        convicted, score, fleet, judge = convict(g, first_fleet(g), False, p, trusted, pool)
    # Nodes whose best pair is clearly *above* the fleet by as much as the drain
    # line is below it (the whole fleet's margin: a split is a fleet-wide
    # claim): the fleet is split in two levels and its median sits at the
    # slow one. Judge against the top level then (the guard trips anyway).
    # A node's reading there is `upper_reference`'s: of four or more pairs
    # the second highest (one pair far above the rest is an artefact, and a
    # retest round's new partners add such maxima: three single pairs at
    # 1.27-1.93 of a student-t fleet put six nodes "above" in round 1 and
    # held a healthy run, "H heavy tail 5%" 7024). A node of a fast half
    # with two fast partners still shows it; round 0's three pairs, the best.
    high = fleet / p.threshold * (1 + margins(n_nodes, p.alpha)[3] * judge.sigma)
    above = sum(1 for n, pairs in g.adj.items() if g.best[n] > high and upper_reference([v for _q, v in pairs]) > high)
    split = above > cap and not level
    if level:
        pass
    elif split:
        convicted, score, fleet, judge = convict(g, top_level(g, convicted, p.threshold), True, p, trusted, pool)
    elif len(convicted) > cap:
        # Too many slow nodes for the guard: the median over all nodes sits
        # between two levels. Say which nodes are slow against the level of
        # the rest (nothing is drained either way; the report shows them).
        rest = sorted(s for n, s in score.items() if s is not None and n not in convicted)
        if rest:
            q75 = rest[(3 * len(rest)) // 4]
            rest_level = median(x for x in rest if x >= p.threshold * q75)
            if rest_level > fleet:
                convicted, score, fleet, judge = convict(g, rest_level, True, p, trusted, pool)
    judge = judge_at(g, score, convicted, fleet, p, trusted, pool)
    return convicted, score, fleet, judge, above, split


def _first_verdicts(g: PairGraph, score: dict[str, float | None], convicted: set[str], line: float) -> dict[str, str]:
    """Convicted: fail; below the line (within the noise) or with only
    convicted partners: retest; else pass. Later stages only move these.
    Two nodes below the line with every other partner do not vouch for
    each other through their one pair at or above it (`_vouched_by_a_low_partner`)."""
    verdicts: dict[str, str] = {}
    for n in g.adj:
        if n in convicted:
            verdicts[n] = "fail"
        elif score[n] is None or score[n] < line:
            verdicts[n] = "retest"  # below the line within the noise, or only convicted partners
        else:
            verdicts[n] = "pass"
    for n, _total, _count in g.tight(line):
        if verdicts.get(n) == "pass" and _vouched_by_a_low_partner(g, n, line):
            verdicts[n] = "retest"
    return verdicts


def _vouched_by_a_low_partner(g: PairGraph, n: str, line: float) -> bool:
    """Is `n` below the line with every partner but one,
    whose pair with it is at or above the line while that partner is below
    it with every other partner? Two slow nodes whose one pair read high
    (a student-t run 27% above its level) each passed on it: with a third
    of their evidence from each other, neither is vouched for, and a
    retest with new partners decides them (small fleets 5208: two nodes at
    0.85 of a 64-node fleet, each below the line with its other partners).
    Only with two different partners or more below the line: one low pair
    against one high one is as well explained by that low partner being
    slow (three nodes, one slow: the other two are low only with it and
    fine together; a preflight's three-node allocation)."""
    pairs = g.adj[n]
    high = [(q, v) for q, v in pairs if v >= line]
    if len(high) != 1 or len({q for q, v in pairs if v < line}) < 2:
        return False
    q = high[0][0]
    others = [w for r, w in g.adj[q] if r != n]
    return bool(others) and max(others) < line


def _not_their_fault(g: PairGraph, verdicts: dict[str, str], score: dict[str, float | None],
                     leaning: dict[str, tuple[float | None, str]], convicted: set[str], line: float, sigma: float,
                     bad: set[Pair], bounded: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """Retests below the line only through a suspect link or a partner under
    suspicion pass (their `verdicts`, `score` and `leaning` updated in
    place): a slow route or a slow partner is not a node's fault. Returns
    every node's own level (own_levels)."""
    # A suspect link is the route's fault, not its ends': an end below the
    # line only through it (every other pair, two at least, at or above the
    # line: a node a little slow has some below) is judged without it.
    for n in {x for pair in bad for x in pair}:
        if verdicts.get(n) == "retest":
            vals = [v for q, v in g.adj[n] if q not in convicted and ((n, q) if n < q else (q, n)) not in bad]
            if len(vals) >= 2 and min(vals) >= line and (est := level_estimate(vals, sigma)) >= line:
                verdicts[n], score[n] = "pass", est
                leaning.pop(n, None)
    own = own_levels(g, score, convicted, line, sigma, bad, bounded)
    # Below the line only through partners under suspicion: a slow partner
    # (not convicted: the noise left it `retest`) is not this node's fault.
    # At or above the line over two or more partners not under suspicion, it passes.
    for n, x in own.items():
        if verdicts.get(n) == "retest" and x is not None and x >= line and score[n] is not None and \
                _clean_partners(g, n, score, convicted, line, bad, bounded.get(n, frozenset())) >= 2:
            verdicts[n], score[n] = "pass", x
            leaning.pop(n, None)
    return own


def _key_info(g: PairGraph, ms: list["Measurement"], verdicts: dict[str, str], score: dict[str, float | None],
              convicted: set[str], judge: Conviction, line: float, sigma: float, above: int, split: bool,
              p: "Params") -> dict:
    """What a key's result tells the analysis besides verdicts (its `keys`
    entry; the guard reads clearly_below, split, clearly_above, top_level)."""
    return {"pairs": len(g.value), "measured": len(ms),
            "clearly_below": clearly_below(g, verdicts, convicted, judge),
            "repeated": sum(1 for vs in g.repeats.values() if len(vs) > 1),
            "drain_line_3": round(judge.drain_line(3), 3), "clearly_above": above if split else 0,
            "split": split, "near_line": near_line(score, line, sigma),
            "top_level": round(top_level(g, convicted, p.threshold), 3),
            "transient_rate": round(judge.hits.rate, 4) if judge.hits else 0.0}


def _clean_partners(g: PairGraph, n: str, score: dict, convicted: set[str], line: float, bad: set[Pair],
                    skip: Collection[str] = frozenset()) -> int:
    """How many of `n`'s partners are not under suspicion (nor its suspect
    links, nor `skip`: pairs through a slow switch it is not behind)."""
    return sum(1 for q, _v in g.adj[n] if q not in convicted and q not in skip and (score.get(q) or 0) >= line
               and ((n, q) if n < q else (q, n)) not in bad)


def own_levels(g: PairGraph, score: dict[str, float | None], convicted: set[str], line: float, sigma: float,
               bad: set[Pair], bounded: dict[str, dict[str, float]] | None = None) -> dict[str, float | None]:
    """Each node's own level: over its partners not under suspicion (not
    convicted, level at or above the line) and without its suspect links
    (nor its pairs through a slow switch it is not behind: `bounded`).
    A slow partner (fail or still `retest`) drags a node's score down by a
    third with three partners; its own level is what it is compared with
    its baseline by. A node whose partners are all suspect keeps its score."""
    suspects = convicted | {n for n, s in score.items() if s is None or s < line}
    bounded = bounded or {}
    touched = {q for n in suspects for q, _v in g.adj.get(n, ())} | {x for pair in bad for x in pair} | \
        (set(bounded) & set(g.adj))
    own = dict(score)
    for n in touched:
        skip = bounded.get(n, ())
        vals = [v for q, v in g.adj[n] if q not in suspects and q not in skip
                and ((n, q) if n < q else (q, n)) not in bad]
        if vals:
            own[n] = level_estimate(vals, sigma)
    return own


def retest_leaning(g: PairGraph, verdicts: dict[str, str], convicted: set[str],
                   c: Conviction) -> dict[str, tuple[float | None, str]]:
    """For each `retest`: how far its level estimate is from the line in
    sds of that estimate (None: only convicted or suspect partners,
    nothing decides it), and the verdict that estimate gives: fail when below
    the line and consistent with one slow level, untested when below it
    within the noise (the most ambiguous: 0), pass above it."""
    out: dict[str, tuple[float | None, str]] = {}
    for n, v in verdicts.items():
        if v == "retest":
            # Partners that are convicted or themselves suspects may explain it.
            out[n] = _leaning([w for q, w in g.adj[n] if q not in convicted and not c.suspect(q)], c)
    return out


def clearly_below(g: PairGraph, verdicts: dict[str, str], convicted: set[str], c: Conviction) -> int:
    """How many nodes are slow by the noise alone: convicted, or `retest`
    with a level over two or more partners not under suspicion below the
    line and below where the fleet's noise puts a healthy node (at alpha /
    MODEL_SAFETY over the fleet), consistently. What the guard counts: the
    fleet's own transient hits keep such a node undecided (`hit_by_transients`:
    in a 64-node fleet three hits of 53 sample pairs bound the rate at 12%,
    and five pairs at 0.85 stay "explained"), yet more of them than the
    guard allows is a fleet-wide problem whichever they are, and the retest
    budget cannot give them all new partners to say so."""
    count = len(convicted)
    for n, v in verdicts.items():
        if v != "retest" or n in convicted:
            continue
        vals = [w for q, w in g.adj[n] if q not in convicted and not c.suspect(q)]
        if len(vals) < 2:
            continue
        est = c.est(vals)
        floor = lambda k: min(c.line, c.healthy_floor(k))  # noqa: E731
        if est < floor(len(kept(vals, c.sigma))) and c.consistent(vals, est) and not c.one_link(vals, floor):
            count += 1
    return count


def _leaning(vals: list[float], c: Conviction) -> tuple[float | None, str]:
    """A `retest` node's leaning from `vals`, its pairs with partners not
    under suspicion (none: nothing decides it)."""
    if not vals:
        return (None, "retest")
    est = c.est(vals)
    m = len(kept(vals, c.sigma))
    sd = c.line * c.sigma / math.sqrt(m)
    # Decided against the line only when, by the fleet's alpha margin,
    # it cannot be a healthy node either. Below the line but within the
    # noise it is not decided either way (untested, never a pass: it may
    # be slow); above it (with its clean partners), pass.
    if est < min(c.line, c.healthy_floor(m)) and c.consistent(vals, est) \
            and not c.one_link(vals, lambda k: min(c.line, c.healthy_floor(k))) \
            and not c.hit_by_transients(vals, est):
        return (round((c.line - est) / sd, 3), "fail")
    if est < c.line:
        return (0.0, "untested")
    return (round((est - c.line) / sd, 3), "pass")


def bounding(bounded: dict[str, dict[str, float]], c: Conviction, top: float) -> dict[str, dict[str, float]]:
    """The pairs `judge_bounded` leaves out of each node's level: through a
    switch slow enough (its factor of the healthy paths' level `top`, as
    the switch was found) that a node hidden behind it, at or above the
    switch's level, could still be below the drain line of the most
    evidence a run gives a node (BOUND_PAIRS pairs). A switch above that
    hides nothing a run could drain (a healthy leaf named by heavy-tailed
    noise at 0.85 of an 8%-noise fleet is one)."""
    if not top:
        return {}
    cut = c.drain_line(BOUND_PAIRS) / top
    out = {n: {q: f for q, f in qs.items() if f < cut} for n, qs in bounded.items()}
    return {n: qs for n, qs in out.items() if qs}


def judge_bounded(g: PairGraph, bounded: dict[str, dict[str, float]], verdicts: dict[str, str],
                  score: dict[str, float | None], leaning: dict[str, tuple[float | None, str]],
                  convicted: set[str], c: Conviction, bad: Collection[Pair] = frozenset()) -> set[str]:
    """A pair through a slow switch (`bounded`: node -> the partners whose
    pair with it ran through a slow switch it is not behind: `bounding`)
    had that switch's factor divided out (components.attribute,
    fabricmodel), as if the path were a product of its parts. It is a
    bottleneck: a node at 0.79 paired through a leaf at 0.73 reads 0.73,
    divided back to 1.0. Such a pair shows the node is at least as fast as
    the switch, never that it is healthy: the node's level comes from its
    other pairs. Slow on those (two partners at least, as `robust` asks):
    `fail`; a pass resting on bounded pairs alone, or below the line on
    the others, is `retest` (a round gives it partners away from the slow
    switches). A `retest` is never passed here; its leaning is taken from
    the other pairs. What such a pair read, the switch's factor not divided
    out, is a floor: a node is at least that fast. Other pairs clearly
    below it are not the node's level (slow links or partners: a node
    with two links at 0.7 and a pair at 0.8 through a leaf at 0.8 is not a
    node at 0.7); the node is then left as the divided pairs judged it.
    A pass needs its other pairs with partners not under suspicion (level
    at or above the line) and not its suspect links (`bad`), as
    `own_levels`, at or above the line (a conviction does not leave its
    links out: they were named with the bounded pairs' help).
    Returns the nodes convicted."""
    new: set[str] = set()
    level = dict(score)  # the partners' levels as judged before (not as this loop changes them)
    for n in sorted(bounded):
        v = verdicts.get(n)
        if v not in ("pass", "retest") or n not in g.adj:
            continue
        skip = bounded[n]
        others = [w for q, w in g.adj[n] if q not in convicted and q not in skip]
        floor = max(w * skip[q] for q, w in g.adj[n] if q in skip)
        if others and c.est(others) < floor * (1 - OUTLIER_Z * c.sigma * math.sqrt(1 + 1 / len(others))):
            continue
        if c.robust(n, skip):
            vals = [w for q, w in g.adj[n] if q not in convicted and q not in skip]
            verdicts[n], score[n] = "fail", c.est(vals)
            convicted.add(n)
            leaning.pop(n, None)
            new.add(n)
            continue
        clean = [w for q, w in g.adj[n] if q not in convicted and q not in skip and not c.suspect(q)]
        if v == "retest":
            leaning[n] = _leaning(clean, c)
            continue
        fine = [w for q, w in g.adj[n] if q not in convicted and q not in skip and (level[q] or 0) >= c.line
                and ((n, q) if n < q else (q, n)) not in bad]
        est = c.est(fine) if fine else None
        if est is not None and est >= c.line:
            score[n] = est
        else:
            verdicts[n], score[n] = "retest", c.est(clean) if clean else None
            leaning[n] = _leaning(clean, c)
    return new


def judge_behind(g: PairGraph, behind: dict[str, tuple[frozenset[str], float]], verdicts: dict[str, str],
                 score: dict[str, float | None], leaning: dict[str, tuple[float | None, str]],
                 convicted: set[str], c: Conviction, bad: Collection[Pair] = frozenset(),
                 alpha: float = 0.01) -> set[str]:
    """Nodes behind a switch slow below the line (`behind`: node -> those
    switches on this key, their lowest factor), judged against that
    switch's own nodes. A path is as fast as its slowest part: a healthy
    node behind a leaf at 0.72 reads 0.72 with everyone, so dividing the
    leaf out (components.attribute, fabricmodel) puts it at the fleet's
    level; a NIC at 0.69 behind it reads 0.69, 0.96 with the leaf divided
    out, above the line, and passed. Clearly below its own switch's nodes
    (the median of the nodes behind the same slow switches, divided; the
    margin of `Conviction.slow_rule` with the line at that level, sized for
    the nodes behind slow switches on this key, the fleet's transient hits
    and heavy tails asked first), it is slower than the switch and so
    below the line itself: `fail`, its level the one it read (the divided
    level times the switch's factor). Never for the switch's slowness: a
    node at the switch's level is at its nodes' level. Below them by the
    margin but as low as the key's own healthy pairs put a node by chance,
    a passed node is `retest` (its next partners decide) and leans
    `untested`, never pass: it may be the slower part.
    Returns the nodes convicted."""
    groups: dict[frozenset[str], list[str]] = {}
    for n, (sws, _f) in behind.items():
        if n in g.adj:
            groups.setdefault(sws, []).append(n)
    judged = sum(len(ns) for ns in groups.values())
    if not judged:
        return set()
    hits = _healthy_pair_tail(g, score, convicted, c, judged)
    if hits is None:
        return set()
    new: set[str] = set()
    for sws, ns in sorted(groups.items(), key=lambda kv: sorted(kv[0])):
        _judge_behind_group(g, ns, behind, verdicts, score, leaning, convicted, c, bad, alpha, hits, judged, new)
    return new


def _healthy_pair_tail(g: PairGraph, score: dict[str, float | None], convicted: set[str], c: Conviction,
                       judged: int) -> Transients | None:
    """How low a healthy pair reads against its own level (judge_behind's
    tail); None when fewer than PEERS pairs are healthy."""
    # How low a healthy pair reads against its own level: the key's pairs
    # between nodes not under suspicion (both ends' levels at or above the
    # line), as ratios to their median. Within a few percent of the level
    # a heavy tail (student-t) puts far more pairs than the gaussian bulk
    # of the noise estimate says: three pairs of a healthy node at 0.96
    # of its switch's nodes are one in 20,000 by the bulk, one in 150
    # under student-t(3), and sixteen nodes behind a leaf over a few keys
    # and rounds showed it (a healthy node drained).
    sample = sorted(v for (a, b), v in g.value.items() if a not in convicted and b not in convicted
                    and (score.get(a) or 0) >= c.line and (score.get(b) or 0) >= c.line)
    if len(sample) < PEERS:
        return None
    mid = sample[len(sample) // 2]
    return Transients(0.0, (), judged, tuple(v / mid for v in sample), len(sample), c.sigma)


def _judge_behind_group(g: PairGraph, ns: list[str], behind: dict[str, tuple[frozenset[str], float]],
                        verdicts: dict[str, str], score: dict[str, float | None],
                        leaning: dict[str, tuple[float | None, str]], convicted: set[str], c: Conviction,
                        bad: Collection[Pair], alpha: float, hits: Transients, judged: int, new: set[str]) -> None:
    """judge_behind for the nodes `ns` behind one set of slow switches,
    against those nodes' own level: convictions go into `convicted` and
    `new`, verdicts, scores and leanings are updated in place."""
    levels = [score[n] for n in ns if n not in convicted and score.get(n) is not None]
    if len(levels) < PEERS:
        return  # too few of its nodes to say where they read
    ref = median(levels)
    fine = max(c.line, ref * (1 - c.sigma))
    mine = Conviction(g, ref, c.sigma, judged, convicted, c.trusted, 1.0, hits, alpha)
    for n in sorted(ns):
        if verdicts.get(n) not in ("pass", "retest") or n in convicted:
            continue
        # A pair reads its slower end: only partners at the switch's
        # nodes' level (within one noise sd) show this node's (a partner
        # at 0.965 of it, a NIC fault, and two pairs at 0.954-0.967 of a
        # student-t fleet drained a healthy node).
        partners = [q for q, _w in g.adj[n] if q not in convicted and (score.get(q) or 0) >= fine
                    and ((n, q) if n < q else (q, n)) not in bad]
        vals = [g.value[(n, q) if n < q else (q, n)] for q in partners]
        if len(vals) < 2:
            continue
        est = mine.est(vals)
        if est >= ref:
            continue
        if est >= mine.drain_line(len(kept(vals, c.sigma))) or mine.one_link(vals) or \
                not mine.consistent(vals, est):
            continue
        if not mine.hit_by_transients(mine.each(n, partners), est):
            verdicts[n], score[n] = "fail", est * behind[n][1]
            convicted.add(n)
            leaning.pop(n, None)
            new.add(n)
        elif verdicts[n] == "pass":
            # Below them by the margin, but the tail may put it there: its
            # next partners decide; its score is the level it read, so a
            # node failing its whole-node key names this NIC (name_nics).
            verdicts[n], score[n] = "retest", est * behind[n][1]
            leaning[n] = (0.0, "untested")


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
