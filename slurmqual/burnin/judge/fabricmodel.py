"""One model of the fabric across every key of a run.

A run measures the same fabric under several keys: whole-node nccl-tests
pairs (``all_reduce:pair``), each rail on its own (``ib_write_bw:rail:mlx5_3``),
each node alone. A pair's number on any key is the product of what it went
through (in logs: a sum of effects): both nodes, their NICs on the rails the
key uses, the switches on its path and the route between them. On a rail
key a path goes through the ends' leaves of that rail; a whole-node pair
runs over every rail at once and goes through every rail leaf of both ends,
as fast as its slowest rail path.

This module holds what ties the keys together:

- `Paths`: which switches a pair goes through on a key (a per-rail fabric
  map gives a node one leaf per rail: its whole-node path runs through all
  of them; Slurm's topology gives the node one leaf for every key);
- `explain_switches`: a switch found slow on any key (components.attribute)
  explains the slow results of the nodes behind it on *every* key: its
  effect is estimated on each other key from the pairs through it (a median
  of their ratio to the healthy level, so a slow node among them does not
  move it) and divided out there too, the whole-node pair taking its
  slowest switch's; none of its nodes is drained for it. Each pair it
  divided is recorded with the switches divided out of it;
- `bounded_ends`: a path is as fast as its slowest part, so a pair through
  a slow switch reads the switch's level whatever its other end's is above
  it: divided by the switch it reads healthy. For the end not behind the
  switch it is a lower bound, not a level (pairs.judge_bounded leaves it
  out of that end's level);
- `behind_slow`: the nodes behind a switch slow below the line, per key:
  a path is as fast as its slowest part, so such a node reads the switch's
  level, and one clearly below its switch's own nodes is slower than the
  switch (pairs.judge_behind), never drained for the switch itself;
- `name_nics`: a node slow on a whole-node key because of one NIC is that
  NIC's fault: its slow rail (below the line on its rail key, failing or
  `retest`), with the node's other rails fine and the whole-node level no
  lower than that rail explains, is named and failed;
- `model_switches`: the stage analyze() runs before judging any key: the
  switches found on each key, divided out of the others, and per key the
  pairs they bound and the nodes behind them (a `SwitchModel`);
- `link_rails`: a route settled slow on the whole-node key runs over one
  rail: the one rail key on which that pair never read at or above the
  line names it.

Everything is linear in the pairs through the switches found.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from statistics import median
from typing import TYPE_CHECKING, Iterable

from ..records import split_key
from .components import MIN_NODES, SwitchFinding, UndecidedSwitches, attribute
from .noise import one_sided_z
from .pairs import PairGraph, link_values, top_level

if TYPE_CHECKING:
    from ..records import Measurement, Params
    from .pairs import KeyResult
    from .topology import Topology

# A NIC explains a node's whole-node level when that level is at most this
# much (relative) below the NIC's own rail level, beyond the noise of both.
NIC_SLACK = 0.05


@dataclass
class Paths:
    """The switches on each node's path, per key kind: the leaf of one rail
    (a rail key) or every leaf of the node (a whole-node key)."""
    topology: object
    _whole: dict[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t = self.topology
        whole: dict[str, set[str]] = {n: {s} for n, s in t.node_switch.items()}
        on_rail: dict[str, set[str]] = {}
        for (n, rail), s in t.rail_switch.items():
            whole.setdefault(n, set()).add(s)
            on_rail.setdefault(rail, set()).add(s)
        self._whole = {n: frozenset(s) for n, s in whole.items()}
        self._node_leaves = frozenset(t.node_switch.values())
        self._on_rail = on_rail

    def on_key(self, switch: str, rail: str | None) -> bool:
        """Can a measurement on `rail` (None: the whole node) go through `switch`?"""
        return rail is None or switch in self._node_leaves or switch in self._on_rail.get(rail, ())

    def leaves(self, node: str, rail: str | None) -> frozenset[str]:
        """The leaves a measurement of `node` goes through on `rail` (None: the whole node)."""
        if rail is None:
            return self._whole.get(node, frozenset())
        s = self.topology.leaf_of(node, rail)
        return frozenset((s,)) if s is not None else frozenset()

    def through(self, a: str, b: str, rail: str | None, switch: str, kind: str) -> bool:
        """Does pair a-b on `rail` go through `switch` (kind "switch": any
        path through it; "uplinks": a path leaving it, one end under it)?"""
        la, lb = self.leaves(a, rail), self.leaves(b, rail)
        if kind == "uplinks":
            return (switch in la) != (switch in lb)
        return switch in la or switch in lb


def whole_node_units(topology, rails_tested: set[str] | bool) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Where the whole-node key is the only one through some rail leaves
    and the topology is a per-rail fabric map (no node leaves): each node's
    unit (the nodes that share every rail leaf the per-rail keys leave
    unmeasured: a scalable unit in a rail-optimised fabric) as the switch
    the whole-node key is searched by, and each unit's leaves on those
    rails. A whole-node pair runs over all of a node's rail leaves, so a
    slow rail leaf slows its unit's whole-node pairs, and which of the
    untested rails it is the whole-node key cannot tell: a unit found slow
    names all those leaves. Without this, no switch was looked for on that
    key and a slow rail leaf drained every node behind it (a map and the
    default burnin.rails = []; or burnin.rails listing some rails, the
    slow leaf on another). `rails_tested`: the rails the run's rail keys
    measure (True: every rail of the map). Empty where every rail is
    tested (their keys find the leaf) or the topology gives node leaves."""
    if rails_tested is True or topology.node_switch or not topology.rail_switch:
        return {}, {}
    tested = set(rails_tested or ())
    leaves: dict[str, set[str]] = {}
    for (n, rail), sw in topology.rail_switch.items():
        if rail not in tested:
            leaves.setdefault(n, set()).add(sw)
    unit = {n: "+".join(sorted(ls)) for n, ls in leaves.items()}
    return unit, {u: u.split("+") for u in set(unit.values())}


