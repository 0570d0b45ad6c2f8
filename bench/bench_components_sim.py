#!/usr/bin/env python3
"""Which part to replace (issue #16): the node, one NIC rail, one cable or
one leaf switch, on simulated fabrics (tests/fleet.py RailFabric: the
stand-in ib_write_bw's model) measured per rail (8 NICs) over the plan the
job array runs (switch-aware groups and rounds, plan.py), with up to
MAX_RETEST_ROUNDS automatic retest submissions as the analysis job submits
them (the analysis' own planner, analyze.next_round_plan: new partners under new switches).

Fabrics: *rail-optimised* (each rail has its own leaf per scalable unit of
32 nodes: leaf su<k>-r<rail>) and *per-node leaves* (all 8 NICs of a node on
one leaf of 8 nodes).

Families, each reported separately:
- nic: one NIC of eight at half rate on 1% of nodes;
- cable: a bad cable on one rail (one node pair's rail at 0.4-0.6);
- leaf slow: one leaf switch 20% slow (per-node leaves);
- uplinks: a leaf whose uplinks are degraded (0.6-0.8: only pairs leaving it);
- rail leaf: one rail's leaf slow for a whole scalable unit (0.7-0.82);
- route: a slow route on one rail between two good NICs under different leaves (0.65-0.78);
- combo: slow nodes (0.5-0.85, every NIC) with a slow rail leaf and bad NICs;
- transient: heavy-tailed noise (transient congestion on 4% of measurements) with bad NICs and a slow leaf;
- borderline: NICs and nodes just below the line (0.85-0.87).

Ground truth comes from the fabric model and the plan, decided before the
analysis runs (`truth()`), with the noise the model was given:
- a slow NIC (node factor times NIC factor below 1) must fail its node when
  the evidence clears the noise (a NIC fault: and be named in failed_nics;
  a node slow on every NIC is a node to replace, its NICs are not counted
  as NIC faults): at least two
  partners on that rail, one of them healthy with a clean path (no slow
  switch, uplink or route on the way), and its factor even +3 sd below the
  drain margin the fleet size requires; a NIC more than 2 sd below the line
  never lets its node pass;
- a node whose NICs are all healthy is never drained (behind a slow switch or
  not): a false drain;
- a slow switch (every path, or its uplinks) whose factor even +3 sd is below
  the line must be in suspect_switches; a switch named that is not slow is wrong;
- a slow route/cable on a rail between two nodes fine elsewhere on that rail,
  clearly below the line (one value's margin over the rail's pairs, +3 sd),
  must be in suspect_links as [a, b, nic];
- retests at most max(2, 5% of tested), after at most 2 follow-up rounds.
A node counts as drained when an analysis drained it: the final one, or an
earlier one that submitted a retest round (it drains its decided fails at
once unless the guard could trip: burnin/run/retest.py settle).

Issue 22 families (bench/runsim.py: a generator apart from tests/fleet.py,
whole-node nccl-tests pairs and per-rail tests both run, only a fabric map,
every retest round played out from the plan the run itself submits; printed
first, each family on 64-1,024 nodes x 4-8 rails): a slow rail leaf; half a
scalable unit's rail leaves slow; either with slow nodes and bad NICs; a
NIC at 0.8; slow routes at 5% and at 8% noise. Then a timing row: 16,384
nodes x 8 rails, whole-node and per-rail lines, analysed with the fabric map.

Usage: python3 bench/bench_components_sim.py [--seeds N] [--sizes 512,4096] [--seed-base N] [--family F]
       [--only new|old|heldout] [--timing-only] [--no-timing] [--scenarios N] [--pick SEED,...]
The issue 22 sweep of docs/BENCHMARKS.md: --only new --no-timing --scenarios 100 --seed-base B
(seeds B..B+99 in every family; --pick replays listed scenarios of that set).
The held-out check (--only heldout, families named "H ..."): what the families fix and a field
does not (fleet sizes 32, 96, 2,048, 48, 160; the fabric map, Slurm's topology.conf or no
topology; whole-node + per-rail, whole-node only or per-rail only; a slow spine plane, two slow
leaves, a leaf with NICs behind it, failed tests and dead tasks, 5% student-t noise, 20% of
nodes slow, a clean fleet); docs/BENCHMARKS.md "Held-out check". Session 5 adds
(HELDOUT_GEN2): a leaf at 0.5 and at 0.88; a fat-tree (every NIC of a node on one
leaf) with the map or topology.conf; two slow leaves on one rail; every test kind
with GPU tools (8 GPUs, or 2 GPUs and 4 rails) with a leaf, GPUs at 0.85 and NICs at
0.8; a stale map (a node recabled into another unit); a map missing 5% of the
nodes; 2,048 nodes with whole-node tests only; a leaf with failed tests and dead
tasks; docs/BENCHMARKS.md "Held-out families, session 5". Session 6 adds
(HELDOUT_GEN3, named "H3 ...", at the issue's sizes 64-1,024 nodes): 2-4
rails with a leaf, whole-node + per-rail or whole-node only; 1,024 nodes with
two leaves on two rails, bad NICs and slow links at 8% noise; GPU run-to-run
noise 5% with a leaf; a leaf at 0.85 under 5% pair noise; host names that do
not follow the racks (the map says); a leaf while 20% of the tasks die; a leaf
that is also the leaf of bad NICs' nodes; a leaf on a rail burnin.rails does
not list (runsim `Fabric.rail_subset`); docs/BENCHMARKS.md "Held-out families,
session 6". Session 7 adds (HELDOUT_GEN4, named "H4 ...", `--family "H4 "`):
every rail's spine plane slow; every leaf of one unit with slow uplinks; a
fat-tree given as a three-level topology.conf with whole-node tests only;
a map that omits a whole unit; alltoall + all_reduce + per-rail + GPU keys
in one run; a leaf at exactly 0.90 and at 0.93; 16 nodes x 2 rails with a
leaf; every leaf of one unit slow; docs/BENCHMARKS.md "Held-out families,
session 7".
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from bench_burnin_sim import drained_before_retest  # noqa: E402  (the run's drain rule, shared)
from fleet import RailFabric, names, run_rails  # noqa: E402
from slurmqual.burnin.judge.analyze import analyze, next_round_plan  # noqa: E402
from slurmqual.burnin.records import Measurement, Params  # noqa: E402
from slurmqual.burnin.judge.plan import groups, rounds  # noqa: E402
from slurmqual.burnin.judge.topology import Topology, switch_of  # noqa: E402
import runsim  # noqa: E402  (bench/runsim.py: the issue 22 families' generator and run)

THRESHOLD, ROUNDS, GROUP = 0.9, 3, 16
RAILS = [f"mlx5_{i}" for i in range(8)]
SU, LEAF = 32, 8  # nodes per scalable unit (rail-optimised) / per leaf (per-node leaves)
RETEST_BUDGET = 0.05
MAX_RETEST_ROUNDS = 2
P = Params()
NORMAL = statistics.NormalDist()


@dataclass
class Scenario:
    name: str
    family: str
    fabric: str = "rail"         # "rail" (rail-optimised) or "leaf" (per-node leaves)
    noise: float = 0.02
    transient: float = 0.0
    nics: float = 0.0            # fraction of nodes with one slow NIC
    nic_level: tuple[float, float] = (0.5, 0.5)
    slow_nodes: float = 0.0      # fraction of nodes slow on every NIC
    node_level: tuple[float, float] = (0.5, 0.85)
    cables: int = 0              # pairs with one slow rail (cable), same or different leaves
    routes: int = 0              # pairs under different leaves with one slow rail (route)
    slow_leaf: tuple[float, float] | None = None      # one leaf (every rail of its nodes / one rail in one SU)
    uplinks: tuple[float, float] | None = None        # one leaf's uplinks


SCENARIOS = [
    Scenario("one NIC of 8 at half rate on 1% of nodes", "nic", nics=0.01),
    Scenario("one NIC at half rate on 1%, per-node leaves", "nic", fabric="leaf", nics=0.01),
    Scenario("1 bad cable on one rail", "cable", cables=1),
    Scenario("3 bad cables on one rail each, noise 3%", "cable", cables=3, noise=0.03),
    Scenario("leaf switch 20% slow", "leaf slow", fabric="leaf", slow_leaf=(0.8, 0.8)),
    Scenario("leaf switch 20% slow + NIC faults", "leaf slow", fabric="leaf", slow_leaf=(0.8, 0.8), nics=0.01),
    Scenario("leaf uplinks degraded", "uplinks", fabric="leaf", uplinks=(0.6, 0.8)),
    Scenario("rail leaf uplinks degraded (rail-optimised)", "uplinks", uplinks=(0.6, 0.8)),
    Scenario("one rail's leaf slow for a scalable unit", "rail leaf", slow_leaf=(0.7, 0.82)),
    Scenario("rail leaf slow + NIC faults, noise 3%", "rail leaf", slow_leaf=(0.7, 0.82), nics=0.01, noise=0.03),
    Scenario("slow route on one rail between good NICs", "route", routes=1),
    Scenario("2 slow routes, noise 3%", "route", routes=2, noise=0.03),
    Scenario("slow nodes 2% + rail leaf slow + NIC faults", "combo", slow_nodes=0.02, slow_leaf=(0.7, 0.82),
             nics=0.01),
    Scenario("slow nodes 2% + slow leaf + cable", "combo", fabric="leaf", slow_nodes=0.02, slow_leaf=(0.8, 0.8),
             cables=1),
    Scenario("transient 4% + NIC faults", "transient", transient=0.04, nics=0.01),
    Scenario("transient 4% + rail leaf slow + slow nodes 1%", "transient", transient=0.04, slow_leaf=(0.7, 0.82),
             slow_nodes=0.01),
    Scenario("NICs at 0.85-0.87 on 2%", "borderline", nics=0.02, nic_level=(0.85, 0.87)),
    Scenario("nodes at 0.85-0.87 on 2%, noise 3%", "borderline", slow_nodes=0.02, node_level=(0.85, 0.87),
             noise=0.03),
]


def layout(nodes: list[str], kind: str) -> tuple[dict[tuple[str, str], str], Topology]:
    """(node, nic) -> leaf, and the topology the analysis is given (a fabric map)."""
    if kind == "rail":
        leaf = {(n, r): f"su{i // SU}-r{j}" for i, n in enumerate(nodes) for j, r in enumerate(RAILS)}
        return leaf, Topology("sim", rail_switch=dict(leaf))
    leaf = {(n, r): f"leaf{i // LEAF}" for i, n in enumerate(nodes) for r in RAILS}
    return leaf, Topology("sim", node_switch={n: f"leaf{i // LEAF}" for i, n in enumerate(nodes)})


def plan_of(nodes: list[str], topo: Topology) -> list[list[list[tuple[str, str]]]]:
    """What the job array runs: switch-aware groups and rounds (runner.submission)."""
    sw = switch_of(topo)
    return [rounds(g, ROUNDS, sw) for g in groups(nodes, GROUP, sw)]


def build(sc: Scenario, n: int, seed: int):
    rng = random.Random(seed * 7919 + n)
    nodes = names(n)
    leaf, topo = layout(nodes, sc.fabric)
    plan = plan_of(nodes, topo)
    f = RailFabric(RAILS, leaf, noise=sc.noise, transient=sc.transient)
    leaves = sorted(set(leaf.values()))
    if sc.slow_leaf:
        f.switches[rng.choice(leaves)] = rng.uniform(*sc.slow_leaf)
    if sc.uplinks:
        f.uplinks[rng.choice([s for s in leaves if s not in f.switches])] = rng.uniform(*sc.uplinks)
    for x in rng.sample(nodes, max(1, round(sc.slow_nodes * n))) if sc.slow_nodes else []:
        f.node[x] = rng.uniform(*sc.node_level)
    for x in rng.sample(nodes, max(1, round(sc.nics * n))) if sc.nics else []:
        f.nic[(x, rng.choice(RAILS))] = rng.uniform(*sc.nic_level)
    pairs = [p for task in plan for rnd in task for p in rnd]
    clean = [p for p in pairs if not set(p) & (set(f.node) | {x for x, _r in f.nic})]
    used: set[str] = set()
    for count, across, level in ((sc.cables, None, (0.4, 0.6)), (sc.routes, True, (0.65, 0.78))):
        chosen = 0
        for a, b in rng.sample(clean, len(clean)):
            if chosen == count:
                break
            nic = rng.choice(RAILS)
            if {a, b} & used or (across and leaf[(a, nic)] == leaf[(b, nic)]) \
                    or f.switches.get(leaf[(a, nic)]) or f.switches.get(leaf[(b, nic)]):
                continue
            f.link[(frozenset((a, b)), nic)] = rng.uniform(*level)
            used |= {a, b}
            chosen += 1
    return nodes, topo, plan, f


@dataclass
class Truth:
    must_nic: set[tuple[str, str]]   # (node, nic) that must fail and be named
    must_fail: set[str]
    never_pass: set[str]
    healthy: set[str]
    switches: set[str]               # slow switches (any)
    must_switch: set[str]            # clearly slow: must be named
    links: set[tuple]                # (frozenset pair, nic) slow routes (any)
    must_link: set[tuple]
    budget: int


def truth(nodes: list[str], plan, f: RailFabric, sc: Scenario) -> Truth:
    """What a right answer is, from the fabric model and the plan alone."""
    sigma = max(sc.noise, P.noise_floor)
    partners: dict[str, set[str]] = {x: set() for x in nodes}
    for task in plan:
        for rnd in task:
            for a, b in rnd:
                partners[a].add(b)
                partners[b].add(a)

    def net(x: str, nic: str) -> float:
        return f.node.get(x, 1.0) * f.nic.get((x, nic), 1.0)

    def path(a: str, b: str, nic: str) -> float:
        """The pair's factor without its ends' NICs: switches, uplinks, route."""
        return f.factor(a, b, nic) / (net(a, nic) * net(b, nic))

    def fine_elsewhere(q: str, x: str, nic: str) -> bool:
        return any(net(r, nic) == 1.0 and path(q, r, nic) == 1.0 for r in partners[q] if r != x)

    tested = sum(1 for x in nodes if partners[x])
    z_fleet = NORMAL.inv_cdf(1 - P.alpha / max(tested, 1))
    must_nic, never_pass = set(), set()
    must_fail = set()
    for x in nodes:
        for nic in f.rails:
            v = net(x, nic)
            if v == 1.0 or not partners[x]:
                continue
            good = [q for q in partners[x] if net(q, nic) == 1.0 and path(x, q, nic) == 1.0
                    and fine_elsewhere(q, x, nic)]
            m = len(good) // 2 + 1
            sd = sigma / math.sqrt(m)
            if len(partners[x]) >= 2 and good and v * (1 + 3 * sd) < THRESHOLD * (1 - z_fleet * sd):
                must_fail.add(x)
                if (x, nic) in f.nic:  # a NIC fault: that NIC is the part to replace (a slow node: the node)
                    must_nic.add((x, nic))
            if v < THRESHOLD - 2 * sigma:
                never_pass.add(x)
    healthy = {x for x in nodes if all(net(x, nic) == 1.0 for nic in f.rails)}
    slow_sw = set(f.switches) | set(f.uplinks)
    must_switch = {s for s, v in {**f.switches, **f.uplinks}.items() if v * (1 + 3 * sigma) < THRESHOLD}
    n_pairs = sum(len(p) for p in partners.values()) // 2
    z_link = NORMAL.inv_cdf(1 - P.alpha / max(n_pairs, 1))
    must_link = set()
    for (pair, nic), v in f.link.items():
        a, b = sorted(pair)
        if net(a, nic) == net(b, nic) == 1.0 and b in partners[a] and fine_elsewhere(a, b, nic) \
                and fine_elsewhere(b, a, nic) and v * (1 + 3 * sigma) < THRESHOLD * (1 - z_link * sigma):
            must_link.add((pair, nic))
    return Truth(must_nic, must_fail, never_pass, healthy, slow_sw, must_switch,
                 set(f.link), must_link, max(2, int(RETEST_BUDGET * tested)))


def slurmqual(nodes, topo, plan, f: RailFabric, seed: int):
    """The analysis, then up to MAX_RETEST_ROUNDS automatic retest rounds
    planned as the analysis job plans them, measured on the same fabric."""
    ms = run_rails(plan, f, seed)
    a = analyze(ms, nodes, topology=topo)
    extra = 0
    drained: dict[str, list[str]] = {}  # drained before a retest round, with the NICs its reason named
    while a.retest_plan and extra < MAX_RETEST_ROUNDS and not a.guard_tripped:
        extra += 1
        for x in drained_before_retest(a):
            drained.setdefault(x, a.nodes[x].get("failed_nics", []))
        nxt = next_round_plan(a.nodes, a.suspect_links, a.clear_links, a.remeasure_links, ms, topology=topo)
        if not nxt:
            break
        more = run_rails([[[tuple(p) for p in rnd] for rnd in nxt]], f, seed * 31 + extra)
        ms = ms + [Measurement(m.nodes, m.busbw, m.size, m.test, task=10_000 * extra, round=m.round, rail=m.rail)
                   for m in more]
        a = analyze(ms, nodes, topology=topo)
    for x in a.drain:
        drained.setdefault(x, a.nodes[x].get("failed_nics", []))
    return a, drained, extra


def judge(t: Truth, a, drained_nics: dict[str, list[str]], extra: int) -> dict:
    drained = set(drained_nics)
    named = {(x, nic) for x, v in a.nodes.items() for nic in v.get("failed_nics", [])} \
        | {(x, nic) for x, nics in drained_nics.items() for nic in nics}
    verdict = {x: v["verdict"] for x, v in a.nodes.items()}
    false = drained & t.healthy
    switches = set(a.suspect_switches)
    links = {(frozenset(link[:2]), link[2]) for link in a.suspect_links if len(link) == 3}
    retests = sum(1 for v in verdict.values() if v == "retest")
    why = []
    if false:
        why.append(f"false drains {sorted(false)}")
    if a.guard_tripped:
        why.append("guard tripped")
    if not t.must_fail <= drained:
        why.append(f"missed {sorted(t.must_fail - drained)}")
    if not t.must_nic <= named:
        why.append(f"NIC not named {sorted(t.must_nic - named)}")
    if any(verdict.get(x) == "pass" for x in t.never_pass):
        why.append(f"passed {sorted(x for x in t.never_pass if verdict.get(x) == 'pass')}")
    if not t.must_switch <= switches:
        why.append(f"switch not named {sorted(t.must_switch - switches)}")
    if switches - t.switches:
        why.append(f"healthy switch named {sorted(switches - t.switches)}")
    if not t.must_link <= links:
        why.append(f"link not named {[(sorted(p), nic) for p, nic in t.must_link - links]}")
    if retests > t.budget:
        why.append(f"{retests} retests > budget {t.budget}")
    return {"right": not why, "why": why, "false": len(false), "nic_truth": len(t.must_nic),
            "nic_found": len(t.must_nic & named), "sw_truth": len(t.must_switch),
            "sw_found": len(t.must_switch & switches), "link_truth": len(t.must_link),
            "link_found": len(t.must_link & links), "noise_links": len(links - t.links),
            "retests": retests / t.budget, "extra": extra}


def timing(sizes: list[int]) -> bool:
    """analyze() of N nodes x 8 rails with a topology, from JSON dicts (what burnin analyze reads)."""
    ok = True
    for n in sizes:
        nodes = names(n)
        leaf, topo = layout(nodes, "rail")
        rng = random.Random(n)
        f = RailFabric(RAILS, leaf, noise=0.02, switches={"su3-r2": 0.8},
                       nic={(x, rng.choice(RAILS)): 0.5 for x in rng.sample(nodes, n // 100)})
        raw = [m.to_dict() for m in run_rails(plan_of(nodes, topo), f, seed=1)]
        wall = cpu = math.inf
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            a = analyze([Measurement.from_dict(d) for d in raw], nodes, topology=topo)
            wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        met = cpu < 5 if n >= 16384 else True
        ok &= met
        print(f"analysis of {n:,} nodes x 8 rails with a topology ({len(raw):,} measurements, from JSON dicts): "
              f"{cpu:.2f} s CPU, {wall:.2f} s wall{' (target < 5 s: ' + ('MET' if met else 'MISSED') + ')' if n >= 16384 else ''}; "
              f"{len(a.drain)} drained, switches {a.suspect_switches}")
    return ok


def _sized(i: int) -> tuple[int, int]:
    """Fleet size and rails for the i-th scenario of a family: 64-1,024 nodes, 4-8 rails."""
    return (64, 256, 1024, 128, 512)[i % 5], (8, 4)[i % 2]


def _rail_leaf(rng, i):
    n, rails = _sized(i)
    f = runsim.healthy_fleet(rng, n, rails)
    f.switch[rng.choice(sorted(set(f.leaf.values())))] = rng.uniform(0.7, 0.85)
    return f, True, None


def _half_su(rng, i):
    n, rails = _sized(i)
    f = runsim.healthy_fleet(rng, n, rails)
    su = rng.choice(sorted(set(f.su.values())))
    for r in rng.sample(f.rails, len(f.rails) // 2):
        f.switch[f.leaf[(next(x for x in f.nodes if f.su[x] == su), r)]] = rng.uniform(0.7, 0.85)
    return f, True, None


def _leaf_combo(rng, i):
    f, _rails, _setup = (_half_su if i % 2 else _rail_leaf)(rng, i)
    n = len(f.nodes)
    slow = runsim.slow_nodes(f, rng, max(1, round(rng.uniform(0.01, 0.02) * n)), (0.5, 0.85))
    runsim.bad_nics(f, rng, max(1, round(0.01 * n)), (0.5, 0.8), avoid=set(slow))
    return f, True, None


def _nic(rng, i):
    n, rails = _sized(i)
    f = runsim.healthy_fleet(rng, n, rails)
    runsim.bad_nics(f, rng, max(1, round(rng.uniform(0.01, 0.02) * n)), (0.8, 0.8))
    return f, True, None


def _links(noise):
    def build(rng, i):
        n, rails = _sized(i)
        return runsim.healthy_fleet(rng, n, rails, noise=noise), True, \
            runsim.slow_routes(rng.randint(1, 3), (0.5, 0.7))
    return build


def _whole_run(rng, i):
    """Every test kind a real run combines (whole-node nccl-tests pairs and
    intra-node runs, per-rail ib_write_bw, gpu_burn and nvbandwidth on 8
    GPUs per node) on a rail-optimised fleet with its fabric map, and every
    fault kind in one fleet: a slow rail leaf, NICs at 0.8, GPUs 15% slow,
    GPU-side slow nodes (0.5-0.85: nccl-tests and the host links), 1-2 slow
    links, stragglers, transients, failed tests, a dead task; pair noise
    2-5% (the fleet's shape), GPU run-to-run noise 2%, 3% or 5%."""
    n, rails = _sized(i)
    f = runsim.healthy_fleet(rng, n, rails, noise=rng.uniform(0.02, 0.05))
    f.gpus, f.gpu_noise = 8, rng.choice((0.02, 0.03, 0.05))
    f.transient, f.failed, f.dead_tasks = max(f.transient, 0.01), 0.005, 1
    f.switch[rng.choice(sorted(set(f.leaf.values())))] = rng.uniform(0.7, 0.85)
    k = max(1, round(0.01 * n))
    gpu_side = rng.sample(f.nodes, k)
    for x in gpu_side:
        f.gpu[x] = rng.uniform(0.5, 0.85)
    nics = runsim.bad_nics(f, rng, k, (0.8, 0.8), avoid=set(gpu_side))
    for x in rng.sample([x for x in f.nodes if x not in set(gpu_side) | set(nics)], k):
        f.gpu_slow[(x, rng.randrange(f.gpus))] = 0.85
    f.flaky = {x: 0.2 for x in rng.sample([x for x in f.nodes if f.healthy(x)], max(1, round(0.015 * n)))}
    return f, True, runsim.slow_routes(rng.randint(1, 2), (0.5, 0.7))


FAMILIES = [
    runsim.Family("slow rail leaf", _rail_leaf),
    runsim.Family("half an SU's leaves slow", _half_su),
    runsim.Family("leaf + slow nodes + NICs", _leaf_combo),
    runsim.Family("NIC at 0.8", _nic),
    runsim.Family("links, 5% noise", _links(0.05), links_target=True),
    runsim.Family("links, 8% noise", _links(0.08)),
    runsim.Family("whole run, every fault", _whole_run),
]


# -- held-out variants: what the families above fix and a field does not --------

KINDS = [(tests, topo) for topo in ("map", "conf", "none") for tests in ("both", "whole", "rails")]
WITH_TOPOLOGY = KINDS[:6]
NO_TOPOLOGY = KINDS[6:]


def _held_sized(i: int) -> tuple[int, int]:
    """Fleet sizes outside the families' cycle (32, 96, 2,048, 48, 160 nodes), 4 or 8 rails."""
    return (32, 96, 2048, 48, 160)[i % 5], (4, 8)[i % 2]


def _held_fleet(rng, i, noise: float = 0.02, kinds=KINDS):
    """A fleet of a held-out size, the i-th of `kinds`' (tests, topology)
    pairs: whole-node + per-rail, whole-node only or per-rail only; a
    fabric map, Slurm's topology.conf (one switch per scalable unit) or
    no topology. Without `kinds`: both tests and the map."""
    n, rails = _held_sized(i)
    f = runsim.healthy_fleet(rng, n, rails, noise=noise)
    tests, topo = kinds[i % len(kinds)] if kinds else ("both", "map")
    f.topo_kind, f.whole_node = topo, tests != "rails"
    return f, tests != "whole"


def _h_clean(rng, i):
    f, rails = _held_fleet(rng, i)
    return f, rails, None


def _h_leaf(kinds):
    def build(rng, i):
        f, rails = _held_fleet(rng, i, kinds=kinds)
        f.switch[rng.choice(sorted(set(f.leaf.values())))] = rng.uniform(0.7, 0.85)
        return f, rails, None
    return build


def _h_spine(rng, i):
    f, rails = _held_fleet(rng, i, kinds=WITH_TOPOLOGY)
    f.spine[rng.choice(f.rails)] = rng.uniform(0.7, 0.85)
    return f, rails, None


def _h_two_leaves(rng, i):
    f, rails = _held_fleet(rng, i, kinds=None)
    r1, r2 = rng.sample(f.rails, 2)
    sus = sorted(set(f.su.values()))
    for r in (r1, r2):
        su = rng.choice(sus)
        f.switch[f.leaf[(next(x for x in f.nodes if f.su[x] == su), r)]] = rng.uniform(0.7, 0.85)
    return f, rails, None


def _h_leaf_nic(rng, i):
    """A slow leaf and, behind it, a NIC on that leaf's rail well below it
    and one at 0.8 on another rail of a node behind it."""
    f, rails = _held_fleet(rng, i, kinds=None)
    leaf = rng.choice(sorted(set(f.leaf.values())))
    f.switch[leaf] = rng.uniform(0.75, 0.85)
    behind = [(x, r) for (x, r), sw in f.leaf.items() if sw == leaf]
    (x1, r1), (x2, _r) = rng.sample(behind, 2)
    f.nic[(x1, r1)] = rng.uniform(0.4, 0.6)
    f.nic[(x2, rng.choice([r for r in f.rails if r != r1]))] = 0.8
    return f, rails, None


def _h_failed(rng, i):
    f, rails = _held_fleet(rng, i, kinds=None)
    f.failed, f.dead_tasks = 0.02, 2 + i % 3
    n = len(f.nodes)
    slow = runsim.slow_nodes(f, rng, max(1, round(0.01 * n)), (0.5, 0.85))
    runsim.bad_nics(f, rng, max(1, round(0.01 * n)), (0.5, 0.8), avoid=set(slow))
    return f, rails, None


def _h_heavy(rng, i):
    f, rails = _held_fleet(rng, i, noise=0.05, kinds=None)
    f.shape, f.transient = "student-t", 0.02
    f.switch[rng.choice(sorted(set(f.leaf.values())))] = rng.uniform(0.7, 0.8)
    n = len(f.nodes)
    slow = runsim.slow_nodes(f, rng, max(1, round(0.01 * n)), (0.5, 0.75))
    runsim.bad_nics(f, rng, max(1, round(0.01 * n)), (0.5, 0.7), avoid=set(slow))
    return f, rails, None


def _h_many_slow(rng, i):
    f, rails = _held_fleet(rng, i, kinds=None)
    runsim.slow_nodes(f, rng, round(0.2 * len(f.nodes)), (0.5, 0.85))
    return f, rails, None


def _h_kinds(rng, i):
    f, rails = _held_fleet(rng, i)
    n = len(f.nodes)
    slow = runsim.slow_nodes(f, rng, max(1, round(0.01 * n)), (0.5, 0.85))
    runsim.bad_nics(f, rng, max(1, round(0.015 * n)), (0.8, 0.8), avoid=set(slow))
    return f, rails, None


# -- held-out variants, session 5 (GEN2): what a field combines and the ones above do not --

def _slow_leaf(f, rng, level, su=None, rail=None) -> str:
    """One rail leaf slow (of scalable unit `su` / rail `rail` when given); its name."""
    su = rng.choice(sorted(set(f.su.values()))) if su is None else su
    rail = rng.choice(f.rails) if rail is None else rail
    leaf = f.leaf[(next(x for x in f.nodes if f.su[x] == su), rail)]
    f.switch[leaf] = rng.uniform(*level)
    return leaf


def _h_leaf_level(level):
    """A rail leaf very slow (0.5) or barely slow (0.88): its nodes behind it
    read that on every test that crosses it, and none is drained for it."""
    def build(rng, i):
        f, rails = _held_fleet(rng, i, kinds=WITH_TOPOLOGY)
        _slow_leaf(f, rng, level)
        return f, rails, None
    return build


def _fat_tree(rng, i, kinds=WITH_TOPOLOGY):
    """Not rail-optimised: every NIC of a node on the node's one leaf (8 or
    16 nodes a leaf), the map (per NIC, all on that leaf) or topology.conf
    (a switch per leaf) given; one leaf slow on every rail."""
    f, rails = _held_fleet(rng, i, kinds=kinds)
    per = 8 if len(f.nodes) <= 48 else 16
    f.su = {x: k // per for k, x in enumerate(f.nodes)}
    f.leaf = {(x, r): f"su{f.su[x]}" for x in f.nodes for r in f.rails}
    f.switch[f"su{rng.choice(sorted(set(f.su.values())))}"] = rng.uniform(0.7, 0.85)
    return f, rails, None


def _h_same_rail(rng, i):
    """Two leaves slow on the same rail, in two scalable units of four or
    more (96, 160, 2,048, 128, 256 nodes: 5-64 units; where two units are
    the whole rail, the rail is the fleet's level and nothing in the run
    can tell it slow)."""
    n, rails = (96, 160, 2048, 128, 256)[i % 5], (4, 8)[i % 2]
    f = runsim.healthy_fleet(rng, n, rails)
    tests, topo = WITH_TOPOLOGY[i % len(WITH_TOPOLOGY)]
    f.topo_kind, f.whole_node, rails = topo, tests != "rails", tests != "whole"
    rail = rng.choice(f.rails)
    for su in rng.sample(sorted(set(f.su.values())), 2):
        _slow_leaf(f, rng, (0.7, 0.85), su=su, rail=rail)
    return f, rails, None


def _gpu_sized(i: int) -> tuple[int, int]:
    """GPU tools run on every node (their outputs written and parsed): the
    held-out sizes without the 2,048-node one."""
    return (32, 96, 256, 48, 160)[i % 5], (4, 8)[i % 2]


def _h_every_test(gpus: int | None):
    """Whole-node + per-rail + GPU tools (gpu_burn, nvbandwidth) with the
    map; a rail leaf slow, a GPU at 0.85 on 1-2% of nodes and a NIC at 0.8
    on 1-2%, some of them behind the leaf. `gpus` None: 8 GPUs, the
    held-out rails; else `gpus` GPUs and 4 rails."""
    def build(rng, i):
        n, rails = _gpu_sized(i)
        f = runsim.healthy_fleet(rng, n, 4 if gpus else rails)
        f.gpus, f.gpu_noise = gpus or 8, rng.choice((0.02, 0.03))
        leaf = _slow_leaf(f, rng, (0.7, 0.85))
        behind = sorted({x for (x, _r), sw in f.leaf.items() if sw == leaf})
        k = max(1, round(0.015 * n))
        slow_gpu = rng.sample(behind, 1) + rng.sample([x for x in f.nodes if x not in behind], k - 1)
        for x in slow_gpu:
            f.gpu_slow[(x, rng.randrange(f.gpus))] = 0.85
        rest = [x for x in f.nodes if x not in slow_gpu]
        nics = rng.sample([x for x in rest if x in behind], 1) + \
            rng.sample([x for x in rest if x not in behind], k - 1)
        for x in nics:
            f.nic[(x, rng.choice(f.rails))] = 0.8
        return f, True, None
    return build


def _h_stale_map(rng, i):
    """A stale fabric map: one node of a scalable unit recabled into
    another unit (every NIC now on that unit's leaves), the map still
    naming its old leaves; a rail leaf slow in a third unit, or in the
    node's old unit. The node is healthy (a drain is a healthy drain)."""
    f, rails = _held_fleet(rng, i, kinds=[("both", "map"), ("whole", "map")])
    sus = sorted(set(f.su.values()))
    old, new = rng.sample(sus, 2)
    x = rng.choice([y for y in f.nodes if f.su[y] == old])
    anchor = next(y for y in f.nodes if f.su[y] == new)
    for r in f.rails:
        f.stale[(x, r)] = f.leaf[(x, r)]
        f.leaf[(x, r)] = f.leaf[(anchor, r)]
    f.su[x] = new
    others = [s for s in sus if s != new]
    _slow_leaf(f, rng, (0.7, 0.85), su=old if i % 3 == 0 or len(others) == 1 else
               rng.choice([s for s in others if s != old] or others))
    return f, rails, None


def _h_partial_map(rng, i):
    """A map missing 5% of the nodes (at least one behind the slow leaf):
    those nodes have no leaf in the run's topology."""
    f, rails = _held_fleet(rng, i, kinds=[("both", "map"), ("whole", "map"), ("rails", "map")])
    leaf = _slow_leaf(f, rng, (0.7, 0.85))
    behind = sorted({x for (x, _r), sw in f.leaf.items() if sw == leaf})
    n = len(f.nodes)
    f.unmapped = set(rng.sample(behind, 1)) | set(rng.sample(f.nodes, max(1, round(0.05 * n)) - 1))
    return f, rails, None


def _h_big_whole(rng, i):
    """2,048 nodes x 8 rails, whole-node tests only (burnin.rails left at its
    default), the map or topology.conf; one rail leaf slow."""
    f = runsim.healthy_fleet(rng, 2048, 8)
    f.topo_kind, f.whole_node = ("map", "conf")[i % 2], True
    _slow_leaf(f, rng, (0.7, 0.85))
    return f, False, None


def _h_leaf_failed(rng, i):
    """A slow rail leaf with failed tests (2%) and 2-4 dead array tasks."""
    f, rails = _held_fleet(rng, i, kinds=WITH_TOPOLOGY)
    f.failed, f.dead_tasks = 0.02, 2 + i % 3
    _slow_leaf(f, rng, (0.7, 0.85))
    return f, rails, None


def _h_uplinks(rng, i):
    """One rail leaf's uplinks slow (0.6-0.8: only the paths leaving its
    scalable unit), the held-out test kinds and topologies."""
    n, rails = (96, 160, 2048, 128, 256)[i % 5], (4, 8)[i % 2]
    f = runsim.healthy_fleet(rng, n, rails)
    tests, topo = WITH_TOPOLOGY[i % len(WITH_TOPOLOGY)]
    f.topo_kind, f.whole_node = topo, tests != "rails"
    su = rng.choice(sorted(set(f.su.values())))
    f.uplinks[f.leaf[(next(x for x in f.nodes if f.su[x] == su), rng.choice(f.rails))]] = rng.uniform(0.6, 0.8)
    return f, tests != "whole", None


HELDOUT_GEN2 = [
    runsim.Family("H leaf at 0.5", _h_leaf_level((0.45, 0.55))),
    runsim.Family("H leaf at 0.88", _h_leaf_level((0.86, 0.89))),
    runsim.Family("H fat-tree leaf", _fat_tree),
    runsim.Family("H two leaves, same rail", _h_same_rail),
    runsim.Family("H leaf+GPU+NIC, all tests", _h_every_test(None)),
    runsim.Family("H 2 GPUs, 4 rails", _h_every_test(2)),
    runsim.Family("H stale map", _h_stale_map),
    runsim.Family("H map missing nodes", _h_partial_map),
    runsim.Family("H 2,048 whole-node only", _h_big_whole),
    runsim.Family("H leaf + failed tasks", _h_leaf_failed),
    runsim.Family("H leaf uplinks slow", _h_uplinks),
]

# -- held-out variants, session 6 (GEN3): what a field shows at the sizes --------
# 64-1,024 nodes, 4-8 rails (2 where named), the fabric map, whole-node and
# per-rail tests combined as burnin.rails runs them, unless a family says.

def _g3_fleet(rng, i, noise: float = 0.02, sizes=(64, 256, 1024, 128, 512), rails=(8, 4)):
    n, r = sizes[i % len(sizes)], rails[i % len(rails)]
    return runsim.healthy_fleet(rng, n, r, noise=noise)


def _g3_few_rails(rng, i):
    """2 or 4 rails (a 2-NIC storage-style node, a 4-rail H100 SKU), a rail
    leaf slow (0.7-0.85); whole-node + per-rail tests, or whole-node only
    (burnin.rails left empty), with the map."""
    f = _g3_fleet(rng, i, rails=(2, 4, 4, 2))
    _slow_leaf(f, rng, (0.7, 0.85))
    return f, i % 3 != 2, None


def _g3_big_mixed(rng, i):
    """1,024 nodes: two rail leaves slow on two rails (two units), 1% NICs at
    0.5-0.8 (none behind those leaves), 1-3 slow links, at 8% pair noise."""
    f = runsim.healthy_fleet(rng, 1024, (8, 4)[i % 2], noise=0.08)
    r1, r2 = rng.sample(f.rails, 2)
    su1, su2 = rng.sample(sorted(set(f.su.values())), 2)
    _slow_leaf(f, rng, (0.7, 0.85), su=su1, rail=r1)
    _slow_leaf(f, rng, (0.7, 0.85), su=su2, rail=r2)
    runsim.bad_nics(f, rng, round(0.01 * len(f.nodes)), (0.5, 0.8),
                    avoid={x for x in f.nodes if f.su[x] in (su1, su2)})
    return f, True, runsim.slow_routes(rng.randint(1, 3), (0.5, 0.7))


def _g3_gpu_noise(rng, i):
    """GPU run-to-run noise 5% with a slow rail leaf, 8 GPUs a node
    (gpu_burn, nvbandwidth), a GPU at 0.85 on 1% of nodes (one of them
    behind the leaf)."""
    f = _g3_fleet(rng, i, sizes=(64, 128, 256, 96, 192))
    f.gpus, f.gpu_noise = 8, 0.05
    leaf = _slow_leaf(f, rng, (0.7, 0.85))
    behind = sorted({x for (x, _r), sw in f.leaf.items() if sw == leaf})
    k = max(1, round(0.01 * len(f.nodes)))
    for x in rng.sample(behind, 1) + rng.sample([x for x in f.nodes if x not in behind], k - 1):
        f.gpu_slow[(x, rng.randrange(f.gpus))] = 0.85
    return f, True, None


def _g3_leaf_noisy(rng, i):
    """A rail leaf barely slow (0.83-0.87) under 5% pair noise."""
    f = _g3_fleet(rng, i, noise=0.05)
    _slow_leaf(f, rng, (0.83, 0.87))
    return f, True, None


def _renamed(f, rng, i):
    """The fleet under host names that do not follow its racks: random
    names (n-3fa9c1, ...) or rack-style names (a-01, ...) dealt out of
    order, so name order says nothing of the scalable units; the map says."""
    if i % 2:
        names = set()
        while len(names) < len(f.nodes):
            names.add(f"{rng.choice(('n', 'cn', 'gpu-h'))}-{rng.getrandbits(24):06x}")
        names = sorted(names)
    else:
        names = [f"{chr(97 + k // 832)}{chr(97 + k // 32 % 26)}-{k % 32 + 1:02d}" for k in range(len(f.nodes))]
    rng.shuffle(names)
    new = dict(zip(f.nodes, names))
    f.nodes = sorted(names)
    f.leaf = {(new[x], r): sw for (x, r), sw in f.leaf.items()}
    f.su = {new[x]: k for x, k in f.su.items()}
    f.spread = {new[x]: v for x, v in f.spread.items()}
    return f


def _g3_hostnames(rng, i):
    """Host names that do not follow the racks, with the map: a rail leaf
    slow, 1% nodes slow (0.5-0.85), 1% NICs at 0.8."""
    f = _renamed(_g3_fleet(rng, i), rng, i)
    _slow_leaf(f, rng, (0.7, 0.85))
    k = max(1, round(0.01 * len(f.nodes)))
    slow = runsim.slow_nodes(f, rng, k, (0.5, 0.85))
    runsim.bad_nics(f, rng, k, (0.8, 0.8), avoid=set(slow))
    return f, True, None


def _g3_dead(rng, i):
    """A slow rail leaf while 20% of the array's tasks die before writing a
    result (a bad prolog on a share of the nodes) and 2% of tests fail."""
    f = _g3_fleet(rng, i)
    f.dead_share, f.failed = 0.2, 0.02
    _slow_leaf(f, rng, (0.7, 0.85))
    return f, True, None


def _g3_leaf_of_nic(rng, i):
    """A slow rail leaf (0.7-0.85) that is also the leaf of bad NICs: one
    node behind it with a NIC on that rail well below it (0.45-0.6), one
    with a NIC at 0.8 on another rail."""
    f = _g3_fleet(rng, i)
    leaf = _slow_leaf(f, rng, (0.7, 0.85))
    rail = next(r for (_x, r), sw in f.leaf.items() if sw == leaf)
    behind = sorted({x for (x, _r), sw in f.leaf.items() if sw == leaf})
    x1, x2 = rng.sample(behind, 2)
    f.nic[(x1, rail)] = rng.uniform(0.45, 0.6)
    f.nic[(x2, rng.choice([r for r in f.rails if r != rail]))] = 0.8
    return f, True, None


def _g3_untested_rail(rng, i):
    """burnin.rails lists half the rails (the others carry storage or were
    left out): a rail leaf slow on a rail the per-rail tests never cross,
    seen on the whole-node pairs only; 1% NICs at 0.8 on the listed rails."""
    f = _g3_fleet(rng, i)
    listed = sorted(rng.sample(f.rails, len(f.rails) // 2), key=f.rails.index)
    f.rail_subset = listed
    _slow_leaf(f, rng, (0.7, 0.85), rail=rng.choice([r for r in f.rails if r not in listed]))
    for x in rng.sample(f.nodes, max(1, round(0.01 * len(f.nodes)))):
        f.nic[(x, rng.choice(listed))] = 0.8
    return f, True, None


HELDOUT_GEN3 = [
    runsim.Family("H3 2-4 rails, leaf", _g3_few_rails),
    runsim.Family("H3 1,024: 2 leaves+NICs+links 8%", _g3_big_mixed),
    runsim.Family("H3 GPU noise 5% + leaf", _g3_gpu_noise),
    runsim.Family("H3 leaf 0.85, 5% noise", _g3_leaf_noisy),
    runsim.Family("H3 host names not racks", _g3_hostnames),
    runsim.Family("H3 leaf + 20% dead tasks", _g3_dead),
    runsim.Family("H3 leaf of bad NICs' nodes", _g3_leaf_of_nic),
    runsim.Family("H3 leaf on an untested rail", _g3_untested_rail),
]

# -- held-out variants, session 7 (GEN4): fabrics no family models ----------------------
# The sizes (64-1,024 nodes) unless a family says; every round played
# from the plan the run submits, the final state judged.

def _g4_spine_every_rail(rng, i):
    """A slow spine layer: every rail's spine plane at 0.7-0.85 (one factor),
    so every path between scalable units is slow on every rail and on the
    whole-node pairs, every path inside a unit fine; the test kinds x map or
    topology.conf. No node is at fault."""
    f = _g3_fleet(rng, i)
    tests, topo = WITH_TOPOLOGY[i % len(WITH_TOPOLOGY)]
    f.topo_kind, f.whole_node = topo, tests != "rails"
    level = rng.uniform(0.7, 0.85)
    f.spine = {r: level for r in f.rails}
    return f, tests != "whole", None


def _g4_unit_uplinks(rng, i):
    """A set of spine-to-leaf uplinks slow: every rail leaf of one scalable
    unit at 0.6-0.8 on its paths leaving the unit (a unit's uplink bundle
    mis-cabled or its optics degraded), inside the unit fine; the map,
    whole-node + per-rail or whole-node only."""
    f = _g3_fleet(rng, i)
    su = rng.choice(sorted(set(f.su.values())))
    level = rng.uniform(0.6, 0.8)
    for (x, _r), sw in f.leaf.items():
        if f.su[x] == su:
            f.uplinks[sw] = level
    return f, i % 3 != 2, None


def _g4_fat_tree_conf(rng, i):
    """Not rail-optimised: every NIC of a node on its one leaf of 16 nodes,
    topology.conf as a three-level tree (leaves under pod switches of four
    leaves under a spine), whole-node tests only; a leaf slow (0.7-0.85),
    1% of the nodes slow (0.5-0.85) and 1% with a NIC at 0.5-0.7."""
    n = (64, 256, 1024, 128, 512)[i % 5]
    f = runsim.healthy_fleet(rng, n, (8, 4)[i % 2])
    f.su = {x: k // 16 for k, x in enumerate(f.nodes)}
    f.leaf = {(x, r): f"su{f.su[x]}" for x in f.nodes for r in f.rails}
    f.topo_kind, f.conf_pods = "conf", 4
    leaf = f"su{rng.choice(sorted(set(f.su.values())))}"
    f.switch[leaf] = rng.uniform(0.7, 0.85)
    behind = {x for x in f.nodes if f"su{f.su[x]}" == leaf}
    k = max(1, round(0.01 * n))
    slow = runsim.slow_nodes(f, rng, k, (0.5, 0.85), avoid=behind)
    runsim.bad_nics(f, rng, k, (0.5, 0.7), avoid=behind | set(slow))
    return f, False, None


def _g4_map_omits_unit(rng, i):
    """The map omits a whole scalable unit (added after it was written); a
    rail leaf slow in that unit (even scenarios) or in a mapped one (odd);
    1% NICs at 0.8 anywhere but behind the leaf."""
    f = _g3_fleet(rng, i)
    sus = sorted(set(f.su.values()))
    gone = rng.choice(sus)
    f.unmapped = {x for x in f.nodes if f.su[x] == gone}
    leaf = _slow_leaf(f, rng, (0.7, 0.85), su=gone if i % 2 == 0 else rng.choice([s for s in sus if s != gone]))
    behind = {x for (x, _r), sw in f.leaf.items() if sw == leaf}
    runsim.bad_nics(f, rng, max(1, round(0.01 * len(f.nodes))), (0.8, 0.8), avoid=behind)
    return f, True, None


def _g4_every_key(rng, i):
    """One run with every key a real run can combine: alltoall_perf and
    all_reduce_perf (burnin.tests), per-rail ib_write_bw, gpu_burn and
    nvbandwidth on 8 GPUs; a slow rail leaf, 1% GPU-side slow nodes
    (0.5-0.85), 1% NICs at 0.8, 1% GPUs at 0.85, one slow link, stragglers
    (64-256 nodes: every GPU tool's output written and parsed)."""
    n = (64, 128, 256, 96, 192)[i % 5]
    f = runsim.healthy_fleet(rng, n, (8, 4)[i % 2], noise=rng.uniform(0.02, 0.04))
    f.nccl_tests = ("all_reduce_perf", "alltoall_perf")
    f.gpus, f.gpu_noise = 8, rng.choice((0.02, 0.03))
    leaf = _slow_leaf(f, rng, (0.7, 0.85))
    k = max(1, round(0.01 * n))
    side = runsim.slow_nodes(f, rng, k, (0.5, 0.85))
    nics = runsim.bad_nics(f, rng, k, (0.8, 0.8), avoid=set(side))
    for x in rng.sample([x for x in f.nodes if x not in set(side) | set(nics)], k):
        f.gpu_slow[(x, rng.randrange(f.gpus))] = 0.85
    behind = {x for (x, _r), sw in f.leaf.items() if sw == leaf}
    f.flaky = {x: 0.2 for x in rng.sample([x for x in f.nodes if f.healthy(x) and x not in behind], k)}
    return f, True, runsim.slow_routes(1, (0.5, 0.7))


def _g4_leaf_at(level):
    """A rail leaf at exactly `level` (no node at fault); whole-node +
    per-rail or whole-node only, the map."""
    def build(rng, i):
        f = _g3_fleet(rng, i)
        _slow_leaf(f, rng, (level, level))
        return f, i % 3 != 2, None
    return build


def _g4_tiny_two_rails(rng, i):
    """16 nodes x 2 rails (two units of 8: four rail leaves), one leaf slow
    (0.7-0.85); whole-node + per-rail or whole-node only, the map or
    topology.conf; every third fleet also a NIC at 0.6 outside that unit."""
    f = runsim.healthy_fleet(rng, 16, 2)
    f.topo_kind = ("map", "conf")[i % 2]
    leaf = _slow_leaf(f, rng, (0.7, 0.85))
    if i % 3 == 0:
        su = next(f.su[x] for (x, _r), sw in f.leaf.items() if sw == leaf)
        f.nic[(rng.choice([x for x in f.nodes if f.su[x] != su]), rng.choice(f.rails))] = 0.6
    return f, i % 4 != 3, None


def _g4_whole_unit(rng, i):
    """A whole scalable unit slow: every rail leaf of one unit at one level
    (0.7-0.85: the unit's power or cooling throttles its switches); the map,
    whole-node + per-rail or whole-node only, or topology.conf."""
    f = _g3_fleet(rng, i)
    f.topo_kind = ("map", "map", "conf")[i % 3]
    su = rng.choice(sorted(set(f.su.values())))
    level = rng.uniform(0.7, 0.85)
    for (x, _r), sw in f.leaf.items():
        if f.su[x] == su:
            f.switch[sw] = level
    return f, i % 2 == 0 or f.topo_kind == "conf", None


HELDOUT_GEN4 = [
    runsim.Family("H4 spine slow, every rail", _g4_spine_every_rail),
    runsim.Family("H4 a unit's uplinks slow", _g4_unit_uplinks),
    runsim.Family("H4 fat-tree conf, whole-node", _g4_fat_tree_conf),
    runsim.Family("H4 map omits a unit", _g4_map_omits_unit),
    runsim.Family("H4 alltoall+all_reduce+rails+GPU", _g4_every_key),
    runsim.Family("H4 leaf at 0.90", _g4_leaf_at(0.90)),
    runsim.Family("H4 leaf at 0.93", _g4_leaf_at(0.93)),
    runsim.Family("H4 16 nodes x 2 rails, leaf", _g4_tiny_two_rails),
    runsim.Family("H4 whole unit slow", _g4_whole_unit),
]

HELDOUT = [
    runsim.Family("H clean fleet", _h_clean),
    runsim.Family("H leaf, tests x topology", _h_leaf(WITH_TOPOLOGY)),
    runsim.Family("H leaf, no topology", _h_leaf(NO_TOPOLOGY)),
    runsim.Family("H slow spine plane", _h_spine),
    runsim.Family("H two leaves, two rails", _h_two_leaves),
    runsim.Family("H leaf + NICs behind it", _h_leaf_nic),
    runsim.Family("H failed tests, dead tasks", _h_failed),
    runsim.Family("H heavy tail 5%", _h_heavy),
    runsim.Family("H 20% of nodes slow", _h_many_slow),
    runsim.Family("H NIC+node, tests x topology", _h_kinds),
] + HELDOUT_GEN2 + HELDOUT_GEN3 + HELDOUT_GEN4


def new_families(seeds: int, seed_base: int, only: str | None, verbose: bool, pick: set[int] | None = None,
                 with_timing: bool = True) -> bool:
    ok = runsim.run_families(FAMILIES, seeds, seed_base, "issue 22 families: whole-node + per-rail tests, a fabric "
                             f"map, up to {runsim.MAX_RETEST_ROUNDS} retest rounds from the run's own plan "
                             "(final state judged)", only, verbose, pick)
    if not with_timing:
        return ok
    cpu, wall, count = runsim.timing(16384, 8)
    met = cpu < 5
    print(f"timing: 16,384 nodes x 8 rails, whole-node + per-rail lines ({count:,} measurements, from the "
          f"results' dicts) analysed with the fabric map: {cpu:.2f} s CPU, {wall:.2f} s wall "
          f"(target < 5 s: {'MET' if met else 'MISSED'})")
    return ok and met


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4, help="seeds per scenario at 512 nodes (1 per 8 at 4,096)")
    ap.add_argument("--seed-base", type=int, default=None, help="first seed (default: fresh, printed)")
    ap.add_argument("--sizes", default="512,4096")
    ap.add_argument("--family", default=None)
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--timing-only", action="store_true")
    ap.add_argument("--only", choices=["new", "old", "heldout"], default=None,
                    help="new: the issue 22 families only (runsim); old: the issue 16 sweep only; heldout: "
                         "the held-out variants (sizes, rails, test kinds, topologies and faults the families fix)")
    runsim.add_family_options(ap)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.timing_only:
        return 0 if timing([4096, 16384]) else 1
    seed_base = args.seed_base if args.seed_base is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"seed base {seed_base} (--seed-base {seed_base} repeats this run)")
    ok_new = True
    if args.only == "heldout":
        ok = runsim.run_families(HELDOUT, args.scenarios, seed_base, "held-out variants: fleet sizes, rails, test "
                                 "kinds and topologies outside the families' cycle (bench/runsim.py)", args.family,
                                 args.verbose, runsim.picked(args.pick))
        return 0 if ok else 1
    if args.only != "old":
        ok_new = new_families(args.scenarios, seed_base, args.family, args.verbose, runsim.picked(args.pick),
                              not args.no_timing)
        if args.only == "new":
            return 0 if ok_new else 1
    sizes = [int(x) for x in args.sizes.split(",")]
    fams: dict[str, dict] = {}
    wrong = []
    start = time.perf_counter()
    for n in sizes:
        seeds = max(1, args.seeds * 512 // n)
        for sc in (s for s in SCENARIOS if args.family in (None, s.family)):
            fam = fams.setdefault(sc.family, {"runs": 0, "right": 0, "false": 0, "nic_truth": 0, "nic_found": 0,
                                              "sw_truth": 0, "sw_found": 0, "link_truth": 0, "link_found": 0,
                                              "noise_links": 0, "retests": 0.0, "extra": 0})
            for i in range(seeds):
                seed = seed_base + i
                nodes, topo, plan, f = build(sc, n, seed)
                t = truth(nodes, plan, f, sc)  # decided before the analysis runs
                r = judge(t, *slurmqual(nodes, topo, plan, f, seed))
                fam["runs"] += 1
                for k in ("right", "false", "nic_truth", "nic_found", "sw_truth", "sw_found", "link_truth",
                          "link_found", "noise_links"):
                    fam[k] += r[k]
                fam["retests"] = max(fam["retests"], r["retests"])
                fam["extra"] = max(fam["extra"], r["extra"])
                if not r["right"]:
                    wrong.append(f"{n} nodes, {sc.name}, seed {seed}: {'; '.join(r['why'])}")
        print(f"  ... {n} nodes done ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"\nper family (sizes {args.sizes}; after at most {MAX_RETEST_ROUNDS} automatic retest rounds; targets: "
          ">= 99% right, 0 false drains, NIC named >= 95%, switch named >= 95%, retests <= budget, <= 2 follow-ups)")
    print(f"{'family':<12} {'runs':>5} {'right':>7} {'false drains':>13} {'NIC named':>10} {'switch named':>13} "
          f"{'link named':>11} {'noise links':>12} {'retests/budget':>15} {'follow-ups':>11}")
    ok = True
    for name, fam in fams.items():
        right = fam["right"] / fam["runs"]
        nic = fam["nic_found"] / fam["nic_truth"] if fam["nic_truth"] else None
        sw = fam["sw_found"] / fam["sw_truth"] if fam["sw_truth"] else None
        link = fam["link_found"] / fam["link_truth"] if fam["link_truth"] else None
        met = right >= 0.99 and fam["false"] == 0 and (nic is None or nic >= 0.95) and (sw is None or sw >= 0.95) \
            and fam["retests"] <= 1 and fam["extra"] <= MAX_RETEST_ROUNDS
        ok &= met
        pct = lambda x: "-" if x is None else f"{x:.1%}"  # noqa: E731
        print(f"{name:<12} {fam['runs']:>5} {right:>7.1%} {fam['false']:>13} {pct(nic):>10} {pct(sw):>13} "
              f"{pct(link):>11} {fam['noise_links']:>12} {fam['retests']:>15.2f} {fam['extra']:>11}  "
              f"{'MET' if met else 'MISSED'}")
    for line in wrong[:20]:
        print("  wrong:", line)
    if not args.no_timing:
        ok &= timing([4096, 16384])
    ok &= ok_new
    print("target (every family >= 99% right, 0 false drains, NIC/switch named >= 95%, retests within budget, "
          "<= 2 follow-ups; 16,384 x 8 rails < 5 s):", "MET" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
