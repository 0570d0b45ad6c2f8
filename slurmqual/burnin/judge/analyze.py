"""Fleet-relative verdicts from burn-in measurements.

A node is judged against the fleet it runs in, not a fixed GB/s number that
breaks on every new SKU. Everything is keyed by a *measurement key*
``test:topology`` (``all_reduce:pair``, ``alltoall:pair``, ``all_reduce:intra``;
intra-node keys also carry the GPU model, ``all_reduce:intra:NVIDIA H100 80GB HBM3``,
because NVLink bandwidth differs per model while the network does not).

Per pair key:

- a link measured more than once is one link (median of its repeats);
- each node's score is the *upper median* over its distinct partners that are
  not themselves convicted: one slow partner cannot drag a healthy node down,
  one lucky pair cannot save a slow one;
- the fleet median is a median over *node scores*, not over pairs, so a third
  of the fleet being slow does not move it to the slow level;
- nodes are convicted one at a time, lowest score first; each conviction
  removes that node from its partners' evidence, so two slow nodes paired
  together are both found and a healthy neighbour of a slow node is not;
- run-to-run noise is estimated from the fleet's own healthy pairs (MAD, and a
  low quantile so a heavy tail widens it); a node is drained only when it is
  below the line by a margin sized for that noise, its number of partners and
  the fleet size; inside the margin it is ``retest`` with a follow-up plan;
- a link is suspect only when it clears the same kind of margin and both ends
  are fine with other partners.

A node without a valid pair measurement is ``untested``, never ``pass``. A
node fails when it fails any key. A run that would drain too much of the fleet
drains nothing: that is a fabric problem (or a bug), not a bad node.

Everything is linear or n log n in the number of measurements.

Where things are: the noise model and margins (shared by every key) in
``noise.py``; a pair key's stages (link values, node scores, convictions,
suspect links) in ``pairs.py``; the switches across keys in
``fabricmodel.py`` (`model_switches`); this module validates measurements,
groups them by key, judges intra keys and combines the keys into node
verdicts, guard and retest plan: `_analyze` runs one helper per stage
(inputs, switches, tail pools, keys, nodes, retest budget, GPUs, guard,
baselines, untested reasons, plan, summary), each reading what the ones
before it wrote.
"""

from __future__ import annotations

import functools
import gc
import math
import re
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from statistics import median
from typing import TYPE_CHECKING

from ..records import GpuMeasurement, Measurement, Params, make_key, split_key, topology_of
from .noise import one_sided_z, robust_noise, z_score
from .pairs import MODEL_SAFETY, KeyResult, PairGraph, Pool, _r, judge_pairs, link_values, pool_tails, runs_tail
from .plan import RoundState, to_remeasure

if TYPE_CHECKING:
    from .components import SwitchFinding
    from .fabricmodel import SwitchModel