Divided = dict[str, dict[tuple[str, str], dict[str, float]]]  # key -> pair -> {switch: its factor there}


def explain_switches(by_key: dict[str, list["Measurement"]], findings: list[SwitchFinding], paths: Paths,
                     p: "Params", rail_of: dict[str, str | None]) -> tuple[list[SwitchFinding], set[str], Divided]:
    """Divide each switch found slow on some key out of every other pair or
    rail key of the run, in place in `by_key` (keys `rail_of` names, with
    their rail or None). Returns a finding per key where its effect there is
    below the line (what the switch costs that key too), the keys changed,
    and per key the pairs divided with the switches (and factors) divided
    out of each: evidence bounded by those switches (`bounded_ends`)."""
    found: dict[str, SwitchFinding] = {}
    on_key: dict[str, set[str]] = {}
    for f in sorted(findings, key=lambda f: f.factor):
        found.setdefault(f.switch, f)
        on_key.setdefault(f.key, set()).add(f.switch)
    divided: Divided = {}
    if not found:
        return [], set(), divided
    more: list[SwitchFinding] = []
    changed: set[str] = set()
    for key, rail in rail_of.items():
        ms = by_key.get(key)
        if not ms:
            continue
        todo = [s for s in found if s not in on_key.get(key, ()) and paths.on_key(s, rail)]
        if not todo:
            continue
        g = link_values(ms)
        level = top_level(g, set(), p.threshold)
        if not level:
            continue
        via = _pairs_via(g, todo, found, paths, rail)
        if not via:
            continue
        factor = _switch_factors(g, via, todo, found, paths, rail, level, key, p, more)
        if not factor:
            continue
        by_key[key] = _divided_out(ms, via, factor, rail, divided.setdefault(key, {}))
        changed.add(key)
    return more, changed, divided


def _pairs_via(g: PairGraph, todo: list[str], found: dict[str, SwitchFinding], paths: Paths,
               rail: str | None) -> dict[tuple[str, str], list[str]]:
    """The switches each pair goes through (of those to explain here)."""
    via: dict[tuple[str, str], list[str]] = {}
    for pair in g.value:
        hit = [s for s in todo if paths.through(pair[0], pair[1], rail, s, found[s].kind)]
        if hit:
            via[pair] = hit
    return via


def _switch_factors(g: PairGraph, via: dict[tuple[str, str], list[str]], todo: list[str],
                    found: dict[str, SwitchFinding], paths: Paths, rail: str | None, level: float, key: str,
                    p: "Params", more: list[SwitchFinding]) -> dict[str, float]:
    """Each switch's effect on this key: the median ratio to the healthy
    `level` of the pairs through it (through it alone where MIN_NODES such
    pairs exist), over MIN_NODES of its nodes at least. Effects below the
    line are findings on this key too (appended to `more`)."""
    factor: dict[str, float] = {}
    for s in todo:
        mine = [pair for pair, ss in via.items() if s in ss]
        alone = [pair for pair in mine if len(via[pair]) == 1]
        use = alone if len(alone) >= MIN_NODES else mine
        nodes = {n for pair in mine for n in pair if s in paths.leaves(n, rail)}
        if len(use) < MIN_NODES or len(nodes) < MIN_NODES:
            continue
        f = median(g.value[pair] / level for pair in use)
        if f < 1.0:
            factor[s] = f
            if f < p.threshold:
                more.append(SwitchFinding(s, key, found[s].kind, f, len(nodes), len(mine)))
    return factor


