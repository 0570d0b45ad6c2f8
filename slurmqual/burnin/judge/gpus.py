"""Per-GPU verdicts: each GPU against the fleet's GPUs of its model.

Every (test, GPU model) is its own key, ``test:gpu:MODEL`` (``gemm:gpu:NVIDIA
H100 80GB HBM3``): an H200 is never compared with an H100. Per key the fleet
median is over GPUs (a GPU measured more than once is the median of its
runs); the noise is the fleet's own robust spread (noise.robust_noise, the
estimator the pair tests use). After one run a GPU is ``retest`` only
below ``retest_line``: below ``threshold x median`` and below what that
noise explains (the level noise alone crosses on at most RETEST_SHARE of the
nodes, sized for the GPUs a node has on the key), so a noisy fleet does not
send a fifth of its nodes back to their GPU tools; a GPU below the line
within the noise passes (``why`` says so). It is ``fail`` (slow) only on
two runs or more, the retest rounds' (one run can land anywhere: a
throttled run has a heavy tail), when the upper median of its runs is below
the line and below where noise puts a healthy GPU: the margin is measured
from the healthy level (the median), sized for that noise, the number of
runs and the number of GPUs (noise.z_score), so a GPU 15% slow is drained
after the rounds even where the fleet reads a few percent apart (measured
down from the line, the margin left it undecided), and only when the fleet's own
tail of healthy runs (pairs.runs_tail: the low runs of GPUs whose other runs
are fine) does not put runs that low on some GPU by chance: heavy-tailed runs
(student-t) otherwise drain healthy GPUs. Any compare error the compute tool counted fails the GPU at
once (silent data corruption needs no median). A GPU without a usable number
is a test error: untested, never slow.

nccl-tests ``#wrong`` (a test error by itself) convicts a node of ``data
corruption`` when it shows wrong results with two or more partners that are
clean with others.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from statistics import median

from ..records import GpuMeasurement

K_MAX = 16  # runs of one GPU beyond this use the margin for 16 (noise.margins' k_max; a first round of 8 runs and two retest rounds of 2-5 runs reach 18)
# After the first round, noise alone sends this share of the nodes to a
# retest round on average (per key): the round reruns every GPU tool of a node
# that left a GPU retest, a second burn-in for those nodes. Half the 2% the
# first round may cost: a fleet's own sample and noise estimate move it.
RETEST_SHARE = 0.01
DRAIN_SPLIT = 10  # the drain margin's chance alpha, split over looks and the noise's own error
MIN_RUNS = 2  # a GPU is slow (fail) only on this many runs: a single run is at most retest
# The slowest GPU the first round must not let pass: this far under the line
# (0.85 of the median at the 90% line: "a GPU 15% slow"), sent to the retest
# rounds with CATCH (per GPU), which then drain it.
CATCH_BELOW_LINE = 0.05
CATCH = 0.999
FIRST_RUNS_MAX = 8  # runs per GPU tool in the first round, at most (burnin.gpu_runs = "auto")
# The fleet's tail of runs is read at this share of them (the fast side,
# at least TAIL_RUNS runs out beyond it): deep enough to show a heavy tail,
# shallow enough that a 64-node fleet's 512 runs of a tool put 5 there.
TAIL_SHARE = 0.01
TAIL_RUNS = 5
# Variance of the median of k runs, in one run's (gaussian; k > 8: pi / 2k):
# the first round's number of a GPU is the median of its k runs.
_MEDIAN_VAR = {1: 1.0, 2: 0.5, 3: 0.4487, 4: 0.2982, 5: 0.2868, 6: 0.2147, 7: 0.2104, 8: 0.1682}


def median_sd(k: int) -> float:
    """Standard deviation of the median of `k` runs, in units of one run's."""
    return math.sqrt(_MEDIAN_VAR.get(k, math.pi / (2 * max(k, 1))))


