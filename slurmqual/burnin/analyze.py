"""Fleet-relative verdicts from burn-in measurements.

A node is judged against the fleet it runs in, not a fixed GB/s number that
breaks on every new SKU: a node whose score is below `threshold x median`
fails. Pairs localise: a slow node is slow with every partner, a bad link
only with one. A run that would drain too much of the fleet drains nothing:
that is a fabric problem (or a bug), not a bad node.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Measurement:
    nodes: tuple[str, ...]
    busbw: float
    size: int
    test: str
    ok: bool = True

    @property
    def kind(self) -> str:
        topo = "intra" if len(self.nodes) == 1 else "pair" if len(self.nodes) == 2 else "group"
        return f"{self.test.removesuffix('_perf')}:{topo}"

    @classmethod
    def from_dict(cls, d: dict) -> "Measurement":
        nodes = d["nodes"]
        if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) and n for n in nodes):
            raise ValueError("'nodes' must be a non-empty list of node names")
        ok = d.get("ok", True)
        if not isinstance(ok, bool):
            raise ValueError("'ok' must be true or false")
        busbw = d.get("busbw")
        if ok and (not isinstance(busbw, (int, float)) or isinstance(busbw, bool) or busbw < 0):
            raise ValueError("'busbw' must be a number >= 0")
        size = d.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ValueError("'size' must be a positive integer")
        test = d.get("test", "all_reduce")
        if not isinstance(test, str) or not test:
            raise ValueError("'test' must be a string")
        return cls(tuple(nodes), float(busbw or 0.0), size, test, ok)

    def to_dict(self) -> dict:
        return {"nodes": list(self.nodes), "busbw": self.busbw, "size": self.size, "test": self.test, "ok": self.ok}


@dataclass
class Params:
    threshold: float = 0.9
    reference_size: int = 8589934592
    guard_fraction: float = 0.1
    guard_min: int = 2
    baseline_drop: float = 0.1


@dataclass
class Analysis:
    median: dict[str, float]
    threshold: float
    nodes: dict[str, dict]
    suspect_links: list[list[str]]
    drain: list[str]
    guard_tripped: bool
    would_drain: list[str] = field(default_factory=list)
    below_baseline: dict[str, dict] = field(default_factory=dict)
    retest_plan: list[list[list[str]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Too many nodes below their own baselines: the fleet moved, not a node.
    fleet_slowdown: bool = False

    def to_dict(self) -> dict:
        return {"median": self.median, "threshold": self.threshold, "nodes": self.nodes,
                "suspect_links": self.suspect_links, "drain": self.drain, "guard_tripped": self.guard_tripped,
                "would_drain": self.would_drain, "below_baseline": self.below_baseline,
                "retest_plan": self.retest_plan, "problems": self.problems, "fleet_slowdown": self.fleet_slowdown}


def _at_reference(ms: list[Measurement], ref: int, problems: list[str]) -> list[Measurement]:
    """Measurements at the reference size; per kind, fall back to the largest size measured."""
    out = []
    by_kind: dict[str, list[Measurement]] = {}
    for m in ms:
        by_kind.setdefault(m.kind, []).append(m)
    for kind, items in sorted(by_kind.items()):
        at = [m for m in items if m.size == ref]
        if not at:
            biggest = max(m.size for m in items)
            problems.append(f"{kind}: no measurement at reference size {ref}; judged at {biggest} bytes")
            at = [m for m in items if m.size == biggest]
        out.extend(at)
    return out


def analyze(measurements: list[Measurement], scope: list[str] | None = None, params: Params | None = None,
            baselines: dict[str, float] | None = None) -> Analysis:
    p = params or Params()
    problems: list[str] = []
    invalid = [m for m in measurements if not m.ok]
    for m in invalid:
        problems.append(f"test error (not a measurement): {m.test} on {','.join(m.nodes)}")
    valid = _at_reference([m for m in measurements if m.ok], p.reference_size, problems)
    all_nodes = list(scope) if scope is not None else []
    for m in measurements:
        for n in m.nodes:
            if n not in all_nodes:
                all_nodes.append(n)

    median = {k: statistics.median(m.busbw for m in valid if m.kind == k) for k in sorted({m.kind for m in valid})}
    limit = {k: p.threshold * v for k, v in median.items()}
    slow = {id(m): m.busbw < limit[m.kind] for m in valid}

    bad: set[str] = set()
    # 1. Single-node (intra) tests: evidence, but one noisy run must not drain a node.
    #    Far below the line (threshold - 0.1, i.e. < 80% of median by default,
    #    beyond any run-to-run noise) it is conclusive on its own.
    intra_slow = {m.nodes[0] for m in valid if len(m.nodes) == 1 and slow[id(m)]}
    bad.update(m.nodes[0] for m in valid
               if len(m.nodes) == 1 and m.busbw < (p.threshold - 0.1) * median[m.kind])
    pairs = [m for m in valid if len(m.nodes) == 2]
    pairs_of: dict[str, list[Measurement]] = {}
    for m in pairs:
        for n in m.nodes:
            pairs_of.setdefault(n, []).append(m)

    def partner(m: Measurement, node: str) -> str:
        return m.nodes[1] if m.nodes[0] == node else m.nodes[0]

    def unexplained(node: str) -> list[Measurement]:
        return [m for m in pairs_of.get(node, ()) if partner(m, node) not in bad]

    def guilty(node: str, also_bad: set[str]) -> bool:
        """Slow with every partner not (assumed) bad, or intra-slow with pairs that agree."""
        mine = [m for m in pairs_of.get(node, ()) if partner(m, node) not in bad and partner(m, node) not in also_bad]
        n_slow = sum(slow[id(m)] for m in mine)
        return (len(mine) >= 2 and n_slow == len(mine)) or (node in intra_slow and 2 * n_slow >= len(mine))

    # 2. A node slow with at least two different partners (that are not bad
    #    themselves) is the slow one; so is an intra-slow node whose pairs agree
    #    (or that has no pairs). Repeat: each new bad node explains its pairs.
    #    Order-independent: a candidate is convicted only if it stays guilty
    #    when every other candidate is assumed bad too. Two slow nodes paired
    #    together both stay guilty; "A slow or B slow?" with the same evidence
    #    for both convicts neither (both get retest).
    while True:
        cands = {n for n in all_nodes if n not in bad and guilty(n, set())}
        robust = {n for n in cands if guilty(n, cands)}  # a node is never its own partner
        if not robust:
            break
        bad |= robust

    # 3. What is left: slow pairs between nodes that are not bad.
    retest: set[str] = intra_slow - bad  # intra says slow, its pairs say fine: look again
    links: list[list[str]] = []
    for m in pairs:
        if not slow[id(m)] or set(m.nodes) & bad:
            continue
        a, b = m.nodes
        fine_a = any(not slow[id(x)] for x in unexplained(a) if x is not m)
        fine_b = any(not slow[id(x)] for x in unexplained(b) if x is not m)
        if fine_a and fine_b:
            links.append(sorted([a, b]))
        else:
            retest.update(n for n, fine in ((a, fine_a), (b, fine_b)) if not fine)
    for n in all_nodes:  # two or more slow pairs next to fine ones: conflicting evidence
        mine = unexplained(n)
        if n not in bad and sum(slow[id(m)] for m in mine) >= 2:
            retest.add(n)
            links = [link for link in links if n not in link]

    # 4. Scores and verdicts.
    nodes: dict[str, dict] = {}
    mine_of: dict[str, list[Measurement]] = {}
    for m in valid:
        for x in m.nodes:
            mine_of.setdefault(x, []).append(m)
    link_set = {tuple(link) for link in links}
    for n in all_nodes:
        mine = mine_of.get(n, [])
        if not mine:
            nodes[n] = {"verdict": "untested", "score": None}
            continue
        # A pair slowed by a bad partner or a suspect link says nothing about this node.
        own = [m for m in mine if len(m.nodes) == 2 and not (set(m.nodes) - {n}) & bad
               and tuple(sorted(m.nodes)) not in link_set]
        primary = (own if n not in bad else []) or [m for m in mine if len(m.nodes) == 2] \
            or [m for m in mine if len(m.nodes) == 1] or mine
        score = round(statistics.median(m.busbw for m in primary), 3)
        verdict = "fail" if n in bad else "retest" if n in retest else "pass"
        nodes[n] = {"verdict": verdict, "score": score}

    would = sorted(n for n in all_nodes if nodes[n]["verdict"] == "fail")
    tested = sum(1 for v in nodes.values() if v["verdict"] != "untested")
    cap = max(p.guard_min, int(p.guard_fraction * tested))
    tripped = len(would) > cap
    if tripped:
        problems.append(f"blast-radius guard: {len(would)} of {tested} nodes would be drained (limit {cap}); "
                        "draining none: suspect a fabric-wide problem")
    below = {}
    for n, v in nodes.items():
        base = (baselines or {}).get(n)
        if base and v["score"] is not None and v["score"] < (1 - p.baseline_drop) * base:
            below[n] = {"score": v["score"], "baseline": base}
    # A slowdown of the whole fabric moves the fleet median with it, so the
    # relative test sees nothing; the nodes' own baselines still do.
    slowdown = len(below) > cap
    if slowdown:
        problems.append(f"fleet-wide slowdown: {len(below)} of {tested} nodes are more than "
                        f"{p.baseline_drop:.0%} below their own baselines; baselines not updated")
    good = [n for n in all_nodes if nodes[n]["verdict"] == "pass"]
    from .plan import retest_plan

    plan = [[list(pair) for pair in rnd] for rnd in retest_plan(sorted(retest), good)] if retest else []
    return Analysis(median, p.threshold, nodes, sorted(links), [] if tripped else would, tripped, would,
                    below, plan, problems, slowdown)