def _divided_out(ms: list["Measurement"], via: dict[tuple[str, str], list[str]], factor: dict[str, float],
                 rail: str | None, mine_divided: dict[tuple[str, str], dict[str, float]]) -> list["Measurement"]:
    """`ms` with each pair's switches divided out, recording them per pair
    in `mine_divided`. A whole-node pair is as fast as its slowest rail
    path; on one rail its switches' effects multiply."""
    scale: dict[tuple[str, str], float] = {}
    for pair, ss in via.items():
        fs = [factor[s] for s in ss if s in factor]
        if fs:
            mine_divided[pair] = {s: factor[s] for s in ss if s in factor}
            if rail is None:
                scale[pair] = min(fs)
            else:
                x = 1.0
                for f in fs:
                    x *= f
                scale[pair] = x
    out = []
    for m in ms:
        a, b = m.nodes
        f = scale.get((a, b) if a < b else (b, a))
        out.append(replace(m, busbw=m.busbw / f) if f else m)
    return out


def pairs_through(adj: dict[str, list[tuple[str, float]]], findings: list[SwitchFinding], paths: Paths,
                  rail: str | None) -> dict[tuple[str, str], dict[str, float]]:
    """The pairs of one key (`adj`: each node's partners there) through the
    switches found slow on it (`findings`, that key's: components.attribute
    divided them out there), each with those switches and factors: the same
    record as `explain_switches` keeps for the keys it divides."""
    slow = {f.switch: f for f in findings}
    behind: dict[str, frozenset[str]] = {}
    for n in adj:
        mine = paths.leaves(n, rail)
        if len(mine) == 1:
            if next(iter(mine)) in slow:
                behind[n] = mine
        elif not mine.isdisjoint(slow):
            behind[n] = mine.intersection(slow)
    out: dict[tuple[str, str], dict[str, float]] = {}
    none: frozenset[str] = frozenset()
    for a, sa in behind.items():
        for b, _v in adj[a]:
            pair = (a, b) if a < b else (b, a)
            if pair in out:
                continue
            sb = behind.get(b, none)
            hit = {s: slow[s].factor for s in sa | sb if slow[s].kind != "uplinks" or (s in sa) != (s in sb)}
            if hit:
                out[pair] = hit
    return out


def bounded_ends(through: dict[tuple[str, str], dict[str, float]], paths: Paths, rail: str | None,
                 threshold: float) -> dict[str, dict[str, float]]:
    """Node -> its partners whose pair went through a switch slow below the
    line (`threshold`) that the node is not behind, each with that switch's
    factor (the lowest). A path is as fast as its slowest part: such a pair
    reads the switch's level whatever the node's own is above it, and
    divided by the switch's factor reads healthy. It bounds the node from
    below (at least that fast), it does not show it healthy: its level
    must come from its other pairs (pairs.judge_bounded). A node behind a
    slow switch of the pair is judged on it (it has no other path on that key)."""
    out: dict[str, dict[str, float]] = {}
    for (a, b), hit in through.items():
        slow = {s: f for s, f in hit.items() if f < threshold}
        if not slow:
            continue
        la, lb = paths.leaves(a, rail), paths.leaves(b, rail)
        in_a, in_b = any(s in la for s in slow), any(s in lb for s in slow)
        f = min(slow.values())
        if in_a and not in_b:
            out.setdefault(b, {})[a] = f
        elif in_b and not in_a:
            out.setdefault(a, {})[b] = f
    return out