def first_round_lines(fleet: float, threshold: float, sigma: float, runs: int, per_node: float) -> tuple[float, float]:
    """(retest line, catch line) for a GPU's number after the first round's
    `runs` runs (the median of them), with one run's noise `sigma`:

    - the noise line: healthy numbers fall below it on at most RETEST_SHARE
      of the nodes (`per_node` GPUs each);
    - the catch line: a GPU CATCH_BELOW_LINE under the line reads below it
      with chance CATCH.

    A GPU is retest below the line raised up to the catch line, never above
    the noise line: where the noise allows both (the first round ran enough
    runs, `runs_needed`), the rounds see every slow GPU for a few percent of
    the nodes; where it does not, the cost wins and a slow GPU may pass."""
    from .noise import NORMAL

    sd = sigma * median_sd(runs)
    noise_line = fleet * (1 - NORMAL.inv_cdf(1 - RETEST_SHARE / max(per_node, 1)) * sd)
    catch_line = fleet * (threshold - CATCH_BELOW_LINE + NORMAL.inv_cdf(CATCH) * sd)
    return min(noise_line, max(threshold * fleet, catch_line)), catch_line


def tail_noise(ratios: list[float], sigma: float) -> float:
    """One run's noise as far as the fleet's own tail of runs reaches: the
    noise a gaussian would need to put its TAIL_SHARE tail where the runs'
    is (`ratios`: every run over the fleet level), never below the bulk's
    `sigma`. Read on the fast side: the slow side holds the slow parts
    (a GPU 15% slow, a node's host links at 0.6) a run is there to find,
    and bandwidth and compute noise reach both ways. A heavy-tailed fleet
    (student-t runs at 2%: one run in a hundred 8% off, where a gaussian
    2% puts one in 20,000) reads about twice its bulk: the first round's
    lines (first_round_lines) and its number of runs (runs_needed, from the
    store) are sized for it, or a GPU 15% slow passes on one run 6% high.
    Too few runs to show a tail: the bulk's."""
    n = len(ratios)
    if n < 2:
        return sigma
    share = max(TAIL_SHARE, TAIL_RUNS / n)
    if share >= 0.25:
        return sigma
    from .noise import NORMAL

    ranked = sorted(ratios)
    mid = median(ranked)
    high = ranked[min(n - 1, math.ceil((1 - share) * n) - 1)]
    return max(sigma, (high / mid - 1) / NORMAL.inv_cdf(1 - share)) if mid > 0 else sigma


def runs_needed(sigma: float, threshold: float, per_node: float, most: int = FIRST_RUNS_MAX) -> int:
    """The fewest runs per GPU tool in the first round for which a GPU
    CATCH_BELOW_LINE under the line is caught (catch line) within the
    retest share (noise line), at one run's noise `sigma` (the fleet's
    run-to-run noise, from its last burn-in); `most` when none is enough."""
    for k in range(1, most + 1):
        retest, catch = first_round_lines(1.0, threshold, sigma, k, per_node)
        if catch <= retest:
            return k
    return most


def first_runs(noise: dict[str, float], threshold: float, per_node: int, configured: int | str = "auto") -> int:
    """Runs per GPU tool in a burn-in's first round: `burnin.gpu_runs` when
    a number; "auto": enough for the noisiest GPU key the fleet's last full
    run measured (`noise`: key -> its run-to-run noise, the store's
    `fleet_noise`), 1 without one (a fleet's first burn-in)."""
    if configured != "auto":
        return int(configured)
    gpu = [v for k, v in noise.items() if is_gpu_key(k) and isinstance(v, (int, float)) and v > 0]
    return max((runs_needed(v, threshold, per_node) for v in gpu), default=1)


@dataclass
class GpuJudgement:
    """Per node: its GPUs' verdicts; per key: median, noise, line, drain line."""
    nodes: dict[str, dict]            # node -> {"verdict", "gpus": {"3": {...}}, "worst": {...} | None}
    keys: dict[str, dict]
    medians: dict[str, float]
    problems: list[str]


