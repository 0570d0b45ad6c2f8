"""Synthetic fleets for analysis tests and the benchmark: a fabric model
(per-node, network-only, intra-only and per-link factors, GPU models,
multiplicative noise with optional heavy-tailed stragglers and transient
congestion on pair measurements, failed tests,
dead tasks) measured over the same plan the job array runs, producing the
measurements a task writes."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from slurmqual.burnin.records import Measurement
from slurmqual.burnin.judge.plan import groups, rounds

REF = 8589934592
H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
INTRA = {H100: 1.2, H200: 1.45}  # NVLink busbw relative to the network's, per GPU model


@dataclass
class Fabric:
    node: dict[str, float] = field(default_factory=dict)       # slow everywhere (intra and network)
    net: dict[str, float] = field(default_factory=dict)        # slow on the network side only
    intra_only: dict[str, float] = field(default_factory=dict)  # slow NVLink, network fine
    link: dict = field(default_factory=dict)                   # {(a, b): factor}
    noise: float = 0.0
    stragglers: float = 0.0          # chance that one measurement is a straggler (x U(0.8, 0.95))
    transient: float = 0.0           # chance that one pair measurement hits transient congestion (x U(0.45, 0.85))
    models: dict[str, str] = field(default_factory=dict)       # node -> GPU model (default H100)
    fail_pairs: set = field(default_factory=set)               # frozenset pairs whose test crashes
    pairless: set = field(default_factory=set)                 # nodes whose every pair test crashes
    dead_tasks: dict[int, str] = field(default_factory=dict)   # task index -> "start" | "after_intra"
    repeat: list = field(default_factory=list)                 # pairs measured once more (e.g. a retest round)
    base: float = 380.0

    def pair_factor(self, a: str, b: str) -> float:
        f = min(self.node.get(a, 1.0), self.node.get(b, 1.0), self.net.get(a, 1.0), self.net.get(b, 1.0))
        return f * self.link.get(frozenset((a, b)), 1.0)

    def intra_factor(self, n: str) -> float:
        return self.node.get(n, 1.0) * self.intra_only.get(n, 1.0) * INTRA[self.models.get(n, H100)]


def run(nodes: list[str], fabric: Fabric, seed: int = 0, n_rounds: int = 3, group_size: int = 16,
        tests: tuple[str, ...] = ("all_reduce",), intra: bool = True) -> list[Measurement]:
    """What the job array would measure on this fabric: per group (task) an intra
    test per node, then `n_rounds` round-robin pair rounds, for each test."""
    rng = random.Random(seed)
    lf = {frozenset(k): v for k, v in fabric.link.items()}
    fabric = Fabric(**{**fabric.__dict__, "link": lf})
    out: list[Measurement] = []

    def noisy(x: float) -> float:
        x *= 1 + fabric.noise * rng.gauss(0, 1)
        if fabric.stragglers and rng.random() < fabric.stragglers:
            x *= rng.uniform(0.8, 0.95)
        return max(x, 0.0)

    def pair(a: str, b: str, test: str, task: int, rnd: int) -> Measurement:
        if {a, b} & fabric.pairless or frozenset((a, b)) in fabric.fail_pairs:
            return Measurement((a, b), 0.0, REF, test, ok=False, task=task, round=rnd)
        v = noisy(fabric.base * fabric.pair_factor(a, b))
        if fabric.transient and rng.random() < fabric.transient:
            v *= rng.uniform(0.45, 0.85)  # congestion on the fabric, not either node
        return Measurement((a, b), v, REF, test,
                           gpu_model=fabric.models.get(a, H100), nccl_version="2.21.5", task=task, round=rnd)

    for task, g in enumerate(groups(nodes, group_size)):
        death = fabric.dead_tasks.get(task)
        if death == "start":
            continue
        for test in tests:
            if intra:
                out += [Measurement((n,), noisy(fabric.base * fabric.intra_factor(n)), REF, test,
                                    gpu_model=fabric.models.get(n, H100), nccl_version="2.21.5", task=task)
                        for n in g]
            if death == "after_intra":
                break
            for r, rnd in enumerate(rounds(g, n_rounds)):
                out += [pair(a, b, test, task, r + 1) for a, b in rnd]
        if death == "after_intra":
            continue
    for a, b in fabric.repeat:
        for test in tests:
            out.append(pair(a, b, test, -1, n_rounds + 1))
    return out


def follow_up(plan: list[list[list[str]]], fabric: Fabric, seed: int, first_round: int,
              tests: tuple[str, ...] = ("all_reduce",)) -> list[Measurement]:
    """What an automatic retest submission measures: the analysis' retest
    plan (rounds of [suspect, proven-good] pairs) on the same fabric, with
    the same noise, transients and failures as `run`, each node's intra
    test included."""
    pairs = [tuple(p) for rnd in plan for p in rnd]
    nodes = list(dict.fromkeys(n for p in pairs for n in p))
    # A retest task runs each node's intra-node test first, as every task does.
    intra = [m for m in run(nodes, Fabric(**{**fabric.__dict__, "dead_tasks": {}}), seed=seed + 1, n_rounds=0,
                            group_size=max(len(nodes), 1), tests=tests) if len(m.nodes) == 1]
    return intra + run([], Fabric(**{**fabric.__dict__, "repeat": pairs}), seed=seed, n_rounds=first_round - 1,
                       tests=tests, intra=False)


def run_pairs(rounds_: list[list[tuple[str, str]]], fabric: Fabric, seed: int = 0,
              tests: tuple[str, ...] = ("all_reduce",)) -> list[Measurement]:
    """Explicit rounds of pairs (a requalify's plan), with each node's intra test first."""
    rng = random.Random(seed)
    nodes = list(dict.fromkeys(n for rnd in rounds_ for p in rnd for n in p))
    out: list[Measurement] = []

    def noisy(x: float) -> float:
        return max(x * (1 + fabric.noise * rng.gauss(0, 1)), 0.0)

    for test in tests:
        out += [Measurement((n,), noisy(fabric.base * fabric.intra_factor(n)), REF, test,
                            gpu_model=fabric.models.get(n, H100), task=0) for n in nodes]
        for r, rnd in enumerate(rounds_):
            out += [Measurement((a, b), noisy(fabric.base * fabric.pair_factor(a, b)), REF, test,
                                gpu_model=fabric.models.get(a, H100), task=0, round=r + 1) for a, b in rnd]
    return out


def measure(nodes: list[str], node_factor: dict[str, float] | None = None, link_factor: dict | None = None,
            noise: float = 0.0, seed: int = 0, n_rounds: int = 3, group_size: int = 16, base: float = 380.0,
            intra: bool = True) -> list[Measurement]:
    """Short form: slow nodes (everywhere) and slow links."""
    return run(nodes, Fabric(node=dict(node_factor or {}), link=dict(link_factor or {}), noise=noise, base=base),
               seed=seed, n_rounds=n_rounds, group_size=group_size, intra=intra)


def names(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n + 1)]


# -- per-rail fabric (ib_write_bw on each NIC; the stand-in tests/fakebin/ib_write_bw's model) ------

RAIL_BASE = 392.0  # Gb/s of a healthy NDR rail
WHOLE_BASE = 380.0  # GB/s all_reduce busbw of a healthy pair of whole nodes
RAIL_SIZE = 1048576


@dataclass
class RailFabric:
    """Which switch each NIC hangs off and what is slow, with the semantics
    of the stand-in ib_write_bw's fabric model (rails, rail_nodes,
    rail_links, leaf, switches, uplinks): a pair's number on a rail is the
    product of both ends' NIC and node factors, the route's, and of each
    switch it goes through (its uplinks too when the ends hang off
    different leaves)."""
    rails: list[str]
    leaf: dict[tuple[str, str], str]                           # (node, nic) -> leaf switch
    nic: dict[tuple[str, str], float] = field(default_factory=dict)    # one NIC of a node
    node: dict[str, float] = field(default_factory=dict)       # every NIC of a node
    link: dict[tuple[frozenset, str], float] = field(default_factory=dict)  # one rail's route between two nodes
    switches: dict[str, float] = field(default_factory=dict)   # every path through this switch
    uplinks: dict[str, float] = field(default_factory=dict)    # paths leaving this switch only
    noise: float = 0.0
    transient: float = 0.0  # chance that one measurement hits transient congestion (x U(0.45, 0.85))
    base: float = RAIL_BASE

    def whole(self, a: str, b: str) -> float:
        """A whole-node pair (nccl-tests over every rail at once): as fast
        as its slowest rail path (a ring over the rails waits for the slowest)."""
        return min(self.factor(a, b, nic) for nic in self.rails)

    def factor(self, a: str, b: str, nic: str) -> float:
        f = self.nic.get((a, nic), 1.0) * self.nic.get((b, nic), 1.0) * self.node.get(a, 1.0) * self.node.get(b, 1.0)
        f *= self.link.get((frozenset((a, b)), nic), 1.0)
        la, lb = self.leaf.get((a, nic)), self.leaf.get((b, nic))
        for sw in {la, lb} - {None}:
            f *= self.switches.get(sw, 1.0) * (self.uplinks.get(sw, 1.0) if la != lb else 1.0)
        return f


def run_rails(rounds_: list[list[list[tuple[str, str]]]], fabric: RailFabric, seed: int = 0,
              whole_node: bool = False) -> list[Measurement]:
    """What the per-rail step measures: every rail of every pair of each
    task's rounds (`rounds_[task][round]`), with noise and transients.
    `whole_node`: each pair's nccl-tests ``all_reduce`` between the two
    whole nodes as well (what a run with `burnin.rails` measures besides the
    rails): its busbw is limited by the pair's slowest rail path
    (`RailFabric.whole`), with its own noise and transients."""
    rng = random.Random(seed)
    out: list[Measurement] = []
    for task, task_rounds in enumerate(rounds_):
        for r, rnd in enumerate(task_rounds):
            for a, b in rnd:
                if whole_node:
                    v = WHOLE_BASE * fabric.whole(a, b) * (1 + fabric.noise * rng.gauss(0, 1))
                    if fabric.transient and rng.random() < fabric.transient:
                        v *= rng.uniform(0.45, 0.85)
                    out.append(Measurement((a, b), max(v, 0.0), REF, "all_reduce", gpu_model=H100,
                                           nccl_version="2.21.5", task=task, round=r + 1))
                for nic in fabric.rails:
                    v = fabric.base * fabric.factor(a, b, nic) * (1 + fabric.noise * rng.gauss(0, 1))
                    if fabric.transient and rng.random() < fabric.transient:
                        v *= rng.uniform(0.45, 0.85)
                    out.append(Measurement((a, b), max(v, 0.0), RAIL_SIZE, "ib_write_bw", task=task, round=r + 1,
                                           rail=nic))
    return out


def rail_fleet(n: int, su: int = 32, whole_node: bool = False, **model):
    """n nodes in a rail-optimised fabric (each of 8 rails has its own leaf
    per `su` nodes: su<k>-r<rail>), measured per rail over the switch-aware
    plan the job array runs (`whole_node`: each pair's whole-node nccl-tests
    too); `model`: RailFabric's fields. Returns (nodes,
    topology, measurements, plan: per task its rounds)."""
    from slurmqual.burnin.judge.topology import Topology, switch_of

    rails = [f"mlx5_{i}" for i in range(8)]
    nodes = names(n)
    leaf = {(x, r): f"su{i // su}-r{j}" for i, x in enumerate(nodes) for j, r in enumerate(rails)}
    topo = Topology("sim", rail_switch=dict(leaf))
    sw = switch_of(topo)
    plan = [rounds(g, 3, sw) for g in groups(nodes, 16, sw)]
    return nodes, topo, run_rails(plan, RailFabric(rails, leaf, **model), seed=3, whole_node=whole_node), plan