def behind_slow(nodes: Iterable[str], findings: list[SwitchFinding], paths: Paths, rail: str | None,
                threshold: float) -> dict[str, tuple[frozenset[str], float]]:
    """Node -> the switches slow below the line (`findings` of one key: found
    on it or explained there) it sits behind on that key (`rail`; None:
    the whole node, every rail leaf of it), with their lowest factor. Their
    effect was divided out of its pairs; pairs.judge_behind judges it
    against their own nodes."""
    slow = {}
    for f in findings:
        if f.factor < threshold and f.kind == "switch":
            slow[f.switch] = min(f.factor, slow.get(f.switch, 1.0))
    if not slow:
        return {}
    out: dict[str, tuple[frozenset[str], float]] = {}
    for n in nodes:
        mine = paths.leaves(n, rail).intersection(slow)
        if mine:
            out[n] = (frozenset(mine), min(slow[s] for s in mine))
    return out


def behind(node: str, keys: dict[str, str | None], switches: dict[str, set[str]], paths: Paths) -> list[str]:
    """The switches found slow (`switches`: key -> switches found or explained
    on it) that `node` sits behind on the keys it was measured under (`keys`:
    key -> rail or None)."""
    out: set[str] = set()
    for key, rail in keys.items():
        found = switches.get(key)
        if found:
            out |= found & paths.leaves(node, rail)
    return sorted(out)


def name_nics(keys: dict[str, dict], parts: dict[str, tuple], ratio: dict[str, float], noise: dict[str, float],
              threshold: float) -> bool:
    """A node `fail` on a whole-node (pair) key, with some of its rails below
    the line (fail or retest) and the others passing, and its whole-node
    level no lower than its slowest such rail explains: those rails' NICs
    are the part to replace. Marks their rail keys `fail` in `keys` (the
    node's per-key verdicts; `ratio`: key -> its score / the key's median)
    and says whether it did."""
    pair = [k for k, kv in keys.items() if parts[k][1] == "pair" and kv["verdict"] == "fail" and k in ratio]
    rails = [k for k in keys if parts[k][1] == "rail"]
    if not pair or len(rails) < 2:
        return False
    low = [k for k in rails if keys[k]["verdict"] in ("fail", "retest") and k in ratio and ratio[k] < threshold]
    rest = [k for k in rails if k not in low]
    if not low or not rest or any(keys[k]["verdict"] != "pass" for k in rest):
        return False
    worst_rail = min(ratio[k] for k in low)
    for k in pair:
        slack = max(NIC_SLACK, 4 * max(noise.get(k, 0.0), *(noise.get(r, 0.0) for r in low)))
        if ratio[k] < worst_rail - slack:
            return False  # slower than the NIC explains: the node itself (or more) is slow
    if all(keys[k]["verdict"] == "fail" for k in low):
        return False  # already named
    for k in low:
        keys[k]["verdict"] = "fail"
        keys[k]["explains"] = sorted(pair)
    return True


@dataclass
class SwitchModel:
    """What the switches explain, per key, for judge_pairs: the switches
    found (and divided out of other keys), the pair graphs already built,
    the pairs through a slow switch that only bound an end's level, and the
    nodes behind a slow switch. Empty without a topology."""
    findings: list[SwitchFinding] = field(default_factory=list)
    graphs: dict[str, PairGraph | None] = field(default_factory=dict)
    bounded: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # key -> node -> partner -> slow switch factor
    behind_of: dict[str, dict[str, tuple[frozenset[str], float]]] = field(default_factory=dict)  # key -> node -> slow switches, factor
    paths: Paths | None = None
    # Per key, the one pair of switches its slow pairs lead between
    # (components.UndecidedSwitches: either one's uplinks, not yet told apart).
    between: list[UndecidedSwitches] = field(default_factory=list)


