"""Which component is slow: a node (or one NIC of it), a link, or a switch.

A pair's number is the product of what it went through: both ends' NICs,
the leaf switch of each end, the uplinks when the ends hang off different
leaves, and the route between them. The node judgement (pairs.py) already
separates nodes from links; this module takes the switches out first, so
the nodes behind a slow switch are not drained for it:

- a *switch* is slow when most of the nodes (node-rails) under it are below
  the line while it is only a part of the fleet: every path through it is
  slow (a leaf 20% slow; one rail's leaf slow for a whole scalable unit);
- its *uplinks* are slow when the pairs that leave it are slow and the
  pairs inside it are fine (only traffic crossing the spine suffers).

Switches are found one at a time, the slowest first; each finding divides
the pairs through it by its factor (the median of those pairs against the
fleet), so a slow node under a slow switch still stands out among its
neighbours, and a second switch is judged without the first's shadow.
What is left is judged as before: nodes, NICs and links.

Everything is linear in the pairs per switch found.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import median
from typing import TYPE_CHECKING, Callable

from .noise import upper_median
from .pairs import link_values, top_level

if TYPE_CHECKING:
    from .analyze import Measurement, Params

MIN_NODES = 3          # a switch with fewer measured nodes is judged through its nodes
MOST = 2 / 3           # "most of its nodes / pairs are slow"


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


def attribute(key: str, ms: list["Measurement"], leaf_of: Callable[[str], str | None],
              p: "Params") -> tuple[list["Measurement"], list[SwitchFinding]]:
    """Slow switches of one pair/rail key, and the measurements with their
    effect divided out (unchanged when none is slow)."""
    g = link_values(ms)
    leaf = {n: leaf_of(n) for n in g.adj}
    members: dict[str, list[str]] = {}
    for n, s in leaf.items():
        if s is not None:
            members.setdefault(s, []).append(n)
    if len(members) < 2:
        return ms, []  # one switch (or none known) is the whole fleet: nothing to compare it with
    within: dict[str, list] = {s: [] for s in members}
    leaving: dict[str, list] = {s: [] for s in members}
    for pair in g.value:
        sa, sb = leaf[pair[0]], leaf[pair[1]]
        if sa is not None and sa == sb:
            within[sa].append(pair)
        else:
            for s in (sa, sb):
                if s is not None:
                    leaving[s].append(pair)
    value = dict(g.value)
    # The level healthy paths run at (nodes' best pairs near the top): a slow
    # switch's pairs pull the plain median down, this does not move.
    level = top_level(g, set(), p.threshold)
    if not level:
        return ms, []
    cut = p.threshold
    findings: list[SwitchFinding] = []
    done: set[str] = set()
    half = len(g.adj) / 2
    while True:
        ratio = {pair: v / level for pair, v in value.items()}
        score = {n: upper_median([ratio[(n, q) if n < q else (q, n)] for q, _v in partners])
                 for n, partners in g.adj.items()}
        best: tuple[int, float, str, str, list] | None = None  # (-slow pairs explained, factor, ...)
        for s, ns in members.items():
            if s in done or len(ns) < MIN_NODES or len(ns) > half:
                continue
            inside = [ratio[x] for x in within[s]]
            out = [ratio[x] for x in leaving[s]]
            touching = inside + out
            slow_nodes = sum(1 for n in ns if score[n] < cut)
            if touching and slow_nodes >= max(MIN_NODES, MOST * len(ns)):
                f = median(touching)
                cand = (-sum(1 for r in touching if r < cut), f, s, "switch", within[s] + leaving[s])
                if f < cut and (best is None or cand[:2] < best[:2]):
                    best = cand
                    continue
            if len(out) >= MIN_NODES and (not inside or median(inside) >= cut):
                # Pairs leaving it are slow whichever switch they go to (two at
                # least): one slow neighbour switch would explain them otherwise.
                slow_out = [x for x in leaving[s] if ratio[x] < cut]
                ends = {n for x in slow_out for n in x if leaf[n] == s}
                others = {leaf[n] for x in slow_out for n in x if leaf[n] != s}
                f = median(out)
                cand = (-len(slow_out), f, s, "uplinks" if inside else "switch", leaving[s])
                if f < cut and len(slow_out) >= MOST * len(out) and len(ends) >= MIN_NODES and len(others) >= 2 \
                        and (best is None or cand[:2] < best[:2]):
                    best = cand
        if best is None:
            break
        _n, f, s, kind, pairs = best
        for x in pairs:
            value[x] /= f
        done.add(s)
        findings.append(SwitchFinding(s, key, kind, f, len(members[s]), len(pairs)))
    if not findings:
        return ms, []
    out_ms = []
    for m in ms:
        a, b = m.nodes
        pair = (a, b) if a < b else (b, a)
        f = value[pair] / g.value[pair] if g.value.get(pair) else 1.0
        out_ms.append(replace(m, busbw=m.busbw * f) if f != 1.0 else m)
    return out_ms, findings