# On a node slow on every rail, a NIC below this share of the node's own
# median rail is named as well (a bad NIC in a slow node).
OWN_RAIL_RATIO = 0.9
# Retests no estimate can decide are kept up to the guard's limit, at most this many.
SMALL_FLEET_RETESTS = 6
VERDICT_ORDER = ("fail", "retest", "untested", "pass")  # worst first: a node's verdict is its worst key's


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
    # Per key: estimated run-to-run noise (relative sd), lines, counts.
    noise: dict[str, float] = field(default_factory=dict)
    keys: dict[str, dict] = field(default_factory=dict)
    incomplete_tasks: list[str] = field(default_factory=list)
    versions: dict[str, list[str]] = field(default_factory=dict)
    # "full": the fleet, judged against itself; "requalify": a few nodes and
    # their references, judged against the last full run's medians.
    run_kind: str = "full"
    # Switches (leaf, block) whose paths are slow: named, none of their nodes drained.
    suspect_switches: list[str] = field(default_factory=list)
    switch_findings: list[dict] = field(default_factory=list)
    # Where this analysis stands in its run's retest rounds (burnin/run/retest.py): {} outside a run.
    retest: dict = field(default_factory=dict)
    # The suspect links the evidence settles (slow twice, or clearly beyond
    # the noise): named without a retest round (pairs.suspect_links).
    clear_links: list[list[str]] = field(default_factory=list)
    # Links slow on one measurement that the fleet's transient hits could
    # explain: not suspects, measured once more by the next round (pairs.suspect_links).
    remeasure_links: list[list[str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"median": self.median, "threshold": self.threshold, "nodes": self.nodes,
                "suspect_links": self.suspect_links, "drain": self.drain, "guard_tripped": self.guard_tripped,
                "would_drain": self.would_drain, "below_baseline": self.below_baseline,
                "retest_plan": self.retest_plan, "problems": self.problems, "fleet_slowdown": self.fleet_slowdown,
                "noise": self.noise, "keys": self.keys, "incomplete_tasks": self.incomplete_tasks,
                "versions": self.versions, "run_kind": self.run_kind, "suspect_switches": self.suspect_switches,
                "switch_findings": self.switch_findings, "retest": self.retest, "clear_links": self.clear_links,
                "remeasure_links": self.remeasure_links}


# -- the one answer to "which median judges this node" -------------------------

def judging_key(analysis: dict, node: str, test: str | None = None) -> str | None:
    """The measurement key whose fleet median judges `node` (for `test`, else
    for the key that decided its verdict). Works on stored analyses from
    before keys existed (first ``:pair`` median, then any)."""
    medians = analysis.get("median") or {}
    v = (analysis.get("nodes") or {}).get(node) or {}
    keys = v.get("keys") or {}
    if test is not None:
        if ":" in test:
            return test if test in medians else None
        mine = [k for k in keys if split_key(k)[0] == test]
        pair = [k for k in mine if split_key(k)[1] == "pair"]
        if pair or mine:
            return (pair or mine)[0]
        k = make_key(test, "pair")
        return k if k in medians else None
    if v.get("key") and v["key"] in medians:
        return v["key"]
    pair = sorted(k for k in medians if split_key(k)[1] == "pair")
    return pair[0] if pair else (sorted(medians)[0] if medians else None)


def median_for(analysis: dict, node: str, test: str | None = None) -> tuple[str | None, float | None]:
    """(key, fleet median) that judges `node` for `test`: used by the analysis
    summary, the drain reason, the store (status), metrics and the report."""
    key = judging_key(analysis, node, test)
    value = (analysis.get("median") or {}).get(key) if key else None
    return key, value


# -- per key ---------------------------------------------------------------------
# Pair keys are judged in pairs.py; the noise model and margins are in noise.py.

_z_score = z_score  # the margin formula, under its old name (the bench's ground truth uses it)


def _judge_single(key: str, ms: list[Measurement], p: Params, level: float | None = None) -> KeyResult:
    """Intra-node (one node per measurement): each node against its GPU model's median."""
    per: dict[str, list[float]] = {}
    for m in ms:
        per.setdefault(m.nodes[0], []).append(m.busbw)
    value = {n: (vs[0] if len(vs) == 1 else median(vs)) for n, vs in per.items()}
    fleet = level or median(value.values())
    line = p.threshold * fleet
    # Values under the single-run floor are slow nodes, not noise: left out.
    sigma = robust_noise([v / fleet for v in value.values() if v >= (p.threshold - 0.15) * fleet], p.noise_floor) \
        if fleet else p.noise_floor
    z = one_sided_z(p.alpha, len(value))
    # One number per node: besides the noise margin, never convict above
    # (threshold - 0.15) x median, where a single straggling run can land.
    drain = min(line * (1 - z * sigma), (p.threshold - 0.15) * fleet)
    # One run never convicts: a heavy-tailed straggler lands anywhere below
    # (student-t noise at 4,096 nodes puts a few healthy nodes' single runs
    # under 0.75). It asks for a repeat (the retest round runs the intra
    # test again); two runs below the drain line with their median there do.
    # Nor do two, when the fleet's own tail puts runs that low on some
    # healthy node by chance (student-t at 5%: a healthy node's two runs at
    # 0.67 and 0.71 of the median drained it): then it asks for another.
    tail = runs_tail(per, line, fleet, sigma)
    limit = p.alpha / MODEL_SAFETY

    def repeated_low(n: str) -> bool:
        """Run three times at least (the retest rounds rerun the intra
        test; two runs there drained a healthy node of a student-t 5%
        fleet, runsim seed 5091), every run between the drain line and the line, the runs' median below the
        line by their own margin (the noise of that many runs: the drain
        line's floor is for one straggling run). A GPU-side node at 0.83
        read 0.83 three times and ended untested (runsim, seed 9036: its
        pairs through a slow unit read healthy once the switch was divided
        out). Runs below the drain line are the floor's rule's (a healthy
        node's two student-t runs at 0.49 and 0.67 of an 8%-noise fleet)."""
        vs = per[n]
        return len(vs) >= 3 and drain <= min(vs) and max(vs) < line and \
            median(vs) < line * (1 - z * sigma / math.sqrt(len(vs)))

    def slow(n: str) -> bool:
        if sum(1 for x in per[n] if x < drain) < 2 and not repeated_low(n):
            return False
        low = sorted(x / fleet for x in per[n] if x < line)
        return tail.chance_low(low, len(per[n]), limit) < limit

    verdicts = {n: ("fail" if slow(n) else "retest") if v < drain
                else ("fail" if repeated_low(n) and slow(n) else "retest") if v < line else "pass"
                for n, v in value.items()}
    # Beyond the retest budget: a single run below the drain line is not
    # decided (a straggler must not drain; a slow node must not pass), one
    # just under the line leans pass.
    leaning = {n: (round((line - value[n]) / (line * sigma), 3), "untested" if value[n] < drain else "pass")
               for n, v in verdicts.items() if v == "retest"}
    return KeyResult(key, fleet, sigma, line, verdicts, {n: _r(v) for n, v in value.items()},
                     info={"measured": len(ms), "drain_line": round(drain, 3)}, leaning=leaning)


def _at_reference(ms: list[Measurement], ref: int, problems: list[str]) -> list[Measurement]:
    """Measurements at the reference size; per key, fall back to the largest size measured."""
    out = []
    by_shape: dict[tuple[str, int, str | None], list[Measurement]] = {}
    get = by_shape.get
    for m in ms:
        n = len(m.nodes)
        shape = (m.test, n if n < 3 else 3, m.rail)
        items = get(shape)
        if items is None:
            by_shape[shape] = [m]
        else:
            items.append(m)
    by_key = {make_key(test, topology_of(n, rail), rail): items for (test, n, rail), items in by_shape.items()}
    for kind, items in sorted(by_key.items()):
        at = [m for m in items if m.size == ref]
        if not at and split_key(kind)[1] == "rail":  # perftest runs at its own size (burnin.rail_bytes)
            biggest = max(x.size for x in items)  # once: per item it made 16k nodes x 8 rails quadratic
            at = [m for m in items if m.size == biggest]
        if not at:
            biggest = max(m.size for m in items)
            problems.append(f"{kind}: no measurement at reference size {ref}; judged at {biggest} bytes")
            at = [m for m in items if m.size == biggest]
        out.extend(at)
    return out


def _worst(verdicts: list[str]) -> str:
    return min(verdicts, key=VERDICT_ORDER.index) if verdicts else "untested"


def _merge_gpus(nodes: dict[str, dict], measurements: list[Measurement], gpu_ms: list, p: Params,
                fleet_level: dict[str, float] | None, network: bool, medians: dict[str, float],
                problems: list[str]) -> dict[str, dict]:
    """Fold the per-GPU verdicts (gpus.judge) and nccl-tests data corruption
    into the nodes' verdicts: a node's verdict is its worst. Returns the GPU keys."""
    from .gpus import corrupt_nodes, judge

    rank = {v: i for i, v in enumerate(VERDICT_ORDER)}
    gj = judge(gpu_ms, p.threshold, p.alpha, p.noise_floor, fleet_level) if gpu_ms else None
    if gj:
        problems += gj.problems
        medians.update(gj.medians)
    for n, v in nodes.items():
        g = gj.nodes.get(n) if gj else None
        if not network and not v["keys"]:
            v["verdict"] = "untested"  # nothing measured at all
        if not g:
            continue
        v["gpus"] = g["gpus"]
        worst = g["worst"]
        if not network or rank[g["verdict"]] < rank[v["verdict"]]:
            v["verdict"] = g["verdict"]
            if worst and worst["verdict"] != "untested":
                v.update(key=worst["key"], score=worst["score"], gpu=worst)
        elif worst and worst["verdict"] in ("fail", "retest"):
            v["gpu"] = worst
    for n, partners in corrupt_nodes(measurements).items():
        if n in nodes:
            nodes[n].update(verdict="fail", corruption=partners)
            problems.append(f"{n}: data corruption: wrong results (#wrong) with {', '.join(partners)}, "
                            "each clean with other nodes")
    return gj.keys if gj else {}


_RANK = {v: i for i, v in enumerate(VERDICT_ORDER)}


def _node_verdict(keys: dict[str, dict], tests: list[str], parts: dict[str, tuple]) -> dict:
    """A node's verdict from its keys' (the worst; per test, no pass without
    pair or rail evidence), the key that decided it and its score, and the
    NICs whose rail key failed."""
    worst = 3  # pass
    for t in tests:
        tv = [_RANK[kv["verdict"]] for k, kv in keys.items() if parts[k][0] == t]
        if not any(parts[k][0] == t and parts[k][1] in ("pair", "rail") for k in keys) and 0 not in tv:
            tv.append(2)  # no pair evidence: untested; intra alone never passes a node
        worst = min(worst, min(tv))
    verdict = VERDICT_ORDER[worst]
    rails = [kv["verdict"] for k, kv in keys.items() if parts[k][1] == "rail"]
    nics = [parts[k][2] for k, kv in keys.items() if parts[k][1] == "rail" and kv["verdict"] == "fail"]
    if len(rails) > 1 and len(nics) == len(rails):
        # Slow on every rail it has: the node is the part to replace, not each
        # of its NICs; a NIC well below the node's own other rails is named too.
        own = sorted(kv["score"] for k, kv in keys.items() if parts[k][1] == "rail" and kv["score"] is not None)
        mid = own[len(own) // 2] if own else None
        nics = [parts[k][2] for k, kv in keys.items() if parts[k][1] == "rail" and mid and kv["score"] is not None
                and kv["score"] < OWN_RAIL_RATIO * mid]
    key = None
    if keys and verdict != "untested":
        # a failing NIC names the part to replace: rail keys first on a tie, then pair,
        # then intra; a node slow on every rail is judged by its nccl-tests pairs first
        order = {"rail": 0, "pair": 1} if nics else {"pair": 0, "rail": 1}
        key = min(keys, key=lambda k: (_RANK[keys[k]["verdict"]], order.get(parts[k][1], 2), k))
    return {"verdict": verdict, "score": keys[key]["score"] if key else None, "key": key,
            "failed_nics": sorted(nics, key=_natural)}


def _unpass_below_healthy(nodes: dict[str, dict], results: dict[str, KeyResult], threshold: float,
                          tests: list[str], parts: dict[str, tuple], alpha: float = 0.01,
                          pairs: dict[tuple[str, str], int] | None = None) -> None:
    """In a run the guard holds, the median may sit at a slow level (half a
    fleet slow): a node that passed against it but is below the line of the
    level healthy nodes run at (`top_level`), or not clearly above the key's
    own line, is `retest`, never a pass: the run qualifies nobody it cannot
    vouch for, and no round will look at it again. Clearly: by the margin
    its `pairs` (per key and node) give at the key's noise, at `alpha` for
    that node (a node at 0.85 of a 64-node student-t fleet read 1.03 of the
    line on its three pairs, where the margin was 1.035, and passed)."""
    z = one_sided_z(alpha, 1)
    for n, v in nodes.items():
        if v["verdict"] != "pass":
            continue
        changed = False
        for k, kv in v["keys"].items():
            top = results[k].info.get("top_level") if k in results else None
            m = (pairs or {}).get((k, n), 0)
            r = results.get(k)
            clear = max(threshold * (top or 0), r.line * (1 + z * r.noise / m ** 0.5) if r and m else 0.0)
            if top and kv["verdict"] == "pass" and kv["score"] is not None and kv["score"] < clear:
                kv["verdict"] = "retest"
                changed = True
        if changed:
            v.update(_node_verdict(v["keys"], tests, parts))


def _most_below_on_a_key(nodes: dict[str, dict], between: dict[str, set[str]] | None = None) -> int:
    """The most nodes below the line on any one key: failing it, still
    `retest` on it, or decided `untested` on it by the retest budget; a
    retest there that a pair of switches explains (`between`) not counted."""
    count: dict[str, int] = {}
    between = between or {}
    for n, v in nodes.items():
        explained = between.get(n, ())
        for k, kv in v["keys"].items():
            if kv["verdict"] in ("fail", "retest", "untested") and not (kv["verdict"] == "retest" and k in explained):
                count[k] = count.get(k, 0) + 1
    return max(count.values(), default=0)


def _between_switches(pairs: list, nodes: dict[str, dict], tests: list[str], parts: dict[str, tuple],
                      rounds: RoundState | None, problems: list[str]) -> dict[str, set[str]]:
    """node -> the keys on which its `retest` is explained by a pair of
    switches whose pairs between them are slow, each one's other pairs fine
    (components.UndecidedSwitches: one of them has slow uplinks, the path between
    them is slow; the plan paired two units' nodes only with each other),
    or by a switch whose pairs read below the line, not clearly yet (a leaf
    at 0.88 whose unit the plan paired only inside itself: 16 retests past
    the budget held the run, runsim "H leaf at 0.88" 7019).
    On a rail key the pair explains the node's whole-node pairs too (they
    run over that rail). Such retests stay `retest` whatever the budget and
    are no blast-radius count: a round pairing them with partners under a
    third switch tells which switch it is. A node failing there is `retest`
    there until that round: its pairs between the two switches show the
    path, not the node, and one low pair inside its switch is no level
    (a transient hit on it failed two healthy nodes of a unit whose leaf's
    uplinks were slow, runsim "H leaf uplinks slow" 7011). Not in the last
    round (no round is left to tell: as before, the guard may hold the run;
    a switch still at the line there: _at_a_switch_at_the_line)."""
    if not pairs or (rounds is not None and rounds.last):
        return {}
    out: dict[str, set[str]] = {}
    whole = [k for k, (_t, topo, _r) in parts.items() if topo == "pair"]
    for sp in pairs:
        keys = {sp.key, *whole} if parts.get(sp.key, ("", "", None))[1] == "rail" else {sp.key}
        mine = []
        for n in sorted(sp.nodes):
            v = nodes.get(n)
            kv = (v or {}).get("keys", {}).get(sp.key)
            if not kv or kv["verdict"] not in ("retest", "fail"):
                continue
            mine.append(n)
            changed = False
            for k in keys & set(v["keys"]):
                if v["keys"][k]["verdict"] == "fail":
                    v["keys"][k]["verdict"] = "retest"
                    changed = True
            if changed:
                v.update(_node_verdict(v["keys"], tests, parts))
            out.setdefault(n, set()).update(keys)
        if mine:
            names = [_unit_name(x) for x in sp.switches]
            what = f"pairs between switches {names[0]} and {names[1]} ({sp.key}) at {sp.factor:.0%} of the fleet, " \
                "each one's other pairs fine: one of them has slow uplinks (or the path between them is slow)" \
                if len(names) == 2 else f"switch {names[0]} ({sp.key}): its pairs at {sp.factor:.0%} of the fleet, " \
                "most of its nodes below the line, not clearly yet"
            problems.append(f"{what}; {len(mine)} of their nodes retested with partners under other switches to "
                            "tell, whatever the retest budget, none drained for it")
    return out


def _at_a_switch_at_the_line(pairs: list, nodes: dict[str, dict], tests: list[str], parts: dict[str, tuple],
                             results: dict[str, KeyResult], problems: list[str], paths=None) -> None:
    """The last round, one switch still open (its pairs and most of its nodes
    below the line, not clearly: components.UndecidedSwitches with one
    switch): a node of it below the line at that switch's level on that key
    (within UNPLACED_SDS noise sds of it; on a rail key its whole-node pairs
    too, which cross that rail, and a node behind the switch low on those
    only) reads what the switch reads on every path, and the rounds could
    not tell the two apart. It ends `untested` there, listed behind the
    switch, not drained by its best estimate: a leaf at exactly 0.90 put
    its nodes with a per-node spread of -1% at 0.89 and drained them
    (held-out "H4 leaf at 0.90": 62 healthy nodes in 14 of 30 fleets). One
    clearly below the switch's level is slower than the switch and is
    judged as before (drained when the estimate says so)."""
    whole = [k for k, (_t, topo, _r) in parts.items() if topo == "pair"]
    for sp in pairs:
        if len(sp.switches) != 1:
            continue
        keys = [sp.key, *whole] if parts.get(sp.key, ("", "", None))[1] == "rail" else [sp.key]
        mates = {n for n in nodes if sp.switches[0] in paths.leaves(n, None)} if paths is not None else set()
        held = []
        for n in sorted(set(sp.nodes) | mates):
            v = nodes.get(n)
            if v is None:
                continue
            lows = {k: v["keys"][k] for k in keys if k in v["keys"] and v["keys"][k]["verdict"] in ("retest", "fail")}
            if not lows or not all(_near_level(kv, sp.factor, results.get(k)) for k, kv in lows.items()):
                continue  # nothing low there, or below the switch's level somewhere: more than the switch
            for kv in lows.values():
                kv["verdict"] = "untested"
            v.update(_node_verdict(v["keys"], tests, parts))
            v["behind_suspect_switch"] = sorted({*v.get("behind_suspect_switch", ()), *sp.switches})
            v["why"] = (f"reads at switch {_unit_name(sp.switches[0])}'s level ({sp.key}), which is at the line: "
                        "not drained for it, requalify it after the switch is checked")
            held.append(n)
        if held:
            problems.append(f"switch {_unit_name(sp.switches[0])} ({sp.key}): its pairs at {sp.factor:.0%} of the "
                            f"fleet after every round, at the line; {len(held)} of its nodes read at its level and "
                            "end untested, not drained for it: check the switch, then requalify them")


def _near_level(kv: dict, factor: float, r: KeyResult | None) -> bool:
    """A key's score within UNPLACED_SDS noise sds of a switch's level (its ratio to the key's median)."""
    if r is None or not r.median or kv.get("score") is None:
        return False
    x = kv["score"] / r.median
    return factor * (1 - UNPLACED_SDS * r.noise) <= x <= factor * (1 + UNPLACED_SDS * r.noise)


def _unit_name(switch: str) -> str:
    """A whole-node unit (fabricmodel.whole_node_units: its rail leaves
    joined by '+') as a line can show it: its first leaf and how many more."""
    leaves = switch.split("+")
    return switch if len(leaves) == 1 else f"{leaves[0]} (+{len(leaves) - 1} leaves of its unit)"


def _apply_retest_budget(nodes: dict[str, dict], results: dict[str, KeyResult], budget: int,
                         last: bool = False, retested: dict[str, int] | None = None, room: int = 0,
                         between: dict[str, set[str]] | None = None) -> list[str]:
    """At most `budget` nodes stay `retest`: those fewest earlier retest
    rounds re-measured (`retested`: a node the budget left out of one round
    comes first in the next, never left out of every round by a rank its
    unchanged values keep: small fleets 5044, a node at 0.85 decided
    `untested` in round 0 and again in round 1 while nodes retested in round
    1 took the budget again), then the most ambiguous ones (their level
    estimate nearest the line in sds, contradicting evidence first; nodes
    nothing can decide, with only convicted partners, always stay).
    Nodes whose estimate would leave them `untested` (below the line within
    the noise: maybe slow) stay as well while at most `room` stay in all.
    The others get the verdict their best estimate gives on every key they
    are `retest` on: fail when below the line and consistent with one slow
    level; untested (with a `why`) when below the line within the noise, or
    on one intra run below its drain line (one straggling run must not
    drain, nor pass a node that may be slow); else pass. `last`: the
    rounds are spent and only a `fail` is taken from the estimate (a node
    below the line that no healthy node can be); what would lean `pass`
    or `untested` stays `retest` (the run then says it is undecided: an
    intra run just under the line leans pass only to spare a retest).
    A node `retest` only on keys a pair of switches explains (`between`)
    is neither decided nor counted: the round with a third switch is its.
    Returns the nodes decided."""
    ranked: list[tuple[int, float, str]] = []
    stays = 0
    between = between or {}
    for n, v in nodes.items():
        if v["verdict"] != "retest":
            continue
        if n in between and all(k in between[n] for k, kv in v["keys"].items() if kv["verdict"] == "retest"):
            continue
        leans = [results[k].leaning.get(n, (None, "retest")) for k, kv in v["keys"].items() if kv["verdict"] == "retest"]
        if not leans or any(amb is None for amb, _lean in leans):
            stays += 1
        else:
            ranked.append(((retested or {}).get(n, 0), min(amb for amb, _lean in leans), n))
    keep = max(budget - stays, 0)
    if len(ranked) <= keep:
        return []
    ranked.sort()
    unsure = max(room - stays - keep, 0)
    decided = []
    for _waited, _amb, n in ranked[keep:]:
        if unsure and any(results[k].leaning[n][1] == "untested" for k, kv in nodes[n]["keys"].items()
                          if kv["verdict"] == "retest"):
            unsure -= 1  # its estimate cannot decide it: it stays, within `room`
        else:
            decided.append(n)
    if not decided:
        return []
    for n in decided:
        for k, kv in nodes[n]["keys"].items():
            if kv["verdict"] == "retest" and (not last or results[k].leaning[n][1] == "fail"):
                kv["verdict"] = results[k].leaning[n][1]
        if any(kv["verdict"] == "untested" for kv in nodes[n]["keys"].values()):
            nodes[n]["why"] = f"below the line within the noise, past the retest budget ({budget}): not decided"
    return sorted(decided)


def analyze(measurements: list[Measurement], scope: list[str] | None = None, params: Params | None = None,
            baselines: dict[str, dict[str, float]] | None = None,
            fleet_level: dict[str, float] | None = None, trusted: set[str] | None = None,
            topology=None, rounds: RoundState | None = None) -> Analysis:
    """Judge a run. `baselines` maps measurement key -> node -> the node's own
    baseline (per-GPU keys: GPU serial -> that GPU's own baseline). `fleet_level` (key -> median of the last full run) is for runs
    that are not a fleet: a requalify's few nodes are judged against the
    fleet's level, never against each other; its `trusted` reference nodes
    (qualified) are evidence only: never suspects, never judged here.
    `topology` (burnin.judge.topology.Topology): which switch each node / NIC hangs
    off; with it slow switches are named (components.py), not their nodes drained.
    `rounds` (plan.RoundState): in a run's retest rounds, the fails earlier
    rounds decided (they stay `fail`) and the nodes no job can run on (never
    planned); its `retest_plan` is the next round (plan.next_round)."""
    # The analysis builds millions of small acyclic objects (pairs, lists of
    # values) beside 200,000 live measurements: the cyclic collector's passes
    # over them were a fifth of the time at 16k nodes x 8 rails, and free nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyze(measurements, scope, params, baselines, fleet_level, trusted, topology, rounds)
    finally:
        if enabled:
            gc.enable()


def _analyze(measurements: list[Measurement], scope: list[str] | None, params: Params | None,
             baselines: dict[str, dict[str, float]] | None, fleet_level: dict[str, float] | None,
             trusted: set[str] | None, topology, rounds: RoundState | None = None) -> Analysis:
    """The stages of a judgement, in the order the data flows: the run's
    measurements by key, the switches (fabricmodel.model_switches), the rail
    keys' shared tails, each key, each node, the retest budget, the GPUs,
    the blast-radius guard, baselines, then the next round's plan. Each
    stage reads what the ones before it wrote; `problems` collects what
    they tell the admin, in that order."""
    from .fabricmodel import model_switches

    p = params or Params()
    problems: list[str] = []
    run = _run_inputs(measurements, scope, p, trusted, problems)
    model = model_switches(run.by_key, topology, p, fleet_level)
    pools = _tail_pools(run.by_key, model.graphs, p, fleet_level)
    results, medians = _judge_keys(run.by_key, p, fleet_level, trusted, model, pools)
    nodes, parts = _judge_nodes(run, results, model, p, problems)
    _recheck_whole_node_only(nodes, run.tests, parts, rounds)
    if rounds is not None and rounds.last:
        _at_a_switch_at_the_line(model.between, nodes, run.tests, parts, results, problems, model.paths)
    between = _between_switches(model.between, nodes, run.tests, parts, rounds, problems)
    held = _decide_retests(nodes, results, run.tests, parts, p, rounds, problems, between)
    gpu_keys = _merge_gpus(nodes, run.measurements, run.gpu_ms, p, fleet_level, bool(run.tests), medians, problems)
    links, clear, again = _links_of(results, run.by_key, p)
    again = sorted([*again, *(x for x in rail_questions(clear, results, model.graphs, run.by_key) if x not in again)])
    keep_decided(nodes, rounds.decided if rounds else {})
    links, clear = keep_cleared(nodes, links, clear, rounds.cleared if rounds and rounds.last else [])
    guard = _blast_radius(nodes, run.all_nodes, results, p, held, problems, topology, between)
    if guard.tripped:
        _unpass_in_held_run(nodes, results, run, parts, p)
    below, slowdown = _below_baselines(nodes, baselines, {k: r.noise for k, r in results.items()}, p, guard,
                                       problems)
    _untested_reasons(nodes, run.all_nodes, problems)
    plan = _retest_plan(nodes, links, clear, again, run, trusted, topology, rounds, problems, p.threshold)
    noise, keys_out = _key_summary(results, medians, gpu_keys)
    switches = _name_switches(model.findings, problems)
    return Analysis(medians, p.threshold, nodes, links, [] if guard.tripped else guard.would, guard.tripped,
                    guard.would, below, plan, problems, slowdown, noise, keys_out, [],
                    {k: sorted(v) for k, v in run.versions.items()},
                    suspect_switches=switches, switch_findings=[f.to_dict() for f in model.findings],
                    clear_links=clear, remeasure_links=again)


# -- the stages of _analyze, in order ------------------------------------------------

@dataclass
class _RunInputs:
    """A run's measurements as the stages read them: GPU runs apart, the
    valid network/intra lines at the reference size grouped by key, the
    nodes judged (scope first, trusted references left out), the tests run."""
    gpu_ms: list[GpuMeasurement]
    measurements: list[Measurement]  # every nccl-tests/perftest line, valid or not
    valid: list[Measurement]
    all_nodes: list[str]
    tests: list[str]
    by_key: dict[str, list[Measurement]]
    models: dict[str, str]  # node -> GPU model
    versions: dict[str, set[str]]


def _run_inputs(measurements: list[Measurement], scope: list[str] | None, p: Params, trusted: set[str] | None,
                problems: list[str]) -> _RunInputs:
    """Split GPU runs from the rest, report failed tests (never a
    measurement), keep the reference size and group by key: one key per
    (test, node count, GPU model, rail) shape, not one make_key per line."""
    gpu_ms = [m for m in measurements if isinstance(m, GpuMeasurement)]
    measurements = [m for m in measurements if not isinstance(m, GpuMeasurement)]
    failed = dict.fromkeys(f"{m.test} on {','.join(m.nodes)}" for m in measurements if not m.ok)
    problems += [f"test error (not a measurement): {what}" for what in failed]
    valid = _at_reference([m for m in measurements if m.ok], p.reference_size, problems)

    seen: dict[str, None] = dict.fromkeys(scope or ())
    # (in C: 475,000 node names at 16k x 8 rails; first seen first, as a loop of setdefault)
    seen.update(dict.fromkeys(chain.from_iterable(map(attrgetter("nodes"), chain(measurements, gpu_ms)))))
    all_nodes = [n for n in seen if n not in (trusted or ())]
    tests = list(dict.fromkeys(m.test for m in measurements))

    by_key: dict[str, list[Measurement]] = {}
    models: dict[str, str] = {}
    versions: dict[str, set[str]] = {"nccl": set(), "gpu_model": set()}
    key_of: dict[tuple, str] = {}
    for m in valid:
        shape = (m.test, len(m.nodes), m.gpu_model, m.rail)
        key = key_of.get(shape)
        if key is None:
            key = key_of[shape] = m.key
        by_key.setdefault(key, []).append(m)
        if m.gpu_model:
            versions["gpu_model"].add(m.gpu_model)
            for n in m.nodes:
                models.setdefault(n, m.gpu_model)
        if m.nccl_version:
            versions["nccl"].add(m.nccl_version)
    return _RunInputs(gpu_ms, measurements, valid, all_nodes, tests, by_key, models, versions)


def _tail_pools(by_key: dict[str, list[Measurement]], graphs: dict[str, PairGraph | None], p: Params,
                fleet_level: dict[str, float] | None) -> dict[str, Pool]:
    """The rails of one test share a fabric and a noise source: each rail
    key's low tail is judged with the others' (pairs.pool_tails). A rail
    of a 128-node fleet has ~200 pairs, too few to show a student-t tail
    that its 8 rails together show (a healthy NIC's two pairs at 0.67
    drained it). Builds the missing rail graphs into `graphs`."""
    pools: dict[str, Pool] = {}
    by_test: dict[str, list[str]] = {}
    for key in by_key:
        test, topo, _nic = split_key(key)
        if topo == "rail" and not (fleet_level or {}).get(key):
            by_test.setdefault(test, []).append(key)
    for keys in by_test.values():
        if len(keys) > 1:
            for key in keys:
                if graphs.get(key) is None:
                    graphs[key] = link_values(by_key[key])
            pool = pool_tails((graphs[k] for k in keys), p)
            pools.update(dict.fromkeys(keys, pool))
    return pools


def _judge_keys(by_key: dict[str, list[Measurement]], p: Params, fleet_level: dict[str, float] | None,
                trusted: set[str] | None, model: SwitchModel,
                pools: dict[str, Pool]) -> tuple[dict[str, KeyResult], dict[str, float]]:
    """Each key on its own, with what the switches explain: pair and rail
    keys (pairs.judge_pairs; a rail's links name their rail), intra keys
    (_judge_single); a group run only gets its median (it localises
    nothing). Returns the results and every key's median."""
    results: dict[str, KeyResult] = {}
    medians: dict[str, float] = {}
    run_values = sum(len(ms) for key, ms in by_key.items() if split_key(key)[1] in ("pair", "rail"))
    for key, ms in sorted(by_key.items()):
        _test, topo, nic = split_key(key)
        if topo in ("pair", "rail"):
            level = (fleet_level or {}).get(key)
            results[key] = judge_pairs(key, ms, p, level, frozenset(trusted or ()), model.graphs.get(key),
                                       model.bounded.get(key), pools.get(key), model.behind_of.get(key), run_values,
                                       topo == "pair")
            if topo == "rail":  # a slow route on one rail: the link names the rail
                results[key].links = [[a, b, nic] for a, b in results[key].links]
                results[key].clear = [[a, b, nic] for a, b in results[key].clear]
                results[key].again = [[a, b, nic] for a, b in results[key].again]
        elif topo == "intra":
            results[key] = _judge_single(key, ms, p, (fleet_level or {}).get(key))
        else:
            medians[key] = round(median(m.busbw for m in ms), 3)  # a group run localises nothing
            continue
        medians[key] = round(results[key].median, 3)
    return results, medians


def _judge_nodes(run: _RunInputs, results: dict[str, KeyResult], model: SwitchModel,
                 p: Params, problems: list[str]) -> tuple[dict[str, dict], dict[str, tuple]]:
    """Per node: the verdict of each key it was measured under, the NIC
    a whole-node fail is owed to (fabricmodel.name_nics), and per test the
    rule "no pass without network (pair) evidence"; the slow switches it
    sits behind. Returns the nodes and each key's (test, topology, rail)."""
    nodes: dict[str, dict] = {}
    parts = {k: split_key(k) for k in results}
    found_in: dict[str, set[str]] = {}  # key -> the switches found slow on it
    noise_of = {k: r.noise for k, r in results.items()}
    for f in model.findings:
        found_in.setdefault(f.key, set()).add(f.switch)
    result_items = list(results.items())
    slowest = _found_levels(model.findings)
    unplaced: dict[str, list[str]] = {}
    for n in run.all_nodes:
        keys = {}
        for k, r in result_items:
            if n in r.verdicts:
                kv = keys[k] = {"verdict": r.verdicts[n], "score": r.scores[n]}
                if n in r.own:
                    kv["own"] = r.own[n]
        may = _unplaced_behind(n, keys, parts, results, slowest, model.paths) if slowest else []
        if may:
            unplaced[n] = may
        if len(keys) > 1 and any(kv["verdict"] == "fail" for kv in keys.values()):
            from .fabricmodel import name_nics

            ratio = {k: kv["score"] / results[k].median for k, kv in keys.items()
                     if kv["score"] is not None and results[k].median}
            name_nics(keys, parts, ratio, noise_of, p.threshold)
        nodes[n] = {**_node_verdict(keys, run.tests, parts), "keys": keys}
        behind = _behind(n, keys, parts, found_in, model.paths) if model.paths is not None and found_in else []
        behind = sorted({*behind, *unplaced.get(n, ())})
        if behind:
            nodes[n]["behind_suspect_switch"] = behind
        if n in run.models:
            nodes[n]["gpu_model"] = run.models[n]
    if unplaced:
        problems.append(f"{len(unplaced)} node(s) the run's topology does not place read below the line on a "
                        "key where a slow switch was found, at that switch's level: not drained for it, they may "
                        f"sit behind it ({', '.join(f'{n}: {s[0]}' for n, s in sorted(unplaced.items())[:8])}"
                        f"{', ...' if len(unplaced) > 8 else ''}); add them to the topology (slurmqual fabric map) "
                        "and requalify them after the switch is repaired")
    return nodes, parts


def _recheck_whole_node_only(nodes: dict[str, dict], tests: list[str], parts: dict[str, tuple],
                             rounds: RoundState | None) -> None:
    """A node failing only its whole-node (pair) key, while its intra-node
    run passes and every rail it has passes (measured over the same pairs:
    its NICs, cables and switches are fine), is `retest` while the run has
    a round left, not drained on one round: the keys disagree, and what
    is left to blame (the GPU-to-NIC path) is also what one round of
    transient congestion shows (a healthy node of a clean 96-node fleet
    read 0.70-0.77 on its three whole-node pairs, each of them hit, every
    rail and its intra run at the fleet's level, and was drained). A new
    round with new partners answers it; in the last round the key's own
    verdict stands."""
    if rounds is not None and rounds.last:
        return
    for v in nodes.values():
        keys = v["keys"]
        whole = [k for k, kv in keys.items() if parts[k][1] == "pair" and kv["verdict"] == "fail"]
        rails = [k for k in keys if parts[k][1] == "rail"]
        if v["verdict"] != "fail" or not whole or len(rails) < 2 or v.get("failed_nics"):
            continue
        others = [kv["verdict"] for k, kv in keys.items() if parts[k][1] != "pair"]
        intra = [k for k in keys if parts[k][1] == "intra"]
        if not intra or any(x != "pass" for x in others) or \
                any(kv["verdict"] not in ("pass", "fail") for k, kv in keys.items() if parts[k][1] == "pair"):
            continue
        for k in whole:
            keys[k]["verdict"] = "retest"
        v.update(_node_verdict(keys, tests, parts))
        v["why"] = ("fails only its whole-node pairs while its intra-node run and every rail pass: "
                    "measured again with new partners before it is drained")


def _found_levels(findings) -> dict[str, dict[str, float]]:
    """key -> switch -> its factor, for every switch found (or explained) slow on it."""
    out: dict[str, dict[str, float]] = {}
    for f in findings:
        out.setdefault(f.key, {})[f.switch] = min(f.factor, out.get(f.key, {}).get(f.switch, f.factor))
    return out


#: How far (in the key's noise sds) below a slow switch's level a node the
#: topology does not place may read and still be one of that switch's nodes.
UNPLACED_SDS = 3.0


def _unplaced_behind(n: str, keys: dict[str, dict], parts: dict[str, tuple], results: dict[str, KeyResult],
                     found: dict[str, dict[str, float]], paths) -> list[str]:
    """A node the run's topology does not place (not in the fabric map, or
    in no switch of topology.conf), below the line on keys where a switch
    was found slow and at that switch's level (within 3 noise sds): it
    may sit behind that switch, whose nodes read its level on every path
    (a path is as fast as its slowest part). Such a key is not held against
    it (verdict `pass`, the switch listed); one clearly below the switch's
    level is slower than the switch, and still judged. Without this a node
    missing from the map behind a slow leaf was drained as a NIC fault
    (held-out "H map missing nodes": 16 healthy drained in 10 fleets).
    Returns the switches it may sit behind (none: nothing changed)."""
    if paths is None:
        return []
    may: list[str] = []
    for k, kv in keys.items():
        if kv["verdict"] not in ("fail", "retest") or k not in found or parts[k][1] not in ("pair", "rail"):
            continue
        rail = parts[k][2] if parts[k][1] == "rail" else None
        if paths.leaves(n, rail):
            continue  # placed: the switch model judged it
        r = results[k]
        # its score, or its own level (without suspect partners: two such
        # nodes paired read each other as suspects)
        levels = [x / r.median for x in (kv["score"], kv.get("own")) if x is not None and r.median]
        at = sorted(s for s, f in found[k].items()
                    if any(f * (1 - UNPLACED_SDS * r.noise) <= x <= f * (1 + UNPLACED_SDS * r.noise) for x in levels))
        if at:
            kv["verdict"], kv["may_be_behind"] = "pass", at
            may += at
    return sorted(set(may))


@dataclass
class _Held:
    """What the retest budget left for the guard: the budget, the guard's
    limit before it (`cap0`), the retests it could not decide without
    tripping the guard (`budget_held`), the nodes clearly below on one key
    by their own level it held for (`slow_held`), and the most nodes below
    the line on one key once decided (`below`)."""
    budget: int
    cap0: int
    budget_held: int
    slow_held: int
    below: int


def _decide_retests(nodes: dict[str, dict], results: dict[str, KeyResult], tests: list[str],
                    parts: dict[str, tuple], p: Params, rounds: RoundState | None, problems: list[str],
                    between: dict[str, set[str]] | None = None) -> _Held:
    """The retest budget decides the least ambiguous retests by their best
    estimate (_apply_retest_budget), only in a run that drains: when the
    guard holds every drain (a fabric-wide problem), or deciding them would
    trip it, nothing is decided. Retests a pair of switches explains
    (`between`, _between_switches) are left to the next round."""
    tested = sum(1 for v in nodes.values() if v["verdict"] != "untested")
    # Rounds spent: no retest is left to decide a node, every one is decided
    # by its best estimate (below the line where no healthy node can be:
    # fail), as past the budget; only nodes nothing decides stay (untested).
    budget = 0 if rounds is not None and rounds.last else max(p.retest_min, int(p.retest_fraction * tested))
    cap0 = max(p.guard_min, int(p.guard_fraction * tested))
    # Nodes no estimate can decide (below the line within the noise) are
    # retested up to as many as the guard lets the run drain, at most
    # SMALL_FLEET_RETESTS: in a fleet under 120 nodes 5% is 2-5 nodes, and
    # a 64-node fleet with 6-7 nodes at 0.85 left some of them undecided
    # after both rounds (small fleets 5044, 5240) where its guard would
    # have let all of them be drained. Nodes the estimate passes or fails
    # are decided within the budget, as before: the rounds cost no more there.
    room = budget and max(budget, min(cap0, SMALL_FLEET_RETESTS))
    held = sum(1 for v in nodes.values() if v["verdict"] == "fail") > cap0 \
        or any(r.info.get("split") for r in results.values())
    # On one key, the nodes below the line by their own level, consistently,
    # whether or not the fleet's transient hits leave them undecided
    # (`pairs.clearly_below`): more than the guard allows, once the budget
    # or the last round decides retests, is a fleet-wide problem.
    slow_count = max((r.info.get("clearly_below", 0) for r in results.values()), default=0)
    slow_held = 0
    before = {n: {k: dict(kv) for k, kv in v["keys"].items()} for n, v in nodes.items() if v["verdict"] == "retest"}
    budget_held = 0
    decided = [] if held else _apply_retest_budget(nodes, results, budget, bool(rounds and rounds.last),
                                                        rounds.retested if rounds else None, room, between)
    for n in decided:
        nodes[n].update(_node_verdict(nodes[n]["keys"], tests, parts))
    fails = sum(1 for v in nodes.values() if v["verdict"] == "fail")
    below = _most_below_on_a_key(nodes, between)
    if decided and (fails > cap0 or below > 2 * cap0 or slow_count > cap0):
        # Deciding them would trip the guard, or leave more than twice its
        # limit below the line on one key (half a fleet slow moves that
        # key's median down to it: judged against it, slow nodes would
        # pass; some nodes of a healthy fleet fall below the line by noise,
        # hence twice): the fleet is slow, not some nodes. The run is held,
        # and a held run decides nothing (its retests stay retests, none
        # passes). Per key, not per node over all keys: at 8% noise a node
        # is below the line within the noise on one of ten keys (8 rails,
        # whole-node, intra) three times as often as on one, and a healthy
        # 1,024-node fleet had a quarter of its nodes below on some key.
        for n in decided:
            nodes[n]["keys"] = before[n]
            nodes[n].update(_node_verdict(nodes[n]["keys"], tests, parts))
        budget_held = len(decided)
        slow_held = slow_count if fails <= cap0 and below <= 2 * cap0 else 0
        decided = []
    if decided:
        count = {v: sum(1 for n in decided if nodes[n]["verdict"] == v) for v in ("fail", "untested", "pass")}
        problems.append(f"retest budget ({budget}): {len(decided)} least ambiguous retest node(s) decided by their "
                        f"best estimate: {count['fail']} fail, {count['untested']} untested (below the line within "
                        f"the noise), {count['pass']} pass")
    return _Held(budget, cap0, budget_held, slow_held, below)


def _links_of(results: dict[str, KeyResult], by_key: dict[str, list[Measurement]],
              p: Params) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """Every key's suspect links (each once), the links the evidence
    settles, and the links to measure once more, sorted. A route settled
    on the whole-node key is named with the one rail whose key never read
    it healthy (fabricmodel.link_rails)."""
    from .fabricmodel import link_rails

    railed = link_rails(results, by_key, p.alpha)
    links = sorted([*(link for r in results.values() for link in r.links), *railed])
    links = [list(x) for x in dict.fromkeys(tuple(x) for x in links)]
    clear = sorted([*(link for r in results.values() for link in r.clear), *railed])
    again = sorted(link for r in results.values() for link in r.again)
    return links, clear, again


@dataclass
class _Guard:
    """The blast-radius guard's answer: the nodes that fail (`would`), over
    how many tested nodes, its limit, and whether it holds every drain."""
    would: list[str]
    tested: int
    cap: int
    tripped: bool


#: Fewest nodes below the line together, with no switch known for them,
#: that read as one shared part: a leaf serves 8-32 nodes of a rail-optimised fabric.
SHARED_RAIL_MIN = 8

#: A node's key verdicts that put it below the line (decided or not yet).
_SUSPECT = ("fail", "retest")


def _rail_alone(v: dict) -> str | None:
    """The one rail a node is below the line on (fail, or retest: not yet
    decided), its other rails fine; None when none or several."""
    low = [split_key(k)[2] for k, kv in v.get("keys", {}).items()
           if kv.get("verdict") in _SUSPECT and split_key(k)[1] == "rail"]
    return low[0] if len(low) == 1 else None


def unmapped_shared_rail(nodes: dict[str, dict], rails: set[str], topology) -> tuple[str, int, int] | None:
    """A rail on which many nodes are below the line on that rail alone
    (failed, or retests not yet decided), with no switch the run's
    topology names for them, far more than on any other rail: one shared
    part (a leaf, a spine plane, a patch panel) the run cannot see, not
    that many NICs at once. Independent NIC faults spread over the rails;
    a rail with more than 4x the other rails' mean plus 4 (and at least
    SHARED_RAIL_MIN) is not them. Retests count: a slow leaf's nodes are
    decided a few per round (six of a 2,048-node fleet's 32 in round 0,
    "H leaf, no topology" 7013), and each round's drains are final, so
    the guard must see the whole group before any of it is drained.
    Returns (rail, nodes, most on another rail) or None."""
    per_rail: dict[str, int] = {}
    for n, v in nodes.items():
        rail = None if v["verdict"] == "pass" else _rail_alone(v)
        if rail is not None and (topology is None or topology.leaf_of(n, rail) is None):
            per_rail[rail] = per_rail.get(rail, 0) + 1
    if not per_rail:
        return None
    rail = max(sorted(per_rail), key=lambda r: per_rail[r])
    others = [c for r, c in per_rail.items() if r != rail]
    mean_other = sum(others) / max(1, len((rails | set(per_rail)) - {rail}))
    if per_rail[rail] >= SHARED_RAIL_MIN and per_rail[rail] > 4 * mean_other + 4:
        return rail, per_rail[rail], max(others, default=0)
    return None


def unmapped_shared_block(nodes: dict[str, dict], all_nodes: list[str], topology,
                          between: dict[str, set[str]] | None = None) -> tuple[str, list[str]] | None:
    """Nodes named one after another (sites name a rack's or a scalable
    unit's nodes in order: gpu[01664-01695]) below the line together on
    one key (the whole-node key, or one rail's), at least SHARED_RAIL_MIN
    with none between them reading fine there, and no switch the run's
    topology knows for them on it: one shared part (their leaf, a rack's
    cabling), not that many nodes at once. Whole-node pairs run over
    every rail, so without a topology a slow rail leaf reads as its nodes
    being slow with every partner (2,048 nodes, whole-node tests only: the
    leaf's 32 nodes were drained, "H leaf, no topology" 7023); on a rail
    key two slow leaves on two rails hide each other from
    unmapped_shared_rail's count. Independent slow nodes and NICs are
    scattered over the names. A node without a number on the key neither
    breaks nor joins a block; one the topology places breaks it (a map
    missing a few nodes: they are not one after another). Returns (key,
    the longest such block in natural name order) or None. A retest that
    a pair of switches explains (`between`: _between_switches) is placed:
    it breaks a block."""
    low: dict[str, dict[str, bool]] = {}  # key -> node -> below the line there
    fine: list[str] = []                 # nodes every key of which passed (read fine on each key they have)
    rail_of: dict[str, str | None] = {}  # key -> its rail (None: the whole-node key), split once
    between = between or {}
    for n in all_nodes:
        v = nodes[n]
        if v["verdict"] == "pass":
            fine.append(n)
            continue
        explained = between.get(n, ())
        for k, kv in v.get("keys", {}).items():
            if k not in rail_of:
                _, kind, rail = split_key(k)
                if kind not in ("pair", "rail"):
                    continue
                rail_of[k] = rail if kind == "rail" else None
            low.setdefault(k, {})[n] = kv.get("verdict") in _SUSPECT and \
                not (kv.get("verdict") == "retest" and k in explained)
    rails = sorted({r for k, r in rail_of.items() if r is not None})

    @functools.cache
    def unknown(n: str, rail: str | None) -> bool:
        """No switch known for n on that key: a rail key, no leaf on that
        rail; the whole-node key, none at all (a per-rail map's units,
        fabricmodel.whole_node_units, find the switch there)."""
        if topology is None:
            return True
        if rail is not None:
            return topology.leaf_of(n, rail) is None
        return topology.leaf_of(n, None) is None and all(topology.leaf_of(n, r) is None for r in rails)

    found: tuple[str, list[str]] | None = None
    order: list[str] = []
    for k in sorted(low):
        rail = rail_of[k]
        if sum(1 for n, x in low[k].items() if x and unknown(n, rail)) < SHARED_RAIL_MIN:
            continue
        seen = {**dict.fromkeys(fine, False), **low[k]}
        order = order or sorted(all_nodes, key=_natural)
        best: list[str] = []
        block: list[str] = []
        for n in order:
            if n not in seen:
                continue
            if seen[n] and unknown(n, rail):
                block.append(n)
                continue
            best, block = max(best, block, key=len), []
        best = max(best, block, key=len)
        if len(best) >= SHARED_RAIL_MIN and (found is None or len(best) > len(found[1])):
            found = (k, best)
    return found


def _blast_radius(nodes: dict[str, dict], all_nodes: list[str], results: dict[str, KeyResult], p: Params,
                  held: _Held, problems: list[str], topology=None, between: dict[str, set[str]] | None = None) -> _Guard:
    """A run that would drain too much of the fleet drains nothing: too
    many fails, a fleet split in two levels on a key, many nodes failing
    one rail alone, or nodes named one after another on the whole-node key,
    with no switch known for them (unmapped_shared_rail,
    unmapped_shared_block), or
    retests the budget could not decide without that (_decide_retests) are
    a fabric problem (or a bug), not bad nodes. Says which, once."""
    would = sorted(n for n in all_nodes if nodes[n]["verdict"] == "fail")
    tested = sum(1 for v in nodes.values() if v["verdict"] != "untested")
    cap = max(p.guard_min, int(p.guard_fraction * tested))
    tripped = len(would) > cap or bool(held.budget_held)
    rails = {split_key(k)[2] for k in results if split_key(k)[1] == "rail"}
    shared = None if tripped else unmapped_shared_rail(nodes, rails, topology)
    block = None if tripped or shared else unmapped_shared_block(nodes, all_nodes, topology, between)
    tripped = tripped or shared is not None or block is not None
    split = {k: r.info["clearly_above"] for k, r in results.items() if r.info.get("split")}
    if split:
        tripped = True
        problems.append("blast-radius guard: the fleet is split in two levels (" +
                        ", ".join(f"{k}: {c} nodes clearly above the median of the rest" for k, c in sorted(split.items())) +
                        "); draining none: suspect a fabric-wide problem")
    elif shared:
        rail, count, most = shared
        problems.append(f"blast-radius guard: {count} nodes are below the line on rail {rail} alone (at most {most} "
                        "on any other rail) and the run's topology names no switch for them: one shared part (a "
                        "leaf, a spine plane, cabling), not that many NICs; draining none: give the burn-in a fabric "
                        "map (slurmqual fabric map) so it can name the switch")
    elif block:
        key, names = block
        on = "the whole-node key" if split_key(key)[1] == "pair" else f"rail {split_key(key)[2]}"
        problems.append(f"blast-radius guard: {len(names)} nodes named one after another ({names[0]} .. {names[-1]}) "
                        f"are below the line together on {on} ({key}) and the run's topology names no switch "
                        "for them: one shared part (their leaf, a rack's cabling), not that many nodes; draining "
                        "none: give the burn-in a topology (burnin.topology: slurmqual fabric map, or Slurm's "
                        "topology.conf) so it can name the switch")
    elif len(would) > cap:
        problems.append(f"blast-radius guard: {len(would)} of {tested} nodes would be drained (limit {cap}); "
                        "draining none: suspect a fabric-wide problem")
    elif held.slow_held:
        problems.append(f"blast-radius guard: {held.slow_held} of {tested} nodes are below the line on one key by their "
                        f"own level, and the retest budget ({held.budget}) or the last round decides the retests (limit "
                        f"{held.cap0}); draining none: suspect a fabric-wide problem")
    elif held.budget_held:
        problems.append(f"blast-radius guard: {len(would)} of {tested} nodes fail and deciding the {held.budget_held} "
                        f"retests past the budget ({held.budget}) would leave {held.below} below the line on one key "
                        f"(limit {held.cap0}, {2 * held.cap0} below the line); draining none: suspect a fabric-wide problem")
    return _Guard(would, tested, cap, tripped)


def _unpass_in_held_run(nodes: dict[str, dict], results: dict[str, KeyResult], run: _RunInputs,
                        parts: dict[str, tuple], p: Params) -> None:
    """A held run vouches for no node it cannot (_unpass_below_healthy),
    each by the margin its own number of pairs per key gives."""
    per_key: dict[tuple[str, str], int] = {}
    for m in run.valid:
        if len(m.nodes) == 2:
            for x in m.nodes:
                per_key[(m.key, x)] = per_key.get((m.key, x), 0) + 1
    _unpass_below_healthy(nodes, results, p.threshold, run.tests, parts, p.alpha, per_key)


def _below_baselines(nodes: dict[str, dict], baselines: dict[str, dict[str, float]] | None,
                     noise_of: dict[str, float], p: Params, guard: _Guard,
                     problems: list[str]) -> tuple[dict[str, dict], bool]:
    """Nodes below their own baselines (per-GPU keys per GPU serial,
    gpus.below_baselines; the others by their own effect,
    _below_own_baselines), and whether so many are that the fabric slowed:
    a slowdown of the whole fabric moves the fleet median with it, so the
    relative test sees nothing; the nodes' own baselines still do."""
    from .gpus import below_baselines, is_gpu_key

    below = below_baselines(nodes, {k: b for k, b in (baselines or {}).items() if is_gpu_key(k)}, p.baseline_drop)
    for key, base_of in (baselines or {}).items():
        if not is_gpu_key(key):
            _below_own_baselines(nodes, key, base_of, noise_of.get(key, p.noise_floor), p, below)
    slowdown = len(below) > guard.cap
    if slowdown:
        problems.append(f"fleet-wide slowdown: {len(below)} of {guard.tested} nodes are more than "
                        f"{p.baseline_drop:.0%} below their own baselines; baselines not updated")
    return below, slowdown


def _untested_reasons(nodes: dict[str, dict], all_nodes: list[str], problems: list[str]) -> None:
    """Every `untested` node says why (a stage before may have: the budget);
    one with measurements is a problem the admin sees."""
    for n in all_nodes:
        v = nodes[n]
        if v["verdict"] == "untested" and "why" not in v:
            v["why"] = "no valid pair measurement (an intra-node number alone never passes)" if v["keys"] \
                else "nothing measured"
        if v["verdict"] == "untested" and v["keys"]:
            problems.append(f"{n}: untested: {v['why']}")


def _retest_plan(nodes: dict[str, dict], links: list[list[str]], clear: list[list[str]], again: list[list[str]],
                 run: _RunInputs, trusted: set[str] | None, topology, rounds: RoundState | None,
                 problems: list[str], threshold: float) -> list[list[list[str]]]:
    """The next round (next_round_plan, the one function that plans it),
    and how many retest nodes it could not pair with a proven-good partner."""
    retest = sorted(n for n in run.all_nodes if nodes[n]["verdict"] == "retest")
    plan = next_round_plan(nodes, links, clear, again, run.measurements, trusted, topology, rounds, threshold)
    planned = {n for rnd in plan for pair in rnd for n in pair}
    if [n for n in retest if n not in planned]:
        problems.append(f"{len([n for n in retest if n not in planned])} node(s) need a retest but have no "
                        "proven-good partner to pair them with")
    return plan


def _key_summary(results: dict[str, KeyResult], medians: dict[str, float],
                 gpu_keys: dict[str, dict]) -> tuple[dict[str, float], dict[str, dict]]:
    """Per key (GPU keys included): its noise, and median, line, counts and
    verdict tally for the analysis' `keys`."""
    noise = {k: round(r.noise, 4) for k, r in results.items()}
    keys_out = {k: {"median": medians[k], "noise": noise[k], "line": round(r.line, 3), **r.info,
                    "verdicts": {v: sum(1 for x in r.verdicts.values() if x == v) for v in VERDICT_ORDER}}
                for k, r in results.items()}
    keys_out.update(gpu_keys)
    # A GPU key's noise as its tail reaches (gpus.tail_noise): what the store
    # keeps for sizing the next burn-in's first round (runner.gpu_runs).
    noise.update({k: v.get("tail_noise", v["noise"]) for k, v in gpu_keys.items()})
    return noise, keys_out


def _name_switches(findings: list[SwitchFinding], problems: list[str]) -> list[str]:
    """The suspect switches, each finding told as a problem (none of its nodes drained)."""
    switches = sorted({f.switch for f in findings})
    for f in findings:
        problems.append(f"suspect switch {f.switch} ({f.key}): {'pairs leaving it' if f.kind == 'uplinks' else 'pairs through it'} "
                        f"at {f.factor:.0%} of the fleet over {f.nodes} nodes; none of its nodes drained for it")
    return switches


def _below_own_baselines(nodes: dict[str, dict], key: str, base_of: dict[str, float], noise: float, p: Params,
                         below: dict[str, dict]) -> None:
    """Nodes more than `baseline_drop` below their own baselines on `key`, by
    their own effect: each node's own level (over partners not under
    suspicion: a slow partner is not its fault) against its baseline, and
    against the fabric's shift (the median of those ratios over the nodes
    with a baseline). A fabric 8% slower than at baseline moves every node
    by 8%: a node is reported when it is below by the drop and below the
    shift by more than the noise (a healthy node's 3% of noise on top of
    the 8% is the fabric's, not its own), or when the shift itself is past
    the drop (the whole fabric slowed: every node, a fleet-wide slowdown).
    Fewer than three nodes with a baseline (a requalify) cannot tell the
    fabric from the node: below by the drop is below."""
    ratio: dict[str, tuple[float, float]] = {}
    for n, base in base_of.items():
        v = nodes.get(n, {}).get("keys", {}).get(key)
        own = v.get("own", v["score"]) if v else None
        if base and own is not None:
            ratio[n] = (own / base, own)
    if not ratio:
        return
    shift = median(r for r, _own in ratio.values()) if len(ratio) >= 3 else 1.0
    margin = one_sided_z(p.alpha, len(ratio)) * max(noise, p.noise_floor)
    for n, (r, own) in ratio.items():
        if r >= 1 - p.baseline_drop:
            continue
        if shift >= 1 - p.baseline_drop and r / shift >= 1 - margin:
            continue  # the fabric's shift and the noise, not the node
        if n not in below or r < below[n]["score"] / below[n]["baseline"]:
            below[n] = {"key": key, "score": own, "baseline": base_of[n]}


def next_round_plan(nodes: dict[str, dict], suspect_links: list[list[str]], clear_links: list[list[str]],
                    remeasure_links: list[list[str]], measurements: list[Measurement],
                    trusted: set[str] | None = None, topology=None,
                    rounds: RoundState | None = None, threshold: float | None = None) -> list[list[list[str]]]:
    """The next retest round (plan.next_round) from this run's pairs: the one
    function that plans a round. analyze() writes it as `retest_plan`, the
    analysis job submits that; a caller holding an Analysis and the run's raw
    lines gets the same plan with
    ``next_round_plan(a.nodes, a.suspect_links, a.clear_links, a.remeasure_links,
    records.from_dicts(raw), topology=topo)``. The links measured again are
    those no key settles (plan.to_remeasure); partners met on any pair test,
    valid or not; how often each pair was measured (valid tests only);
    `threshold`: the run's (Params.threshold), for plan.low_pairs."""
    from .plan import low_pairs, met_of, next_round, repeats_of

    links = to_remeasure(suspect_links, clear_links, remeasure_links, rails_open=True)
    pairs = [m for m in measurements if len(m.nodes) == 2]
    key_of: dict[tuple, str] = {}  # one key per (test, GPU model, rail), not one make_key per line
    # The pairs of the nodes the round retests, per key (plan.low_pairs:
    # those below 90% of what both ends read elsewhere are measured again
    # in the round that retests them).
    p = Params()
    retested = {n for n, v in nodes.items() if v["verdict"] == "retest"}
    values: dict[tuple[str, str, str], list[float]] = {}
    sizes: dict[str, set[int]] = {}
    if retested:
        for m in pairs:
            a, b = m.nodes
            if m.ok and m.rail is None and (a in retested or b in retested):  # whole-node keys (low_pairs)
                k = key_of.get((m.test, m.gpu_model, m.rail)) or key_of.setdefault((m.test, m.gpu_model, m.rail), m.key)
                sizes.setdefault(k, set()).add(m.size)
                values.setdefault((a, b, k, m.size) if a < b else (b, a, k, m.size), []).append(m.busbw)
    # at the size the key is judged at (_at_reference: the reference size, else the largest)
    at = {k: p.reference_size if p.reference_size in s else max(s) for k, s in sizes.items()}
    lows = low_pairs(nodes, {(a, b, k): median(vs) for (a, b, k, size), vs in values.items() if size == at[k]},
                     threshold or p.threshold)
    # A pair whose link (on the whole-node key or a rail) the evidence already
    # settles is not asked again: it is that cable's, and a third value only
    # reopens it (whole run 5028: a route cleared on two values, measured a
    # third time as a retested end's low pair, was then put down to the
    # fleet's transient hits and never named).
    settled = {frozenset(x[:2]) for x in clear_links}
    lows = [x for x in lows if frozenset(x) not in settled]
    # How often each suspect link was measured (next_round asks only about
    # those): its lines, not every pair's (a pass over 237,568 lines at 16k x 8).
    asked = {(x[0], x[1]) for x in [*links, *lows]} | {(x[1], x[0]) for x in [*links, *lows]}
    # A failed test measured nothing: a link whose repeat failed is measured
    # again (counted, it kept one value and no round: its suspect link was
    # dropped unsettled once the rounds were spent).
    times = repeats_of((m.nodes, key_of.get((m.test, m.gpu_model, m.rail)) or
                        key_of.setdefault((m.test, m.gpu_model, m.rail), m.key))
                       for m in pairs if m.ok and m.nodes in asked)
    state = rounds or RoundState()
    if state.switch_of is None and topology is not None:
        from .topology import switch_of

        state = RoundState(state.decided, state.unavailable, switch_of(topology), state.partners, state.last)
    # each pair once (a pair has a line per rail and test): the same sets, in the same order
    return next_round(nodes, links, met_of(dict.fromkeys(m.nodes for m in pairs)), times, trusted or (), state, lows)


def keep_decided(nodes: dict[str, dict], decided: dict[str, dict]) -> None:
    """A fail an earlier round of the run decided stays `fail` (its node is
    drained, or waits for its rails' retest): later measurements may name
    its part (a NIC), never turn it back into `retest` or `pass`."""
    for n, d in decided.items():
        v = nodes.get(n)
        if v is None:
            continue
        if v["verdict"] != "fail":
            v.update(verdict="fail", key=d.get("key"), score=d.get("score"), failed_nics=d.get("failed_nics", []))
            v.pop("why", None)
        v["decided_in"] = d.get("round", 0)


def rail_questions(clear: list[list[str]], results: dict[str, KeyResult], graphs: dict,
                   by_key: dict[str, list[Measurement]]) -> list[list[str]]:
    """[a, b, rail] for each pair the whole-node key settles (`clear`) while
    no rail key names one of its rails, on each rail that reads it below
    that key's line: measured again (`remeasure_links`, plan.to_remeasure)
    until a rail key names the cable, as many times as any link
    (plan.LINK_VALUES). The whole-node key says a cable between the two is
    slow, the rails say which: at 8% noise a route at 0.6 read 0.69 and
    0.46 on its rail, named on neither value's margin, settled by the
    whole-node key and never measured a third time. Where every rail reads
    the pair above its line, the rails have answered (not a cable of theirs)."""
    rail_named = {frozenset(x[:2]) for x in clear if len(x) > 2}
    whole = [tuple(x[:2]) for x in clear if len(x) == 2 and frozenset(x[:2]) not in rail_named]
    out: list[list[str]] = []
    if not whole:
        return out
    for key, r in sorted(results.items()):
        _test, topo, nic = split_key(key)
        if topo != "rail":
            continue
        g = graphs.get(key) or link_values(by_key[key])
        for a, b in whole:
            v = g.value.get((a, b), g.value.get((b, a)))
            if v is not None and v < r.line:
                out.append([a, b, nic])
    return out


def keep_cleared(nodes: dict[str, dict], links: list[list[str]], clear: list[list[str]],
                 cleared: list[list[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """Rounds spent (the caller passes `cleared` only to the analysis of the
    last round): a link an earlier analysis of the run cleared, not measured
    since (plan.RoundState.cleared), stays a cleared suspect link, as a
    decided fail stays fail: a new clearly low pair elsewhere among the last
    round's pairs unsettled it on the same values, and with no round left it
    was dropped unsettled. While rounds remain, a cleared link the new pairs
    unsettle is measured again instead: a clear on one value rests on the
    fleet showing no other clearly low pair (pairs.suspect_links' `away`),
    and a round that shows one asks the question again (carried, such
    links were never measured again: noise-only links stayed named, and a
    link named on the whole-node key kept its rail from being found). Not
    where an end fails now: its low pairs are that node's."""
    have = {tuple(x) for x in links}
    settled = {tuple(x) for x in clear}
    add = [x for x in cleared if tuple(x) not in settled
           and not any(nodes.get(n, {}).get("verdict") == "fail" for n in x[:2])]
    if not add:
        return links, clear
    return (sorted([*links, *(list(x) for x in add if tuple(x) not in have)]),
            sorted([*clear, *(list(x) for x in add)]))


def _behind(n: str, keys: dict, parts: dict[str, tuple], found_in: dict[str, set[str]], paths) -> list[str]:
    """The switches found slow on the keys `n` was measured under that it sits behind."""
    from .fabricmodel import behind

    return behind(n, {k: parts[k][2] if parts[k][1] == "rail" else None for k in keys if k in found_in},
                  found_in, paths)


def _natural(name: str) -> tuple:
    """mlx5_2 before mlx5_10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def rail_number(analysis: dict, nic: str) -> int:
    """Rail N: the N-th NIC (natural order) among the rails this run measured."""
    rails = sorted({split_key(k)[2] for k in analysis.get("median") or {} if split_key(k)[1] == "rail"} - {None},
                   key=_natural)
    return rails.index(nic) if nic in rails else -1