def model_switches(by_key: dict[str, list["Measurement"]], topology: "Topology | None", p: "Params",
                   fleet_level: dict[str, float] | None) -> SwitchModel:
    """The switches first, on every pair and rail key, then each switch
    found on any key divided out of the others: a slow rail leaf explains
    its nodes' whole-node pairs too. Replaces `by_key`'s lists of the keys
    a switch was divided out of. Keys judged against a fleet level (a
    requalify) are left alone."""
    model = SwitchModel()
    if topology is None:
        return model
    findings, graphs, bounded, behind_of = model.findings, model.graphs, model.bounded, model.behind_of
    paths = model.paths = Paths(topology)
    net = {k: split_key(k)[2] if split_key(k)[1] == "rail" else None for k in by_key
           if split_key(k)[1] in ("pair", "rail") and not (fleet_level or {}).get(k)}
    tested = {r for r in net.values() if r is not None}
    unit, unit_leaves = whole_node_units(topology, tested)
    # Some rails tested, others not: the whole-node key is searched by the
    # untested rails' units once the tested rails' switches are divided out
    # of it (a slow leaf of a tested rail slows its unit's whole-node pairs
    # too; it is not an untested rail's leaf).
    later = {k for k, rail in net.items() if rail is None and unit and tested}
    for key, rail in sorted(net.items()):
        if key in later:
            continue
        whole = rail is None and bool(unit)
        by_key[key], found, graphs[key] = attribute(key, by_key[key],
                                                    (unit if whole else topology.leaves(rail)).get, p,
                                                    between=model.between)
        if whole:  # a unit found slow: one of its rail leaves, each named
            found = [replace(f, switch=s) for f in found for s in unit_leaves[f.switch]]
        findings += found
    explained, changed, divided = explain_switches(by_key, findings, paths, p, net)
    for key in changed:
        graphs.pop(key, None)  # its pairs changed: judge_pairs builds their graph again
    for key in sorted(later):
        by_key[key], found, graphs[key] = attribute(key, by_key[key], unit.get, p)
        findings += [replace(f, switch=s) for f in found for s in unit_leaves[f.switch]]
    # Which pairs ran through a slow switch one end is not behind: on the
    # key it was found on and on every key it was divided out of. Such a
    # pair bounds that end's level, it does not show it healthy.
    own: dict[str, list] = {}
    for f in findings:
        own.setdefault(f.key, []).append(f)
    for key, rail in net.items():
        through = dict(divided.get(key, {}))
        if key in own:
            g = graphs.get(key) or link_values(by_key[key])
            for pair, hit in pairs_through(g.adj, own[key], paths, rail).items():
                through[pair] = {**through.get(pair, {}), **hit}
        if through:
            bounded[key] = bounded_ends(through, paths, rail, p.threshold)
    findings += explained
    on: dict[str, list] = {}
    for f in findings:
        on.setdefault(f.key, []).append(f)
    for key, rail in net.items():
        if key in on:
            g = graphs.get(key) or link_values(by_key[key])
            graphs[key] = g
            behind_of[key] = behind_slow(g.adj, on[key], paths, rail, p.threshold)
    return model


def link_rails(results: dict[str, "KeyResult"], by_key: dict[str, list["Measurement"]],
               alpha: float) -> list[list[str]]:
    """The rail of each link the whole-node key settles (slow twice, or
    clearly: pairs.suspect_links' `clear`) that no rail key names: a route
    is on one rail, and every rail of the run measures the pair too. The
    rail left is the one on which the pair never read at or above its
    key's line, every other rail having read it there at least once (a
    route at 0.6 reads 0.9 only by a draw 50% high); with one value below
    the line it is named, [a, b, rail], and settled. A repeat far above its
    key's healthy level (past the fleet margin over its links: a busbw over
    the line rate) is no reading, as in pairs.suspect_links. Two rails left
    (or none, or an end failing on that rail: its NIC, not a route) name
    nothing. A route at 0.68 on mlx5_1 read 1.447 and 0.667 there and 0.70
    and 0.68 on the whole-node key; another rail read the pair 1.04 and 0.62
    (a transient hit): the whole-node link was named, its rail never."""
    kinds = {k: split_key(k) for k in results}
    rails = {k: nic for k, (_t, topo, nic) in kinds.items() if topo == "rail" and nic}
    wanted = {(x[0], x[1]) for k, r in results.items() if kinds[k][1] == "pair" for x in r.clear}
    if not wanted or len(rails) < 2:
        return []
    wanted -= {(x[0], x[1]) for k in rails for x in results[k].links}
    wanted |= {(b, a) for a, b in wanted}
    if not wanted:
        return []
    seen: dict[tuple[str, str], dict[str, list[float]]] = {}
    for k, nic in rails.items():
        r = results[k]
        cap = r.median * (1 + one_sided_z(alpha, r.info.get("pairs", 1)) * r.noise)
        for m in by_key.get(k, ()):
            if m.nodes in wanted:
                vals = seen.setdefault(tuple(sorted(m.nodes)), {}).setdefault(nic, [])
                if m.busbw <= cap:
                    vals.append(m.busbw)
    out = []
    for (a, b), per in sorted(seen.items()):
        left = [k for k, nic in rails.items() if not any(v >= results[k].line for v in per.get(nic, ()))]
        if len(left) != 1:
            continue
        k = left[0]
        if any(v < results[k].line for v in per.get(rails[k], ())) and \
                "fail" not in (results[k].verdicts.get(a), results[k].verdicts.get(b)):
            out.append([a, b, rails[k]])
    return out