def judge(ms: list[GpuMeasurement], threshold: float, alpha: float, noise_floor: float,
          level: dict[str, float] | None = None) -> GpuJudgement:
    from .noise import NORMAL, drain_line, robust_noise, upper_median, z_score
    from .pairs import _r, runs_tail

    problems: list[str] = []
    per: dict[str, dict[tuple[str, int], list[GpuMeasurement]]] = {}
    nodes: dict[str, dict] = {}
    errored: list[GpuMeasurement] = []
    for m in ms:
        nodes.setdefault(m.node, {"verdict": "untested", "gpus": {}, "worst": None})
        if not m.errors and (not m.ok or m.value is None):  # compare errors count even in a failed run
            problems.append(f"test error (not a measurement): {m.test} on {m.node} GPU {m.gpu}")
            errored.append(m)
            continue
        per.setdefault(m.key, {}).setdefault((m.node, m.gpu), []).append(m)
    ident = identities(ms)
    rank = {"fail": 0, "retest": 1, "untested": 2, "pass": 3}
    keys, medians = {}, {}
    for key, by_gpu in sorted(per.items()):
        value = {g: median(v for v in (x.value for x in xs) if v is not None)
                 for g, xs in by_gpu.items() if any(x.value is not None for x in xs)}
        fleet = (level or {}).get(key) or (median(value.values()) if value else 0.0)
        line = threshold * fleet
        # One run's noise, from every run (a GPU's median of k runs varies
        # less: with every GPU run k times in the first round, the spread of
        # their medians would make the margins for one run too narrow).
        sigma = robust_noise([x.value / fleet for xs in by_gpu.values() for x in xs
                              if x.value is not None and x.value >= (threshold - 0.15) * fleet], noise_floor) \
            if fleet else noise_floor
        # A GPU is slow only on two runs or more (retest rounds re-run its
        # tools): one run can land anywhere (a throttled or disturbed run has a
        # heavy tail), a repeat costs minutes. With k runs its upper median
        # must be below the line, and below the healthy level by the margin
        # for k values, where `need` runs must all have fallen (noise.z_score,
        # as pairs use it): noise alone puts no healthy GPU of the fleet there.
        # The chance is split ten ways: a GPU is looked at once per round
        # (three looks with the default two rounds) with a noise the fleet
        # estimates from itself.
        def drain_at(k: int) -> float:
            return min(line, drain_line(fleet, sigma, z_score(k, len(value), alpha / DRAIN_SPLIT)))

        drains: dict[int, float] = {2: drain_at(2)}
        # The first round (`first_k` runs per GPU, what most GPUs have): retest
        # below what the fleet's noise explains on at most RETEST_SHARE of
        # the nodes (a node has `per_node` GPUs on this key), raised up to
        # where a GPU 15% slow still falls (first_round_lines). A GPU with
        # more runs has been retested: retest while below the line. Only a
        # retest round's runs drain (the first round's k runs look at every
        # GPU of the fleet once more; a drain is always confirmed by a rerun).
        per_node = median(Counter(g[0] for g in by_gpu).values())
        # Which runs are the first round's: the lines a retest round wrote say
        # so (`retest`); lines without (a site's own) count: a GPU with more
        # runs than most has been retested.
        marked = any(x.retest is not None for xs in by_gpu.values() for x in xs)
        counts_runs = sorted(sum(1 for x in xs if x.value is not None and (x.retest is None or not marked))
                             for xs in by_gpu.values())
        first_k = max(1, counts_runs[len(counts_runs) // 2]) if counts_runs else 1
        # The first round's lines for the fleet's tail of runs, not its bulk
        # alone: heavy-tailed runs put a GPU 15% slow 6% high on one run in a
        # hundred (tail_noise), and healthy ones as far low.
        tail = tail_noise([x.value / fleet for xs in by_gpu.values() for x in xs if x.value is not None],
                          sigma) if fleet else sigma
        retest_line, _catch = first_round_lines(fleet, threshold, tail, first_k, per_node)
        # The fleet's own tail of healthy runs (a GPU whose other runs are
        # fine: its low run was the tail), as the intra-node key takes it:
        # runs below the drain line drain a GPU only when that tail does not
        # put runs that low on some GPU of the fleet by chance. A heavy-tailed
        # fleet (student-t runs at 2-5%) drained a healthy GPU whose first run
        # read 0.77 and one of two repeats 0.86: the gaussian margin said never.
        low_tail = runs_tail({g: [x.value for x in xs if x.value is not None] for g, xs in by_gpu.items()},
                             line, fleet, sigma) if fleet else None
        limit = alpha / DRAIN_SPLIT

        def beyond_tail(runs: list[float]) -> bool:
            low = sorted(r / fleet for r in runs if r < line)
            return low_tail is None or low_tail.chance_low(low, len(runs), limit) < limit
        counts = dict.fromkeys(rank, 0)
        for g, xs in by_gpu.items():
            errors = max((x.errors or 0) for x in xs)
            v = value.get(g)
            runs = [x.value for x in xs if x.value is not None]
            k = min(len(runs), K_MAX)
            retested = any(x.retest is not None for x in xs) if marked else k > first_k
            if runs and k not in drains:
                drains[k] = drain_at(k)
            if errors:
                verdict, why = "fail", f"{errors} compare errors (silent data corruption)"
            elif v is None:
                verdict, why = "untested", "no usable number"
            elif k >= MIN_RUNS and retested and upper_median(runs) < drains[k] and beyond_tail(runs):
                verdict, why = "fail", f"{v:.4g} {xs[0].unit} < {threshold:.0%} of median {fleet:.4g}" + (
                    f" (median of {len(runs)} runs)" if len(runs) > 1 else "")
            elif not retested and v < retest_line or retested and v < line:
                below = f"below {threshold:.0%} of median {fleet:.4g}" if v < line else \
                    f"below the first round's retest line {retest_line:.4g} (a GPU 15% slow reads this high by noise)"
                verdict, why = "retest", f"{v:.4g} {xs[0].unit} {below}, " + (
                    "in one run (a second confirms)" if k < MIN_RUNS else f"within the noise over {len(runs)} runs")
            elif retested and (again := straddles(xs, line)) is not None:
                below = f"below {threshold:.0%} of median {fleet:.4g}"
                verdict, why = "retest", (f"{v:.4g} {xs[0].unit} over {len(runs)} runs, but the retest rounds' "
                                          f"{again[1]} runs {again[0]:.4g} {below}: looked at again")
            elif v < line:  # the first round, below the line within the noise
                verdict, why = "pass", (f"{v:.4g} {xs[0].unit} below {threshold:.0%} of median {fleet:.4g} in "
                                        + ("one run" if len(runs) == 1 else f"{len(runs)} runs") +
                                        f", within the fleet's noise ({tail:.1%} with its tail: retest below {retest_line:.4g})")
            else:
                verdict, why = "pass", None
            counts[verdict] += 1
            first = xs[0]
            entry = {"test": first.test, "key": key, "verdict": verdict, "score": _r(v), "unit": first.unit,
                     "errors": errors, "median": _r(fleet), **ident.get(g, {})}
            if len(xs) > 1:
                entry["runs"] = len(xs)
            if first.gpu_model:
                entry["gpu_model"] = first.gpu_model
            if why:
                where = entry.get("pci") or entry.get("serial")
                entry["why"] = f"GPU {first.gpu}" + (f" ({where})" if where else "") + f" {first.test} {why}"
            node = nodes[g[0]]
            node["gpus"].setdefault(str(g[1]), {})[first.test] = entry
            if node["worst"] is None or rank[verdict] < rank[node["worst"]["verdict"]] or (
                    verdict == node["worst"]["verdict"] and (entry["score"] or 0) / (fleet or 1)
                    < (node["worst"]["score"] or 0) / (node["worst"]["median"] or 1)):
                node["worst"] = {**entry, "gpu": g[1]}
        medians[key] = round(fleet, 3)
        keys[key] = {"median": round(fleet, 3), "noise": round(sigma, 4), "tail_noise": round(tail, 4),
                     "line": round(line, 3),
                     "drain_line": round(drains[2], 3), "retest_line": round(retest_line, 3), "first_runs": first_k,
                     "gpus": len(by_gpu), "verdicts": counts,
                     # the line for each number of runs a GPU had (1: none, a single run never drains)
                     "drain_line_runs": {str(k): round(d, 3) for k, d in sorted(drains.items()) if k > 1}}
    for m in errored:  # a GPU with no number for a test: untested, unless a repeat judged it
        node = nodes[m.node]
        if m.test not in node["gpus"].get(str(m.gpu), {}):
            entry = {"test": m.test, "key": m.key, "verdict": "untested", "score": None, "unit": m.unit,
                     "errors": 0, **ident.get((m.node, m.gpu), {}), "why": f"GPU {m.gpu} {m.test}: test error (no usable number)"}
            node["gpus"].setdefault(str(m.gpu), {})[m.test] = entry
            if node["worst"] is None or node["worst"]["verdict"] == "pass":
                node["worst"] = {**entry, "gpu": m.gpu}
    for n, node in nodes.items():
        node["verdict"] = node["worst"]["verdict"] if node["worst"] else "untested"
    return GpuJudgement(nodes, keys, medians, problems)


def straddles(xs: list[GpuMeasurement], line: float) -> tuple[float, int] | None:
    """(median, count) of a retested GPU's retest-round runs when that median
    is below the line: the GPU's runs straddle it. Its median over every run
    may still be above the line (the first round's runs count there too),
    but the first round's runs are why it was retested, and the rounds'
    own runs, the unbiased ones, do not show it healthy: it is looked at
    again rather than passed (a GPU 15% slow under heavy-tailed noise read
    0.90, 0.86, 0.93, 0.94, 0.78, 0.93 in its first round and 0.83, 0.93
    in its retest: 0.914 over the eight, passed). Only lines that say their
    round (`retest`, as the run writes them); None otherwise."""
    again = [x.value for x in xs if x.retest is not None and x.value is not None]
    if not again:
        return None
    m = median(again)
    return (m, len(again)) if m < line else None


def identities(ms: list[GpuMeasurement]) -> dict[tuple[str, int], dict[str, str]]:
    """(node, GPU index) -> its PCI address and serial, from any of its lines:
    only some tools print them (gpu_burn the UUID, nvbandwidth the PCI
    address), and every test of the GPU is recorded under them."""
    out: dict[tuple[str, int], dict[str, str]] = {}
    for m in ms:
        d = out.setdefault((m.node, m.gpu), {})
        for name in ("pci", "serial"):
            if getattr(m, name) and name not in d:
                d[name] = getattr(m, name)
    return out


def below_baselines(nodes: dict[str, dict], baselines: dict[str, dict[str, float]], drop: float) -> dict[str, dict]:
    """Node -> its GPU furthest below its *own* baseline (more than `drop`
    under it). GPU baselines are keyed by serial (`baselines[key][serial]`),
    so a swapped GPU has none and starts fresh; a GPU without a serial has none."""
    out: dict[str, dict] = {}
    for n, v in nodes.items():
        for g, tests in (v.get("gpus") or {}).items():
            for e in tests.values():
                base = baselines.get(e["key"], {}).get(e.get("serial") or "")
                if not base or e["score"] is None or e["score"] >= (1 - drop) * base:
                    continue
                if n not in out or e["score"] / base < out[n]["score"] / out[n]["baseline"]:
                    out[n] = {"key": e["key"], "score": e["score"], "baseline": base, "gpu": int(g),
                              "serial": e["serial"]}
    return out


def is_gpu_key(key: str) -> bool:
    """``gemm:gpu[:model]``: a per-GPU key (its baselines are per GPU serial)."""
    return key.split(":", 2)[1:2] == ["gpu"]


def entry_label(e: dict) -> str:
    """`GPU 3 (0000:9b:00.0)` / `GPU 3 (serial ...)` from a per-GPU entry (with its `gpu`) or a below_baseline one."""
    where = e.get("pci") or (f"serial {e['serial']}" if e.get("serial") else None)
    return f"GPU {e['gpu']}" + (f" ({where})" if where else "")


def drain_reason(entry: dict, threshold: float) -> str:
    """`GPU 3 (0000:9b:00.0) gemm 610 TFLOPS < 90% of median 702` (without the slurmqual prefix)."""
    gpu = entry_label(entry)
    if entry.get("errors"):
        return f"{gpu} {entry['test']} data corruption: {entry['errors']} compare errors"
    return (f"{gpu} {entry['test']} {entry['score']:.4g} {entry['unit']} < {threshold:.0%} "
            f"of median {entry['median']:.4g}")  # Slurm reasons are cut at 80 characters: the runs are in `why`


def corrupt_nodes(measurements) -> dict[str, list[str]]:
    """nccl-tests wrong results: node -> its partners, for nodes that showed
    `#wrong` with two or more different partners, each of which is clean
    with some other node (then the common end is at fault)."""
    wrong_with: dict[str, set[str]] = {}
    clean_with: dict[str, set[str]] = {}
    if not any(getattr(m, "wrong", False) for m in measurements):
        return {}  # the usual case: no pass over 200k pairs building partner sets
    for m in measurements:
        if len(m.nodes) != 2:
            continue
        a, b = m.nodes
        if getattr(m, "wrong", False):
            wrong_with.setdefault(a, set()).add(b)
            wrong_with.setdefault(b, set()).add(a)
        elif m.ok:
            clean_with.setdefault(a, set()).add(b)
            clean_with.setdefault(b, set()).add(a)
    out = {}
    for n, partners in wrong_with.items():
        exonerated = [q for q in partners if clean_with.get(q, set()) - {n}]
        if len(exonerated) >= 2:
            out[n] = sorted(exonerated)
    return out
