"""Synthetic fleets for analysis tests and the benchmark: per-node and per-link
factors, multiplicative noise, measured over the same plan the job array runs."""

from __future__ import annotations

import random

from slurmqual.burnin.analyze import Measurement
from slurmqual.burnin.plan import groups, rounds

REF = 8589934592


def measure(nodes: list[str], node_factor: dict[str, float] | None = None, link_factor: dict | None = None,
            noise: float = 0.0, seed: int = 0, n_rounds: int = 3, group_size: int = 16, base: float = 380.0,
            intra: bool = True) -> list[Measurement]:
    rng = random.Random(seed)
    nf = node_factor or {}
    lf = {frozenset(k): v for k, v in (link_factor or {}).items()}
    out = []

    def noisy(x):
        return x * (1 + noise * rng.gauss(0, 1))

    for g in groups(nodes, group_size):
        if intra:
            out += [Measurement((n,), noisy(1.2 * base * nf.get(n, 1.0)), REF, "all_reduce") for n in g]
        for rnd in rounds(g, n_rounds):
            for a, b in rnd:
                f = min(nf.get(a, 1.0), nf.get(b, 1.0)) * lf.get(frozenset((a, b)), 1.0)
                out.append(Measurement((a, b), noisy(base * f), REF, "all_reduce"))
    return out


def names(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n + 1)]
