"""Which component is slow: a node (or one NIC of it), a link, or a switch.

A pair's number is the product of what it went through: both ends' NICs,
the leaf switch of each end, the uplinks when the ends hang off different
leaves, and the route between them. The node judgement (pairs.py) already
separates nodes from links; this module takes the switches out first, so
the nodes behind a slow switch are not drained for it:

- a *switch* is slow when most of the nodes (node-rails) under it are below
  the line, its own pairs (both ends under it) are slow too, and it is only
  a part of the fleet: every path through it is slow (a leaf 20% slow; one
  rail's leaf slow for a whole scalable unit);
- its *uplinks* are slow when the pairs that leave it are slow, to two
  other switches at least, and the pairs inside it are fine (only traffic
  crossing the spine suffers). Slow pairs that all lead to one other switch
  name neither: either end's uplinks may be at fault, and their nodes'
  retest (partners under other switches) tells which. Such a pair of
  switches is reported (`UndecidedSwitches`, `attribute`'s `between`), and
  so is a switch whose pairs read below the line but not clearly yet: their
  nodes are retested whatever the retest budget, and are no blast-radius
  count (the plan pairs two units' nodes with each other: a leaf's slow
  uplinks made 32 nodes `retest`, past the budget, and the guard held the
  run before any round could tell which leaf).

Switches are found one at a time, the slowest first; each finding divides
the pairs through it by its factor (the median of those pairs against the
fleet), so a slow node under a slow switch still stands out among its
neighbours, and a second switch is judged without the first's shadow.
What is left is judged as before: nodes, NICs and links.

Everything is linear in the pairs per switch found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import median
from typing import TYPE_CHECKING, Callable

from .noise import one_sided_z, robust_noise, upper_median
from .pairs import Pair, PairGraph, link_values, top_level

if TYPE_CHECKING:
    from ..records import Measurement, Params

MIN_NODES = 3          # a switch with fewer measured nodes is judged through its nodes
MOST = 2 / 3           # "most of its nodes / pairs are slow"
MEDIAN_SD = 1.2533     # a median's sd over a mean's (gaussian): sqrt(pi / 2)


@dataclass(frozen=True)
class SwitchFinding:
    switch: str
    key: str
    kind: str          # "switch" (every path through it) or "uplinks" (paths leaving it)
    factor: float      # its pairs against the fleet level
    nodes: int         # measured nodes under it
    pairs: int         # pairs corrected

    def to_dict(self) -> dict:
        return {"switch": self.switch, "key": self.key, "kind": self.kind, "factor": round(self.factor, 3),
                "nodes": self.nodes, "pairs": self.pairs}


@dataclass(frozen=True)
class UndecidedSwitches:
    """What one key's slow pairs point at but do not yet settle: two
    switches whose pairs between them are slow while each one's other pairs
    (inside it, to other switches) are fine (one of the two switches'
    uplinks, or the path between them: only pairs with a third switch tell
    which), or one switch whose pairs and most of whose nodes read below the
    line, but not clearly below it yet (a leaf at 0.88 whose unit the plan
    paired only inside itself: pairs with other switches add the evidence).
    Either way a retest round with partners under other switches decides."""
    key: str
    switches: tuple[str, ...]
    factor: float              # their slow pairs against the fleet level
    nodes: frozenset[str]      # their nodes below the line there
    pairs: int                 # the pairs judged

    def to_dict(self) -> dict:
        return {"switches": list(self.switches), "key": self.key, "factor": round(self.factor, 3),
                "nodes": len(self.nodes), "pairs": self.pairs}


def attribute(key: str, ms: list["Measurement"], leaf_of: Callable[[str], str | None],
              p: "Params", g: PairGraph | None = None,
              between: list[UndecidedSwitches] | None = None) -> tuple[list["Measurement"], list[SwitchFinding], PairGraph]:
    """Slow switches of one pair/rail key, the measurements with their effect
    divided out (unchanged when none is slow) and their link graph (for
    judge_pairs). `g`: link_values(ms) when the caller has it. `between`:
    gets the one pair of switches the key's slow pairs lead between, when
    one does (_Search.undecided)."""
    g = g if g is not None else link_values(ms)
    leaf = {n: leaf_of(n) for n in g.adj}
    members: dict[str, list[str]] = {}
    for n, s in leaf.items():
        if s is not None:
            members.setdefault(s, []).append(n)
    if len(members) < 2:
        return ms, [], g  # one switch (or none known) is the whole fleet: nothing to compare it with
    # The level healthy paths run at (nodes' best pairs near the top): a slow
    # switch's pairs pull the plain median down, this does not move.
    # (each pair once: one lucky pair is the best of both its ends, and two
    # of them set a 16-node fleet's level 17% high: a unit of healthy
    # nodes read slow against it)
    level = top_level(g, set(), p.threshold, pairs_once=True)
    if not level:
        return ms, [], g
    search = _Search(g, leaf, members, level, p.threshold, p.alpha, p.noise_floor)
    findings: list[SwitchFinding] = []
    while (best := search.best()) is not None:
        f, s, kind, pairs = best
        search.divide(s, pairs, f)
        findings.append(SwitchFinding(s, key, kind, f, len(members[s]), len(pairs)))
    if between is not None:
        between += search.undecided(key)
    if not findings:
        return ms, [], g
    value = search.value
    out_ms = []
    for m in ms:
        a, b = m.nodes
        pair = (a, b) if a < b else (b, a)
        f = value[pair] / g.value[pair] if g.value.get(pair) else 1.0
        out_ms.append(replace(m, busbw=m.busbw * f) if f != 1.0 else m)
    return out_ms, findings, link_values(out_ms)


class _Search:
    """The slowest switch left, one at a time. Each switch's candidate
    (switch or uplinks) is kept and re-judged only when a finding changed
    its pairs or its nodes' scores: a finding touches its own switch and
    the switches its pairs lead to, not the fleet (16k nodes x 8 rails and
    dozens of findings stay linear)."""

    def __init__(self, g: PairGraph, leaf: dict[str, str | None], members: dict[str, list[str]],
                 level: float, cut: float, alpha: float = 0.01, floor: float = 0.01):
        self.g, self.leaf, self.members, self.cut = g, leaf, members, cut
        self.alpha, self.floor, self.level = alpha, floor, level
        self._sigma: float | None = None
        self._healthy = 1.0
        self.within: dict[str, list[Pair]] = {s: [] for s in members}
        self.leaving: dict[str, list[Pair]] = {s: [] for s in members}
        within, leaving = self.within, self.leaving
        for pair in g.value:
            a, b = pair
            sa, sb = leaf[a], leaf[b]
            if sa == sb:
                if sa is not None:
                    within[sa].append(pair)
                continue
            if sa is not None:
                leaving[sa].append(pair)
            if sb is not None:
                leaving[sb].append(pair)
        self.value = dict(g.value)
        self.divided: set[Pair] = set()  # pairs a finding divided already
        self.ratio = {pair: v / level for pair, v in g.value.items()}
        # Nodes' scores on demand: only a switch whose own pairs are slow
        # counts its slow nodes (at 16k x 8 rails most keys have none).
        self.score: dict[str, float] = {}
        self.half = len(g.adj) / 2
        self.done: set[str] = set()
        # switch -> the one other switch all its slow leaving pairs lead to
        # (its pairs inside fine, its leaving pairs clearly slow): set and
        # cleared by _candidate, read by undecided().
        self.lone: dict[str, str] = {}
        # switch -> (the median of its pairs, how many) where its pairs and
        # most of its nodes read below the line, not clearly (_candidate).
        self.near: dict[str, tuple[float, int]] = {}
        self.cand = {s: self._candidate(s) for s in members}

    def clearly_below(self, f: float, count: int) -> bool:
        """A median of `count` pair ratios (to the top level) below the cut,
        measured against where healthy switches' pairs read, by more than
        its own noise could put it there over all the switches judged. The
        top level (a median of nodes' best pairs) sits a noise sd or more
        above the bulk, and with heavy tails far more: in a 128-node
        student-t fleet at 8% noise it read 1.16 times the pairs' median,
        and a healthy leaf at 0.97 of the others was named at 0.84."""
        if f >= self.cut:
            return False
        if self._sigma is None:  # once, and only when a switch's median is under the cut
            self._healthy, self._sigma = self._inside()
        z = one_sided_z(self.alpha, len(self.members))
        return f / self._healthy < self.cut * (1 - z * MEDIAN_SD * self._sigma / math.sqrt(max(count, 1)))

    def _inside(self) -> tuple[float, float]:
        """(Where a healthy switch's pairs read, as a ratio to the top level;
        their relative noise) from the pairs inside each switch (both ends
        under it: no other switch on their path): the median over switches
        of each one's median, and the MAD of every such pair around its own
        switch's median (a slow switch is one of many, and its spread around
        its own level is the noise). With fewer than three switches holding
        MIN_NODES such pairs (switches of four nodes hold two): the top
        level and no margin, as before (the spread of all pairs, a slow
        switch's among them, is no pair noise)."""
        value = self.g.value
        meds: list[float] = []
        devs: list[float] = []
        for pairs in self.within.values():
            if len(pairs) < MIN_NODES:
                continue
            m = median([value[x] for x in pairs])
            meds.append(m)
            devs += [abs(value[x] / m - 1) for x in pairs]
        if len(meds) < 3 or not self.level:
            return 1.0, 0.0
        return min(median(meds) / self.level, 1.0), max(1.4826 * median(devs), self.floor)

    def _score(self, n: str) -> float:
        ratio = self.ratio
        return upper_median([ratio[(n, q) if n < q else (q, n)] for q, _v in self.g.adj[n]])

    def _slow_nodes(self, ns: list[str]) -> int:
        score, cut = self.score, self.cut
        slow = 0
        for n in ns:
            v = score.get(n)
            if v is None:
                v = score[n] = self._score(n)
            slow += v < cut
        return slow

    def best(self) -> tuple[float, str, str, list[Pair]] | None:
        live = [c for s, c in self.cand.items() if c is not None and s not in self.done]
        if not live:
            return None
        _n, f, s, kind, pairs = min(live, key=lambda c: c[:3])
        return f, s, kind, pairs

    def divide(self, s: str, pairs: list[Pair], f: float) -> None:
        """Take switch `s`'s effect out of its pairs; re-judge what they
        touch. A pair through a switch found before (both ends under slow
        switches) that reads healthy once that one is divided out is left
        as it is: a path is as fast as its slowest part, so it read the
        slower switch's level, not the product of both, and dividing it
        again put it above every healthy pair (two slow leaves on one rail:
        their nodes read "clearly above" the fleet, the key was judged split
        against that top and healthy nodes failed). One still below the
        line is slowed by both, and divided by both."""
        self.done.add(s)
        nodes = {n for x in pairs for n in x}
        divided, cut = self.divided, self.cut
        for x in pairs:
            if x in divided and self.ratio[x] >= cut:
                continue
            divided.add(x)
            self.value[x] /= f
            self.ratio[x] /= f
        for n in nodes:
            self.score.pop(n, None)  # its pairs changed
        for sw in {self.leaf[n] for n in nodes} - {None} - self.done:
            self.cand[sw] = self._candidate(sw)

    def undecided(self, key: str) -> list[UndecidedSwitches]:
        """The pair of switches not found slow whose slow pairs lead only to
        each other (one of them at least sees no other: `lone`), their pairs
        between them clearly slow, or the switch not found slow whose pairs
        and most of whose nodes read below the line, not clearly (`near`);
        with a third switch on the key to pair their nodes with. Only where
        exactly one such question is open: many are a spine plane or the
        fleet, not one switch."""
        if len(self.members) < 3:
            return []
        found: dict[tuple[str, ...], UndecidedSwitches] = {}
        leaf, ratio, cut = self.leaf, self.ratio, self.cut
        for s, (f, count) in sorted(self.near.items()):
            if s in self.done:
                continue
            nodes = frozenset(n for n in self.members[s] if self.score.get(n, 1.0) < cut)
            if len(nodes) >= MIN_NODES:
                found[(s,)] = UndecidedSwitches(key, (s,), f, nodes, count)
        for s, t in sorted(self.lone.items()):
            if s in self.done or t in self.done or not self._fine_apart(t, s):
                continue
            ends = tuple(sorted((s, t)))
            if ends in found:
                continue
            xs = [x for x in self.leaving[s] if {leaf[x[0]], leaf[x[1]]} == {s, t}]
            slow = [x for x in xs if ratio[x] < cut]
            f = median([ratio[x] for x in xs])
            nodes = frozenset(n for x in slow for n in x)
            if len(xs) < MIN_NODES or len(slow) < MOST * len(xs) or not self.clearly_below(f, len(xs)) or \
                    min(sum(1 for n in nodes if leaf[n] == u) for u in ends) < MIN_NODES:
                continue
            found[ends] = UndecidedSwitches(key, ends, f, nodes, len(xs))
        return list(found.values()) if len(found) == 1 else []

    def _fine_apart(self, t: str, s: str) -> bool:
        """Switch t's pairs inside it, and those leaving it for a switch
        other than s, read fine (their median at or above the cut), or it
        has none: every slow pair of t's leads to s."""
        leaf, ratio, cut = self.leaf, self.ratio, self.cut
        if len(self.members[t]) < MIN_NODES:
            return False
        inside = [ratio[x] for x in self.within[t]]
        away = [ratio[x] for x in self.leaving[t] if s not in (leaf[x[0]], leaf[x[1]])]
        return all(not vals or median(vals) >= cut for vals in (inside, away))

    def _candidate(self, s: str) -> tuple | None:
        """(-slow pairs explained, factor, switch, kind, pairs) or None."""
        self.lone.pop(s, None)
        self.near.pop(s, None)
        ns, cut, ratio = self.members[s], self.cut, self.ratio
        if len(ns) < MIN_NODES or len(ns) > self.half:
            return None
        within, leaving = self.within[s], self.leaving[s]
        inside = [ratio[x] for x in within]
        out = [ratio[x] for x in leaving]
        # Every path through it: its own pairs (which no other switch carries)
        # are slow. With its own pairs fine, or none, only the pairs leaving
        # it are: its uplinks, or the switch they all lead to (below).
        mid = median(inside) if inside else None
        if mid is not None and mid < cut and self._slow_nodes(ns) >= max(MIN_NODES, MOST * len(ns)):
            touching = inside + out
            f = median(touching)
            if self.clearly_below(f, len(touching)):
                return (-sum(1 for r in touching if r < cut), f, s, "switch", within + leaving)
            if f < cut:
                self.near[s] = (f, len(touching))
        if len(out) >= MIN_NODES and (mid is None or mid >= cut):
            # Pairs leaving it are slow whichever switch they go to (two at
            # least): one slow neighbour switch would explain them otherwise.
            f = median(out)
            if f >= cut:  # not clearly below (most switches): their pairs need no count
                return None
            leaf = self.leaf
            slow_out = [x for x in leaving if ratio[x] < cut]
            ends = {n for x in slow_out for n in x if leaf[n] == s}
            others = {leaf[n] for x in slow_out for n in x if leaf[n] != s}
            if self.clearly_below(f, len(out)) and len(slow_out) >= MOST * len(out) and len(ends) >= MIN_NODES:
                if len(others) >= 2:
                    return (-len(slow_out), f, s, "uplinks" if inside else "switch", leaving)
                if None not in others:  # nodes the topology does not place are no switch to retest against
                    self.lone[s] = next(iter(others))
        return None


def suspect_parts(analysis: dict) -> dict:
    """What a technician replaces, from an analysis (its dict): each suspect
    switch (kind, the keys / rails it was found on, its worst factor, the
    nodes behind it), each suspect link with its rail (None on a pair key:
    the route between two nodes) and each node's failed NICs. What status
    (through the store), the HTML report and the metrics show."""
    switches: dict[str, dict] = {}
    for f in analysis.get("switch_findings") or []:
        s = switches.setdefault(f["switch"], {"switch": f["switch"], "kind": f["kind"], "keys": [],
                                              "factor": f["factor"], "nodes": []})
        s["keys"].append(f["key"])
        s["factor"] = min(s["factor"], f["factor"])
    nodes = analysis.get("nodes") or {}
    for n, v in sorted(nodes.items()):
        for sw in v.get("behind_suspect_switch") or []:
            if sw in switches:
                switches[sw]["nodes"].append(n)
    links = [{"a": x[0], "b": x[1], "rail": x[2] if len(x) > 2 else None} for x in analysis.get("suspect_links") or []]
    nics = {n: list(v["failed_nics"]) for n, v in sorted(nodes.items()) if v.get("failed_nics")}
    return {"switches": [switches[s] for s in sorted(switches)], "links": links, "failed_nics": nics}
