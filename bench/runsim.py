"""A burn-in run played out end to end on a generated rail-optimised fabric
(issue 22 item 7): the families of bench_components_sim.py and
bench_burnin_sim.py run through here.

The generator is written apart from the analysis and from tests/fleet.py,
and does not share their assumptions:

- a path is as fast as its slowest part (a bottleneck, `min`), not the
  product of its parts' factors: a NIC at 0.8 behind a leaf at 0.8 reads
  0.8, and a slow NIC hidden behind a slower switch shows nothing;
- the whole-node nccl-tests pair moves its data over every rail: with
  NCCL's rings each rail carries an equal share and the slowest rail gates
  the run (`min` over the rails); fleets with adaptive routing / PXN spread
  the load (the mean over the rails), and a slow NIC then barely shows on
  the whole-node key;
- a node can be slow on its GPU/host side (whole-node and intra tests, not
  the rails) or on its network side (every NIC: a PCIe or host problem);
- healthy nodes differ a little (a per-node spread of +-1.5%), some healthy
  nodes straggle now and then (OS jitter: a share of their measurements
  read 0.75-0.92), transient congestion hits any measurement, tests fail
  (ok false) and whole task jobs die before writing a result;
- noise shapes: gaussian, student-t(3) and lognormal, at the bulk spread the
  scenario names.

The run is the run's own code end to end: `runner.submit` writes plan.json
(the switch-aware groups and rounds, from the fabric map CSV
`topology.write_csv` writes as `slurmqual fabric map` does) and submits
through a recording adapter; each task's pairs are `task.planned_rounds`
over the run directory (as `burnin task` reads them), each measured by the
generator and written with `rundir.write_result`; the analysis job is
mirrored from commands/burnin.py (`runner.load_run`, `runner.judge` with the
fabric map, `retest.settle`, which plans the next round with the function
the analysis job uses and writes retest-<k>.json); the next round's groups
are read back from that file and measured again, up to the run's max
rounds. A node drained by an analysis stays drained (the final state keeps it).

Ground truth comes from the fabric and the first round's measured pairs,
decided before any analysis runs (`truth()`); see its docstring.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

# The run's own code (the one place this file names modules: a re-layout moves only these lines).
from slurmqual.burnin.judge import gpus as gpujudge, topology  # noqa: E402
from slurmqual.burnin.read import gpuparse  # noqa: E402
from slurmqual.burnin.results import rundir  # noqa: E402
from slurmqual.burnin.run import gputask, retest, runner, task  # noqa: E402
from slurmqual.config import Config, parse_toml, validate  # noqa: E402
from slurmqual.slurm.schema.nodes import NodeInfo  # noqa: E402

NORMAL = statistics.NormalDist()
THRESHOLD = 0.9
ALPHA = 0.01
NOISE_FLOOR = 0.01
MAX_RETEST_ROUNDS = 2
PAIR_SIZE = 8589934592


# -- the fabric ----------------------------------------------------------------------

@dataclass
class Fabric:
    nodes: list[str]
    rails: list[str]
    leaf: dict[tuple[str, str], str]                        # (node, rail) -> its rail leaf
    su: dict[str, int]                                      # node -> its scalable unit
    gpu: dict[str, float] = field(default_factory=dict)     # GPU/host side: whole-node and intra tests
    host: dict[str, float] = field(default_factory=dict)    # network side: every NIC of the node
    nic: dict[tuple[str, str], float] = field(default_factory=dict)
    switch: dict[str, float] = field(default_factory=dict)  # every path through this leaf
    route: dict[tuple[frozenset, str], float] = field(default_factory=dict)  # one rail's route between two nodes
    spread: dict[str, float] = field(default_factory=dict)  # healthy per-node spread
    flaky: dict[str, float] = field(default_factory=dict)   # healthy stragglers: chance a measurement straggles
    shape: str = "gaussian"
    noise: float = 0.02
    transient: float = 0.0
    failed: float = 0.0
    dead_tasks: int = 0
    combine: str = "min"            # how the whole-node test sees its rails: min (rings) or mean (adaptive)
    base_pair: float = 370.0
    base_rail: float = 392.0
    base_intra: float = 470.0
    # GPU tools (the whole-run family): gpu_burn and nvbandwidth on `gpus`
    # GPUs per node (0: not run), each run's per-GPU number carrying
    # `gpu_noise` (the fleet's noise shape), a GPU's part-to-part spread
    # 0.5%; `gpu_slow`: a GPU's compute factor (gpu_burn only). A node slow
    # on its GPU/host side (`gpu`) reads its host links (nvbandwidth h2d,
    # d2h) that slow too.
    gpus: int = 0
    gpu_noise: float = 0.02
    gpu_slow: dict[tuple[str, int], float] = field(default_factory=dict)
    # Held-out variants (bench_components_sim.py --only heldout): `spine`, a
    # rail's spine plane slow (rail -> factor on every path of that rail
    # between scalable units; no topology file names it); `topo_kind`, what
    # the site gives the run: "map" (the fabric map CSV), "conf" (Slurm's
    # topology.conf, one switch per scalable unit, as sites list their
    # rail-optimised SUs) or "none"; `whole_node`: False runs the per-rail
    # tests only (burnin.tests empty).
    spine: dict[str, float] = field(default_factory=dict)
    topo_kind: str = "map"
    whole_node: bool = True
    # A fabric map that is not the fabric (GEN2's held-out families): `stale`,
    # (node, rail) -> the leaf the map still names where the cable has moved
    # (the measurements follow `leaf`, the map says `stale`); `unmapped`,
    # nodes the map has no rows for (added after it was written).
    stale: dict[tuple[str, str], str] = field(default_factory=dict)
    unmapped: set[str] = field(default_factory=set)
    # `uplinks`: leaf -> factor on the paths leaving it (to another scalable
    # unit); the paths inside its unit are fine.
    uplinks: dict[str, float] = field(default_factory=dict)
    # GEN3's held-out families: `rail_subset`, the rails burnin.rails lists
    # (the per-rail tests run on those only; the whole-node test still
    # crosses every rail); `dead_share`, a share of the array's tasks that
    # die before writing a result (at least `dead_tasks`).
    rail_subset: list[str] | None = None
    dead_share: float = 0.0
    # GEN4's held-out families: `nccl_tests`, burnin.tests (a real run may
    # list alltoall_perf beside all_reduce_perf: each test its own key, its
    # own draws, the same path model, its level TEST_LEVEL of all_reduce's);
    # `conf_pods`: topology.conf groups its unit switches under pod switches
    # of that many (a three-level fat-tree as sites write it; 0: one spine).
    nccl_tests: tuple[str, ...] = ("all_reduce_perf",)
    conf_pods: int = 0

    def end(self, x: str, r: str) -> float:
        """One end of a rail path: the NIC, or the node's network side."""
        return min(self.nic.get((x, r), 1.0), self.host.get(x, 1.0))

    def rail_path(self, a: str, b: str, r: str) -> float:
        la, lb = self.leaf[(a, r)], self.leaf[(b, r)]
        return min(self.end(a, r), self.end(b, r), self.switch.get(la, 1.0), self.switch.get(lb, 1.0),
                   self.route.get((frozenset((a, b)), r), 1.0),
                   *((self.spine.get(r, 1.0), self.uplinks.get(la, 1.0), self.uplinks.get(lb, 1.0))
                     if self.su[a] != self.su[b] else ()))

    def pair_factor(self, a: str, b: str) -> float:
        paths = [self.rail_path(a, b, r) for r in self.rails]
        net = min(paths) if self.combine == "min" else sum(paths) / len(paths)
        return min(net, self.gpu.get(a, 1.0), self.gpu.get(b, 1.0)) * self._soft(a, b)

    def _soft(self, *xs: str) -> float:
        return math.prod(self.spread.get(x, 1.0) for x in xs) ** (1 / len(xs))

    def draw(self, rng: random.Random, nodes: tuple[str, ...]) -> float:
        s = self.noise
        if self.shape == "student-t":
            t = rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3)
            f = max(0.05, 1 + s / 1.13 * t)  # t(3)'s IQR / 1.349 is 1.13: bulk spread s
        elif self.shape == "lognormal":
            f = math.exp(rng.gauss(-s * s / 2, s))
        else:
            f = max(0.05, 1 + s * rng.gauss(0, 1))
        if len(nodes) == 2 and self.transient and rng.random() < self.transient:
            f *= rng.uniform(0.5, 0.9)
        for x in nodes:
            if self.flaky.get(x) and rng.random() < self.flaky[x]:
                f *= rng.uniform(0.75, 0.92)
        return f

    def healthy(self, x: str) -> bool:
        return self.gpu.get(x, 1.0) == 1.0 and self.host.get(x, 1.0) == 1.0 and \
            all(self.nic.get((x, r), 1.0) == 1.0 for r in self.rails) and \
            all(self.gpu_slow.get((x, g), 1.0) == 1.0 for g in range(self.gpus))

    def gpu_factor(self, x: str, g: int, test: str) -> float:
        """The true factor of GPU g of x on a per-GPU test (1.0: healthy)."""
        if test == "burn":
            return self.gpu_slow.get((x, g), 1.0)
        if test in ("h2d", "d2h"):
            return self.gpu.get(x, 1.0)
        return 1.0

    def gpu_run(self, rng: random.Random, x: str, g: int, test: str) -> float:
        """One run's number of GPU g of x on `test`, over its base level."""
        part = 1 + random.Random(f"{x}:{g}:{test}").gauss(0, 0.005)
        s = self.gpu_noise
        if self.shape == "student-t":
            t = rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3)
            f = max(0.05, 1 + s / 1.13 * t)
        elif self.shape == "lognormal":
            f = math.exp(rng.gauss(-s * s / 2, s))
        else:
            f = max(0.05, 1 + s * rng.gauss(0, 1))
        return self.gpu_factor(x, g, test) * part * f

    def topology_text(self) -> tuple[str, str] | None:
        """(file name, text) of the topology the site gives the run, or None."""
        if self.topo_kind == "map":
            return "fabric.csv", topology.write_csv(self.map_rows())
        if self.topo_kind == "conf":
            sus: dict[int, list[str]] = {}
            for x in self.nodes:
                sus.setdefault(self.su[x], []).append(x)
            lines = [f"SwitchName=su{k} Nodes={','.join(xs)}" for k, xs in sorted(sus.items())]
            if self.conf_pods:
                pods: dict[int, list[str]] = {}
                for k in sorted(sus):
                    pods.setdefault(k // self.conf_pods, []).append(f"su{k}")
                lines += [f"SwitchName=pod{p} Switches={','.join(ks)}" for p, ks in sorted(pods.items())]
                lines.append(f"SwitchName=spine Switches={','.join(f'pod{p}' for p in sorted(pods))}")
            else:
                lines.append(f"SwitchName=spine Switches={','.join(f'su{k}' for k in sorted(sus))}")
            return "topology.conf", "\n".join(lines) + "\n"
        return None

    def named_as(self, leaf: str) -> str | None:
        """The name the run's topology gives the switch `leaf` (None: it has none)."""
        if self.topo_kind == "map":  # a leaf the map has no row for (every node under it unmapped) has none
            return leaf if not self.unmapped or leaf in self._mapped_switches() else None
        if self.topo_kind == "conf":
            return leaf.split("-", 1)[0]
        return None

    def _mapped_switches(self) -> set[str]:
        """The switches the map has rows for (kept while the map's inputs stay as they were)."""
        key = (len(self.nodes), len(self.unmapped), len(self.stale))
        if getattr(self, "_mapped", (None,))[0] != key:
            self._mapped = (key, {sw for _x, _r, sw, _p in self.map_rows()})
        return self._mapped[1]

    def map_rows(self) -> list[tuple[str, str, str, str]]:
        """The fabric map as `slurmqual fabric map` writes it: (node, rail, switch, port)."""
        port: dict[str, int] = {}
        rows = []
        for x in self.nodes:
            if x in self.unmapped:
                continue
            for r in self.rails:
                sw = self.stale.get((x, r), self.leaf[(x, r)])
                port[sw] = port.get(sw, 0) + 1
                rows.append((x, r, sw, str(port[sw])))
        return rows


def node_names(n: int) -> list[str]:
    return [f"gpu{i:05d}" for i in range(n)]


def rail_fabric(n: int, rails: int, su: int) -> Fabric:
    """Rail-optimised: each scalable unit of `su` nodes has one leaf per rail."""
    nodes = node_names(n)
    rail_names = [f"mlx5_{i}" for i in range(rails)]
    leaf = {(x, r): f"su{i // su}-rail{j}" for i, x in enumerate(nodes) for j, r in enumerate(rail_names)}
    return Fabric(nodes, rail_names, leaf, {x: i // su for i, x in enumerate(nodes)})


# -- the run ------------------------------------------------------------------------

class Jobs:
    """The Slurm side of the simulated run: records what the run submits,
    holds the nodes' states and drains (runner.drain_failures drains through
    it with the hooks' ownership rules, as the analysis job does)."""

    def __init__(self):
        self.submitted: list[tuple[list[str], str]] = []
        self.reasons: dict[str, str] = {}

    def submit(self, argv: list[str], script: str | None = None) -> str:
        self.submitted.append((list(argv), script or ""))
        return str(1000 + len(self.submitted))

    def cancel(self, ids) -> None:
        pass

    def cancel_by_name(self, name: str) -> None:
        pass

    def node_info(self, hostlist: str | None = None) -> list:
        return [NodeInfo(n, "idle", ("DRAIN",), r) for n, r in self.reasons.items()]

    def drain(self, nodes: list[str], reason: str) -> None:
        for n in nodes:
            self.reasons[n] = reason


def site_config(run_dir: str, fabric: Fabric, map_path: str, rails: bool, seed: int = 0) -> Config:
    data = validate(parse_toml(b"", "<defaults>"), "<defaults>")
    b = data["burnin"]
    b.update(run_dir=run_dir, topology=map_path, rails=list(fabric.rail_subset or fabric.rails) if rails else [],
             max_retest_rounds=MAX_RETEST_ROUNDS)
    if not fabric.whole_node:
        b.update(tests=[])
    elif fabric.nccl_tests != Fabric.nccl_tests:
        b.update(tests=list(fabric.nccl_tests))
    if fabric.gpus:
        # The fleet's run-to-run GPU noise known from its last burn-in
        # (burnin.gpu_runs = "auto"): the first round's runs per tool as
        # runner.gpu_runs sizes them from what that run's analysis recorded.
        b.update(gpu_tests=list(GPU_TOOLS), gpus_per_node=fabric.gpus,
                 gpu_runs=gpujudge.first_runs(previous_gpu_noise(fabric, seed), b["threshold"], fabric.gpus))
    return Config(data, None, "sim")


def previous_gpu_noise(fabric: Fabric, seed: int) -> dict[str, float]:
    """The GPU keys' noise the store holds from the fleet's previous burn-in
    (a first burn-in: every GPU tool once on every node), as the analysis
    job records it (analyze()'s `noise`, what Store.fleet_noise returns and
    runner.gpu_runs sizes the first round by): the fleet's own estimate,
    its tail included, not the simulator's true noise. Its own draws."""
    from slurmqual.burnin.judge.analyze import analyze
    from slurmqual.burnin.records import from_dicts

    rng = random.Random(f"previous burn-in:{seed}")
    raw = [d for tool in GPU_TOOLS for d in gpu_tool_lines(fabric, tool, list(fabric.nodes), 0, "", rng)]
    a = analyze([m for m in from_dicts(raw)], list(fabric.nodes))
    return {k: v for k, v in a.noise.items() if gpujudge.is_gpu_key(k)}


# -- the GPU tools' outputs, as the tools print them ----------------------------------

GPU_TOOLS = ("gpu_burn", "nvbandwidth")
GPU_MODEL = "NVIDIA H100 80GB HBM3"
GPU_BASE = {"burn": 350.0, "hbm": 3000.0, "h2d": 55.0, "d2h": 55.0, "nvlink": 390.0}  # TFLOPS, GB/s
NV_CASES = (("device_local_copy", "hbm", "memcpy local GPU(column) bandwidth (GB/s)"),
            ("host_to_device_memcpy_ce", "h2d", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"),
            ("device_to_host_memcpy_ce", "d2h", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)"),
            ("device_to_device_memcpy_write_ce", "nvlink", "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"))


def gpu_burn_output(fabric: Fabric, x: str, rng: random.Random, records: int = 8) -> str:
    """gpu_burn's output for one run on every GPU of x (its device lines,
    carriage-return progress records, the `Tested N GPUs` summary; as in
    tests/data/real/gpu/gpu_burn_8x_A100_doubles_tc_superbench.log): each
    GPU's run level with 1% reading jitter per record."""
    n = fabric.gpus
    level = [GPU_BASE["burn"] * 1000 * fabric.gpu_run(rng, x, g, "burn") for g in range(n)]
    out = [f"GPU {g}: {GPU_MODEL} (UUID: GPU-{zlib.crc32(f'{x}:{g}'.encode()):08x}-0000-0000-0000-000000000000)"
           for g in range(n)]
    out.append("Burning for 60 seconds.")
    prog = []
    for i in range(1, records + 1):
        procs = " - ".join(f"{i * 500} ({v * (1 + 0.01 * rng.gauss(0, 1)):.0f} Gflop/s)" for v in level)
        prog.append(f"\r{100 * i / records:.1f}%  proc'd: {procs}   errors: {' - '.join('0' for _ in level)}   "
                    f"temps: {' - '.join('60 C' for _ in level)} ")
    out.append("".join(prog))
    out.append(f"\nTested {n} GPUs:")
    out += [f"\tGPU {g}: OK" for g in range(n)]
    return "\n".join(out) + "\n"


def nvbandwidth_output(fabric: Fabric, x: str, rng: random.Random) -> str:
    """nvbandwidth v0.8's text output of the CE testcases gputask runs
    (`Running NAME.`, the matrix, `SUM NAME X`; device to device N/A on
    the diagonal), one run on every GPU of x."""
    n = fabric.gpus
    out = ["nvbandwidth Version: v0.8", "Built from Git version: v0.8", "", "CUDA Runtime Version: 12060",
           "CUDA Driver Version: 12060", "Driver Version: 550.127.08", "", x]
    out += [f"Device {g}: {GPU_MODEL} (00000000:{0x18 + 0x20 * g:02x}:00)" for g in range(n)]
    out.append("")
    head = "     " + "".join(f"{g:>10}" for g in range(n))
    for case, test, desc in NV_CASES:
        v = [GPU_BASE[test] * fabric.gpu_run(rng, x, g, test) for g in range(n)]
        if test == "nvlink":
            rows = [[None if i == j else min(v[i], v[j]) * (1 + 0.005 * rng.gauss(0, 1)) for j in range(n)]
                    for i in range(n)]
        else:
            rows = [v]
        cells = [[("N/A" if c is None else f"{c:.2f}") for c in r] for r in rows]
        total = sum(c for r in rows for c in r if c is not None)
        out += [f"Running {case}.", desc, head]
        out += [f"{i:>2} " + "".join(f"{c:>10}" for c in r) for i, r in enumerate(cells)]
        out += ["", f"SUM {case} {total:.2f}", ""]
    return "\n".join(out) + "\n"


def gpu_tool_lines(fabric: Fabric, tool: str, nodes: list[str], task_num: int | None, tag: str,
                   rng: random.Random) -> list[dict]:
    """One run of `tool` on every node: its output parsed by the run's own
    reader (gpuparse.parse) and turned into measurement lines by the task's
    own code (gputask.lines_of); a failed run (exit code 1) gives ok: false
    lines for every GPU, as the task writes them."""
    out: list[dict] = []
    for x in nodes:
        log = f"gpu-{tool}-{x}{tag}.log"
        if rng.random() < fabric.failed:
            out += gputask.lines_of(tool, x, gpuparse.GpuResult(tool), fabric.gpus, task_num, log, "exit code 1")
            continue
        text = gpu_burn_output(fabric, x, rng) if tool == "gpu_burn" else nvbandwidth_output(fabric, x, rng)
        out += gputask.lines_of(tool, x, gpuparse.parse(text, tool), fabric.gpus, task_num, log)
    return out


def gpu_lines(fabric: Fabric, cfg: dict, run_dir: str, task_id: str, nodes: list[str],
              rng: random.Random) -> list[dict]:
    """The GPU tools' lines of one task as task.run_task runs them: the
    first round every tool `task.first_gpu_runs` times on every node; a
    retest round the tools its record names (`gpu`, gputask.retest_tools)
    on those of its nodes, `gpu_retest_runs` times, each line marked with
    the round."""
    if not cfg.get("gpu_tests"):
        return []
    stage = rundir.stage_of(task_id)
    tnum = int(task_id) if task_id.isdigit() else None
    out: list[dict] = []
    if not stage:
        runs = task.first_gpu_runs(run_dir)
        for i in range(runs):
            for tool in cfg["gpu_tests"]:
                out += gpu_tool_lines(fabric, tool, nodes, tnum, f"-run{i + 1}" if runs > 1 else "", rng)
        return out
    wanted = (rundir.load_stage(run_dir, stage) or {}).get("gpu") or {}
    mine = {n: tools for n, tools in wanted.items() if n in nodes}
    for tool in [t for t in gpuparse.TOOL_TESTS if any(t in tools for tools in mine.values())]:
        these = sorted(n for n, tools in mine.items() if tool in tools)
        for i in range(cfg.get("gpu_retest_runs", 2)):
            out += [dict(d, retest=stage) for d in gpu_tool_lines(fabric, tool, these, None, f"-run{i + 1}", rng)]
    return out


def measure_task(fabric: Fabric, cfg: dict, run_dir: str, task_id: str, rng: random.Random,
                 dead: bool = False) -> None:
    """What `burnin task` runs for one task job (its group and pairs read from
    the run directory as task.run_in_job reads them), with the generator's
    numbers, written as its result file; a dead task writes nothing."""
    if dead:
        return
    nodes = task.planned_group(run_dir, task_id)
    pair_rounds = task.planned_rounds(run_dir, nodes, cfg["rounds"], task_id)
    out = gpu_lines(fabric, cfg, run_dir, task_id, nodes, rng) + task_lines(fabric, cfg, task_id, nodes, pair_rounds, rng)
    rundir.write_result(run_dir, {"task": task_id, "nodes": nodes, "started": 0, "finished": 0, "complete": True,
                                  "measurements": out, "versions": {}})


# A test's bus bandwidth over all_reduce's on the same path (2 x 8 GPUs,
# 8 GiB): alltoall moves every GPU's share to every other GPU, its busbw
# about half all_reduce's; the same parts gate it (the slowest rail, the
# GPU side).
TEST_LEVEL = {"all_reduce": 1.0, "alltoall": 0.5, "all_gather": 0.95, "reduce_scatter": 0.95, "sendrecv": 0.6}


def task_lines(fabric: Fabric, cfg: dict, task_id: str, nodes: list[str], pair_rounds, rng: random.Random) -> list[dict]:
    """One task's measurement lines, in task.run_task's order and fields."""
    stage = rundir.stage_of(task_id)
    tnum = int(task_id) if task_id.isdigit() else None
    out: list[dict] = []

    def line(d: dict) -> dict:
        if rng.random() < fabric.failed:
            d.update(ok=False, busbw=None, error="exit code 1")
        return dict(d, retest=stage) if stage else d

    for test in cfg["tests"]:  # each test its intra runs, then its pair rounds (task.run_task's order)
        name, level = test.removesuffix("_perf"), TEST_LEVEL[test.removesuffix("_perf")]
        for x in nodes:
            v = fabric.base_intra * level * fabric.gpu.get(x, 1.0) * fabric.spread.get(x, 1.0) * \
                fabric.draw(rng, (x,))
            out.append(line({"nodes": [x], "busbw": round(v, 2), "size": PAIR_SIZE, "test": name, "ok": True,
                             "task": tnum, "round": None}))
        for r, pairs in enumerate(pair_rounds):
            for a, b in pairs:
                v = fabric.base_pair * level * fabric.pair_factor(a, b) * fabric.draw(rng, (a, b))
                out.append(line({"nodes": [a, b], "busbw": round(v, 2), "size": PAIR_SIZE, "test": name,
                                 "ok": True, "task": tnum, "round": r}))
    if cfg["rails"]:
        for r, pairs in enumerate(pair_rounds):
            for a, b in pairs:
                for nic in cfg["rails"]:
                    v = fabric.base_rail * fabric.rail_path(a, b, nic) * fabric._soft(a, b) * fabric.draw(rng, (a, b))
                    out.append(line({"nodes": [a, b], "busbw": round(v, 2), "size": cfg["rail_bytes"],
                                     "test": "ib_write_bw", "rail": nic, "ok": True, "task": tnum, "round": r}))
    return out


@dataclass
class RunResult:
    analysis: object                      # the final Analysis
    drained: dict[str, list[str]]         # node -> NICs its drain named (any analysis of the run)
    first: list[dict]                     # the first round's measurements (raw)
    rounds: int                           # retest rounds submitted
    reruns: int                           # nodes in the retest rounds' task jobs, summed over rounds
    seconds: float
    fabric: Fabric | None = None          # what was measured (the truth of each GPU test)
    gpu_reruns: int = 0                   # nodes that ran GPU tools again in the retest rounds, summed


def scratch_dir() -> str:
    """Where a played run's directory goes: /dev/shm when it is there (the
    run's files are written durably, an fsync each: on a disk that was a
    tenth of a 1,024-node scenario's CPU, none of it the run's own work)."""
    shm = "/dev/shm"
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return tempfile.mkdtemp(prefix="sq-runsim-", dir=where)


@contextmanager
def plan_read_once():
    """While the simulated tasks of one round are measured: plan.json parsed
    once per run, not once per task call. Each real task is its own process
    and reads the plan once (task.planned_group, task.planned_rounds); played
    in one process, the 32-64 tasks of a 1,024-node run each read and checked
    every node name of the whole plan, twice or more: quadratic in the fleet,
    40% of a scenario's CPU. The same function reads it (rundir.read_plan, as
    task_plan calls it); the file is not written while tasks run, and the
    cache is keyed by its path, size and mtime and dropped afterwards, so the
    analysis job reads the plan itself."""
    real = rundir.read_plan
    memo: dict[tuple, dict] = {}

    def read_plan(run_dir: str) -> dict:
        st = os.stat(rundir.plan_path(run_dir))
        key = (run_dir, st.st_size, st.st_mtime_ns)
        if key not in memo:
            memo[key] = real(run_dir)
        return memo[key]

    rundir.read_plan = read_plan
    try:
        yield
    finally:
        rundir.read_plan = real


def play(fabric: Fabric, seed: int, rails: bool = True, setup=None) -> RunResult:
    """Submit, measure, analyse, retest as the run does; returns the final
    state. `setup(fabric, group_rounds, rng)`: faults placed on the planned
    pairs (slow routes), before anything is measured."""
    tmp = scratch_dir()
    try:
        return _play(fabric, seed, rails, tmp, setup)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _play(fabric: Fabric, seed: int, rails: bool, tmp: str, setup) -> RunResult:
    rng = random.Random(seed)
    text = fabric.topology_text()
    map_path = None
    if text is not None:
        map_path = os.path.join(tmp, text[0])
        with open(map_path, "w") as fh:
            fh.write(text[1])
    config = site_config(os.path.join(tmp, "runs"), fabric, map_path, rails, seed)
    cfg = config["burnin"]
    topo = topology.from_config(cfg["topology"])
    jobs = Jobs()
    sub = runner.submit(config, jobs, list(fabric.nodes), None, None,
                        switch_of=topology.switch_of(topo) if topo is not None else None)
    run_dir = sub["run_dir"]
    plan = rundir.read_plan(run_dir)
    if setup is not None:
        setup(fabric, plan["group_rounds"], rng)
    ndead = max(fabric.dead_tasks, round(fabric.dead_share * len(plan["groups"])))
    dead = set(rng.sample(range(len(plan["groups"])), min(ndead, len(plan["groups"]) - 1)))
    with plan_read_once():
        for i in range(len(plan["groups"])):
            measure_task(fabric, cfg, run_dir, str(i), rng, dead=i in dead)
    first = [m for _p, res in rundir.read_results(run_dir)[0] for m in res["measurements"]]
    drained: dict[str, list[str]] = {}  # node -> the NICs named when it was drained
    stage, reruns, gpu_reruns, t0 = 0, 0, 0, time.process_time()
    while True:
        a = analysis_job(config, run_dir, topo, jobs, stage)
        for x in a.drain:
            drained.setdefault(x, list(a.nodes[x].get("failed_nics") or []))
        nxt = (a.retest or {}).get("next")
        if not nxt:
            break
        stage = nxt["round"]
        record = rundir.load_stage(run_dir, stage)
        reruns += sum(len(g) for g in record["groups"])
        gpu_reruns += len(record.get("gpu") or {})
        for i in range(len(record["groups"])):
            measure_task(fabric, cfg, run_dir, rundir.task_id(stage, i), rng)
    for x in jobs.reasons:  # drained in Slurm, whichever analysis did it
        drained.setdefault(x, [])
    return RunResult(a, drained, first, stage, reruns, time.process_time() - t0, fabric, gpu_reruns)


def analysis_job(config, run_dir: str, topo, jobs: Jobs, stage: int):
    """`burnin analyze RUN --follow-up STAGE` as commands/burnin.py _analyze
    runs it for a full run with a topology: judge, settle (which plans and
    records the next round), drain (runner.drain_failures). The store,
    analysis.json and metrics are left out."""
    plan, raw, _versions = runner.load_run(run_dir)
    switches = topology.switch_of(topo) if topo is not None else None
    early: list[str] = []
    # the run's earlier rounds and Slurm's node states (drained by this run or not)
    state = retest.round_state(run_dir, (lambda: jobs) if plan.get("max_retest_rounds") else None, switches,
                               plan["scope"], early, int(plan.get("max_retest_rounds") or 0))
    a = runner.judge(config, raw, plan["scope"], {}, topo, state)
    a.problems += early
    a.incomplete_tasks = [str(t) for t in runner.incomplete_tasks(run_dir)]
    a.retest = retest.settle(config, run_dir, plan, raw, a, stage, lambda: jobs, log=lambda _m: None, state=state)
    a.drain = runner.drain_failures(jobs, a, log=lambda _m: None)
    return a


# -- what a right answer is ----------------------------------------------------------

@dataclass
class Truth:
    healthy: set[str]
    must_fail: set[str]
    never_pass: set[str]
    must_nic: set[tuple[str, str]]
    slow_switches: set[str]
    must_switch: set[str]
    slow_links: set[tuple]          # (frozenset pair, rail)
    must_link: set[tuple]
    guard: bool | None              # True: must trip; False: must not; None: either
    faulty: set[str] = field(default_factory=set)   # a GPU/host/NIC fault (stragglers are not)
    must_gpu: set[tuple[str, int]] = field(default_factory=set)  # GPUs that must be drained, named (fail)
    clean: bool = False             # nothing wrong (stragglers aside): the run reports a clean fleet


def truth(fabric: Fabric, first: list[dict]) -> Truth:
    """From the fabric and the first round's valid pair measurements (who
    met whom, not what they read), before any analysis:

    - a healthy node (no GPU/host/NIC fault; spread and stragglers are
      healthy) is never drained, by any analysis of the run;
    - a deficit (one NIC, the network side, the GPU side) with clean
      evidence must drain its node: at least two partners measured with it
      on that key whose own side and path are healthy, and the factor, even
      3 sd high, below the drain margin that noise and fleet size require
      (sd = noise / sqrt(k // 2 + 1) over its k clean partners), or, with the
      two new partners each retest round gives it, 2 sd high below that
      margin at sd = noise / sqrt(k + 2 x rounds) (a node the rounds can
      decide must not end undecided); a NIC fault (not a slow network side)
      must be named in failed_nics. A node more than 2 noise sd below the
      line never passes, as far as any measurement can see it: a NIC (or
      the network side, on that rail) at or above its own rail leaf's
      level less 2 noise sd, the leaf itself slow, is masked on every path
      of that rail (a path is as fast as its slowest part: that node's
      pairs read what its healthy neighbours behind the leaf read, on the
      rail key and on the whole-node key) and does not count; such a node
      may pass, the leaf named and the node listed in
      behind_suspect_switch (its requalification after the switch repair
      tests it). One clearly below its leaf's level is seen, and never
      passes. A healthy node that straggles now and then may go either way;
    - a switch whose factor, even 3 sd high, is below the line must be
      named; a switch named that is not slow is wrong;
    - a slow route on a rail between two nodes that both have a clean
      partner elsewhere on that rail must be in suspect_links when it is
      clear at sd = noise / sqrt(3) (measured once in the first round and
      again in each of the two retest rounds, as the run's rounds re-measure
      a suspect link);
    - GPU tools (the whole-run family): a GPU 15% slow or slower on
      gpu_burn whose first round gave it a number must be drained, its
      GPU's `burn` verdict `fail` (issue 22 item 4: drained in >= 99% of
      fleets after the rounds, the first round's runs sized by the fleet's
      run-to-run noise, as the run sizes them); one more than 2 noise sd
      below the line never passes; a per-GPU test of a GPU whose true
      factor on it is 1.0 never fails (judge(), whatever its node);
    - the guard must trip when more clear fails than max(2, 10% of the tested
      nodes), and must not when that many are slow at all."""
    sigma = max(fabric.noise, NOISE_FLOOR)
    pair_partners: dict[str, set[str]] = {x: set() for x in fabric.nodes}
    rail_partners: dict[tuple[str, str], set[str]] = {}
    for m in first:
        if not m["ok"] or len(m["nodes"]) != 2:
            continue
        a, b = m["nodes"]
        if m.get("rail"):
            rail_partners.setdefault((a, m["rail"]), set()).add(b)
            rail_partners.setdefault((b, m["rail"]), set()).add(a)
        else:
            pair_partners[a].add(b)
            pair_partners[b].add(a)
    tested = [x for x in fabric.nodes if pair_partners[x] or any(rail_partners.get((x, r)) for r in fabric.rails)]
    z_fleet = NORMAL.inv_cdf(1 - ALPHA / max(len(tested), 1))

    def clear(f: float, k: int) -> bool:
        """Decided by the first round's k clean partners, or by the run's
        rounds: each adds two new partners, so k + 2 x rounds at most."""
        sd = sigma / math.sqrt(k // 2 + 1)
        sd_all = sigma / math.sqrt(k + 2 * MAX_RETEST_ROUNDS)
        return (k >= 2 and f * (1 + 3 * sd) < THRESHOLD * (1 - z_fleet * sd)) or \
            (k >= 1 and f * (1 + 2 * sd_all) < THRESHOLD * (1 - z_fleet * sd_all))

    def clean_rail(x: str, q: str, r: str) -> bool:
        """q and the path to it are healthy on rail r (only x's end may be slow)."""
        f = fabric
        return f.end(q, r) == 1.0 and f.switch.get(f.leaf[(x, r)], 1.0) == 1.0 and \
            f.switch.get(f.leaf[(q, r)], 1.0) == 1.0 and (frozenset((x, q)), r) not in f.route and \
            q not in f.flaky and (f.su[x] == f.su[q] or (f.spine.get(r, 1.0) == 1.0 and
                                                         f.uplinks.get(f.leaf[(x, r)], 1.0) == 1.0 and
                                                         f.uplinks.get(f.leaf[(q, r)], 1.0) == 1.0))

    healthy = {x for x in fabric.nodes if fabric.healthy(x) and x not in fabric.flaky}  # a straggler: either
    must_fail, never_pass, must_nic = set(), set(), set()
    rails_measured = bool(rail_partners)
    for x in fabric.nodes:
        if x in healthy or fabric.healthy(x):
            continue
        ends = [seen_end(fabric, x, r, sigma) for r in fabric.rails]
        if not rails_measured and fabric.combine == "mean":
            ends = [sum(ends) / len(ends)]  # whole-node tests only, adaptive routing: the rails' mean
        worst = min([fabric.gpu.get(x, 1.0) if fabric.whole_node else 1.0] + ends)
        if worst < THRESHOLD - 2 * sigma or x not in tested:
            never_pass.add(x)
        for r in fabric.rails:
            e = fabric.end(x, r)
            if e == 1.0:
                continue
            clean = [q for q in rail_partners.get((x, r), ())
                     if clean_rail(x, q, r)] if rails_measured else \
                [q for q in pair_partners[x] if q in healthy and all(clean_rail(x, q, rr) for rr in fabric.rails)]
            seen = e if rails_measured or fabric.combine == "min" else 1.0
            if clear(seen, len(clean)):
                must_fail.add(x)
                if (x, r) in fabric.nic and fabric.host.get(x, 1.0) == 1.0 and rails_measured:
                    must_nic.add((x, r))
        g = fabric.gpu.get(x, 1.0)
        if g < 1.0:
            clean = [q for q in pair_partners[x] if q in healthy and q not in fabric.flaky
                     and all(clean_rail(x, q, r) for r in fabric.rails)]
            if clear(g, len(clean)):
                must_fail.add(x)
    gpu_tested = {(m["nodes"][0], m["gpu"]) for m in first
                  if "gpu" in m and m["test"] == "burn" and m["ok"] and m.get("value") is not None}
    must_gpu = set()
    for (x, g), f in fabric.gpu_slow.items():
        if f < THRESHOLD - 2 * max(fabric.gpu_noise, NOISE_FLOOR):
            never_pass.add(x)
        if f <= 0.85 + 1e-9 and (x, g) in gpu_tested:
            must_gpu.add((x, g))
            must_fail.add(x)
    # switches by the name the run's topology gives them (a topology.conf
    # switch per scalable unit stands for its rail leaves; none without one)
    nodes_under: dict[str, int] = {}
    for (x, _r), sw in fabric.leaf.items():
        if x in tested:
            nodes_under[sw] = nodes_under.get(sw, 0) + 1
    slow_sw = {fabric.named_as(s) for s, f in fabric.switch.items() if f < 1.0} - {None}
    # A spine plane slow on a rail: no topology names it; its rail's leaves
    # (whose uplinks read slow) may be named, none must be.
    slow_sw |= {fabric.named_as(sw) for (_x, r), sw in fabric.leaf.items() if r in fabric.spine} - {None}
    slow_sw |= {"spine"} if fabric.spine and fabric.topo_kind == "conf" else set()
    # A leaf's slow uplinks: that leaf may be named (never must: the plan's
    # pairs mostly stay inside a unit), and so may the leaves its slow
    # pairs lead to, where few pairs leave it (either end's uplinks).
    slow_sw |= {fabric.named_as(sw) for sw in fabric.uplinks} - {None}
    measured = {r for (_x, r) in rail_partners}
    unmeasured = set(fabric.rails) - measured if rails_measured else set()
    if unmeasured:
        # burnin.rails lists some rails: a leaf of another rail shows on the
        # whole-node pairs only, as a unit's slow leaf shows without per-rail
        # tests; its unit's leaves may be named with it.
        members: dict[str, frozenset] = {}
        for (x, _r), sw in fabric.leaf.items():
            members[sw] = members.get(sw, frozenset()) | {x}
        slow_members = {members[sw] for (_x, r), sw in fabric.leaf.items()
                        if r in unmeasured and fabric.switch.get(sw, 1.0) < 1.0}
        slow_sw |= {fabric.named_as(sw) for sw, m in members.items() if m in slow_members} - {None}
    if not rails_measured:
        # Whole-node pairs run over every rail leaf of both ends: which of
        # the leaves a unit's nodes share is slow they cannot tell. Those
        # leaves may be named with it.
        members: dict[str, frozenset] = {}
        for (x, _r), sw in fabric.leaf.items():
            members[sw] = members.get(sw, frozenset()) | {x}
        slow_members = {members[sw] for sw, f in {**fabric.switch, **fabric.uplinks}.items()
                        if f < 1.0 and sw in members} | \
            {members[sw] for (_x, r), sw in fabric.leaf.items() if r in fabric.spine}
        slow_sw |= {fabric.named_as(sw) for sw, m in members.items() if m in slow_members} - {None}

    def seen_switch(f: float) -> float:
        """A leaf's factor as the run sees it: whole-node tests only, with
        adaptive routing, one rail of R at f reads (R - 1 + f) / R."""
        return f if rails_measured or fabric.combine == "min" else 1 - (1 - f) / len(fabric.rails)

    # A switch is told slow against the healthy leaves of its rails: with
    # no tested node under any other healthy leaf there (dead tasks left
    # only its unit measured), it is that rail's whole level.
    rails_of: dict[str, set[str]] = {}
    for (_x, r), sw in fabric.leaf.items():
        rails_of.setdefault(sw, set()).add(r)
    compared: dict[str, int] = {}
    for (x, r), sw in fabric.leaf.items():
        if x in tested and fabric.switch.get(sw, 1.0) == 1.0:
            for s in fabric.switch:
                if s != sw and r in rails_of.get(s, ()):
                    compared[s] = compared.get(s, 0) + 1
    must_switch = {fabric.named_as(s) for s, f in fabric.switch.items()
                   if seen_switch(f) * (1 + 3 * sigma) < THRESHOLD and nodes_under.get(s, 0) >= 3
                   and compared.get(s, 0) >= 3 and not rails_of.get(s, set()) <= unmeasured} - {None}
    n_links = sum(len(v) for v in rail_partners.values()) // 2 + sum(len(v) for v in pair_partners.values()) // 2
    z_link = NORMAL.inv_cdf(1 - ALPHA / max(n_links, 1))
    sd_l = sigma / math.sqrt(1 + MAX_RETEST_ROUNDS)
    must_link = set()
    for (pair, r), v in fabric.route.items():
        a, b = sorted(pair)
        measured = b in rail_partners.get((a, r), ()) if rails_measured else b in pair_partners[a]
        elsewhere = all(any(clean_rail(x, q, r) and q != y for q in rail_partners.get((x, r), ()))
                        for x, y in ((a, b), (b, a))) if rails_measured else True
        if measured and elsewhere and fabric.end(a, r) == fabric.end(b, r) == 1.0 and \
                v * (1 + 3 * sd_l) < THRESHOLD * (1 - z_link * sd_l):
            must_link.add((pair, r))
    cap = max(2, int(0.1 * len(tested)))
    slow_any = set(fabric.nodes) - healthy
    # A spine plane, or a slow switch the run has no topology to know of,
    # slows many nodes' paths at once: the guard may hold the run.
    unseen = fabric.spine or any(f < 1.0 and fabric.named_as(sw) is None
                                 for sw, f in (*fabric.switch.items(), *fabric.uplinks.items()))
    guard = True if len(must_fail) > cap else False if len(slow_any) <= cap and not unseen else None
    clean = not (set(fabric.nodes) - healthy) and not fabric.switch and not fabric.route and not fabric.spine \
        and not fabric.uplinks
    return Truth(healthy, must_fail, never_pass, must_nic, slow_sw, must_switch, set(fabric.route), must_link, guard,
                 {x for x in fabric.nodes if not fabric.healthy(x)}, must_gpu, clean)


def fabric_factor(run: "RunResult", x: str, g: int, test: str) -> float:
    return run.fabric.gpu_factor(x, g, test) if run.fabric is not None else 1.0


def seen_end(fabric: Fabric, x: str, r: str, sigma: float) -> float:
    """Node x's end of rail r as measurements can see it: 1.0 when its own
    rail leaf is slow and the end is at or above the leaf's level less 2
    noise sd (masked: every path of that rail reads the leaf's level, as
    its healthy neighbours' do), else the end's level."""
    e = fabric.end(x, r)
    s = fabric.switch.get(fabric.leaf[(x, r)], 1.0)
    return 1.0 if e < 1.0 and s < 1.0 and e >= s * (1 - 2 * sigma) else e


def judge(t: Truth, run: RunResult, rails: bool = True) -> dict:
    a = run.analysis
    drained = set(run.drained)
    verdict = {x: v["verdict"] for x, v in a.nodes.items()}
    named = {(x, nic) for x, v in a.nodes.items() for nic in v.get("failed_nics") or []} | \
        {(x, nic) for x, nics in run.drained.items() for nic in nics}
    switches = set(a.suspect_switches)
    links_rail = {(frozenset(link[:2]), link[2]) for link in a.suspect_links if len(link) == 3}
    links_pair = {frozenset(link[:2]) for link in a.suspect_links}
    found_links = {k for k in t.must_link if (k in links_rail if rails else k[0] in links_pair)}
    true_pairs = {p for p, _r in t.slow_links}
    noise_links = [link for link in a.suspect_links if frozenset(link[:2]) not in true_pairs]
    false = drained & t.healthy
    why = []
    if false:
        why.append(f"healthy drained {sorted(false)[:6]}{'...' if len(false) > 6 else ''} ({len(false)})")
    if t.guard is True and (not a.guard_tripped or drained):
        why.append("guard should trip and drain nothing")
    if t.guard is False and a.guard_tripped:
        why.append("guard tripped")
    if t.guard is not True and not a.guard_tripped:
        if not t.must_fail <= drained:
            why.append(f"not drained {sorted(t.must_fail - drained)[:6]} "
                       f"({', '.join(sorted({verdict.get(x, '?') for x in t.must_fail - drained}))})")
        if not t.must_nic <= named:
            why.append(f"NIC not named {sorted(t.must_nic - named)[:4]}")
    passed = sorted(x for x in t.never_pass if verdict.get(x) == "pass")
    if passed:
        why.append(f"slow node passed {passed[:6]}")
    if not t.must_switch <= switches:
        why.append(f"switch not named {sorted(t.must_switch - switches)}")
    if switches - t.slow_switches:
        why.append(f"healthy switch named {sorted(switches - t.slow_switches)}")
    if found_links != t.must_link:
        why.append(f"link not found {[(sorted(p), r) for p, r in t.must_link - found_links][:3]}")
    gpu_verdict = {(x, int(g), test): e["verdict"] for x, v in a.nodes.items()
                   for g, tests in (v.get("gpus") or {}).items() for test, e in tests.items()}
    gpu_named = {(x, g) for (x, g) in t.must_gpu if gpu_verdict.get((x, g, "burn")) == "fail"}
    if t.guard is not True and not a.guard_tripped and gpu_named != t.must_gpu:
        why.append(f"GPU not named {sorted(t.must_gpu - gpu_named)[:4]}")
    bad_gpus = sorted((x, g, test) for (x, g, test), v in gpu_verdict.items()
                      if v == "fail" and fabric_factor(run, x, g, test) == 1.0)
    if bad_gpus:
        why.append(f"healthy GPU failed {bad_gpus[:4]} ({len(bad_gpus)})")
    if a.retest and not a.retest.get("final", True):
        why.append("run not decided")
    if t.clean:
        # nothing wrong: no node failed, no switch named, no guard or
        # slowdown (exit code 0, commands/burnin.py exit_code). Links named
        # by noise are counted in the noise links column, as everywhere.
        fails = sorted(x for x, v in verdict.items() if v == "fail")
        if fails and not false:
            why.append(f"node failed in a clean fleet {fails[:4]}")
        if a.guard_tripped or a.fleet_slowdown:
            why.append(f"clean fleet not reported clean:{' guard' if a.guard_tripped else ''}"
                       f"{' fleet slowdown' if a.fleet_slowdown else ''}")
    return {"right": not why, "why": why, "false": len(false), "nic_truth": len(t.must_nic),
            "gpu_truth": len(t.must_gpu), "gpu_found": len(gpu_named), "gpu_false": len(bad_gpus),
            "nic_found": len(t.must_nic & named), "sw_truth": len(t.must_switch),
            "sw_found": len(t.must_switch & switches), "link_truth": len(t.must_link),
            "link_found": len(found_links), "noise_links": len(noise_links), "rounds": run.rounds,
            "reruns": run.reruns, "gpu_reruns": run.gpu_reruns, "nodes": len(t.healthy) + len(set(a.nodes) - t.healthy),
            "slow": len(t.faulty), "slow_drained": len(drained & t.faulty),
            "open": sum(1 for x in t.healthy if verdict.get(x) in ("untested", "retest")), "healthy": len(t.healthy)}


# -- a family table ------------------------------------------------------------------

CONFIDENCE = 0.95  # the one-sided bound printed beside each family's share right


def lower_bound(right: int, runs: int, confidence: float = CONFIDENCE) -> float:
    """Clopper-Pearson one-sided lower bound on the share right: the smallest
    p under which `right` or more of `runs` would still be seen with chance
    1 - confidence. 100 of 100 right: 97.0%; it takes 299 of 299 for 99%."""
    if runs == 0 or right == 0:
        return 0.0
    if right == runs:
        return (1 - confidence) ** (1 / runs)

    def at_least(p: float) -> float:  # P(X >= right | runs, p)
        return sum(math.comb(runs, k) * p ** k * (1 - p) ** (runs - k) for k in range(right, runs + 1))

    lo, hi = 0.0, right / runs
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at_least(mid) < 1 - confidence else (lo, mid)
    return lo


def new_row() -> dict:
    return {"runs": 0, "right": 0, "false": 0, "nic_truth": 0, "nic_found": 0, "sw_truth": 0, "sw_found": 0,
            "link_truth": 0, "link_found": 0, "noise_links": 0, "rounds": 0, "max_rounds": 0, "reruns": 0,
            "node_total": 0, "links_target": False, "slow": 0, "slow_drained": 0, "cpu": 0.0, "open": 0, "healthy": 0,
            "gpu_truth": 0, "gpu_found": 0, "gpu_false": 0, "gpu_reruns": 0}


def add(row: dict, r: dict, links_target: bool) -> None:
    row["runs"] += 1
    for k in ("right", "false", "nic_truth", "nic_found", "sw_truth", "sw_found", "link_truth", "link_found",
              "noise_links", "rounds", "reruns", "slow", "slow_drained", "open", "healthy", "gpu_truth", "gpu_found",
              "gpu_false", "gpu_reruns"):
        row[k] += r[k]
    row["node_total"] += r["nodes"]
    row["max_rounds"] = max(row["max_rounds"], r["rounds"])
    row["links_target"] |= links_target


def table(rows: dict[str, dict], title: str) -> bool:
    """Print one line per family; True when every family meets its targets
    (the share right judged as measured; the bound beside it says how far
    that many scenarios support it)."""
    print(f"\n{title}")
    print("targets: >= 99% right, 0 healthy nodes drained, NIC named >= 95%, switch named >= 95%, "
          "GPU named >= 99% (GPU: GPUs 15% slow with a `fail` verdict; GPU rerun: nodes that ran their GPU tools "
          "again in the rounds), links found >= 95% at 5% noise (right >=: the one-sided "
          f"{CONFIDENCE:.0%} Clopper-Pearson lower bound; nodes rerun: node-jobs in retest rounds, share of the "
          "nodes; slow drained: nodes with any fault drained, clear or not; CPU/scen.: this process' CPU "
          "seconds per scenario, harness and analysis; healthy open: healthy nodes the final analysis leaves untested "
          "or retest, share of the healthy nodes: not a wrong answer, not in service either)")
    print(f"{'family':<24} {'scen.':>5} {'right':>7} {'right >=':>8} {'healthy drained':>15} {'NIC named':>10} "
          f"{'switch named':>12} {'GPU named':>9} {'links found':>11} {'noise links':>11} {'rounds avg/max':>14} "
          f"{'nodes rerun':>16} {'GPU rerun':>12} {'slow drained':>12} {'healthy open':>13} {'CPU/scen.':>9}")
    ok = True
    pct = lambda x: "-" if x is None else f"{x:.1%}"  # noqa: E731
    for name, f in rows.items():
        if not f["runs"]:
            continue
        right = f["right"] / f["runs"]
        nic = f["nic_found"] / f["nic_truth"] if f["nic_truth"] else None
        sw = f["sw_found"] / f["sw_truth"] if f["sw_truth"] else None
        link = f["link_found"] / f["link_truth"] if f["link_truth"] else None
        gpu = f["gpu_found"] / f["gpu_truth"] if f["gpu_truth"] else None
        met = right >= 0.99 and f["false"] == 0 and (nic is None or nic >= 0.95) and (sw is None or sw >= 0.95) \
            and (link is None or not f["links_target"] or link >= 0.95) and (gpu is None or gpu >= 0.99)
        ok &= met
        rerun = f"{f['reruns']} ({f['reruns'] / max(f['node_total'], 1):.1%})"
        print(f"{name:<24} {f['runs']:>5} {right:>7.1%} {lower_bound(f['right'], f['runs']):>8.1%} {f['false']:>15} "
              f"{pct(nic):>10} {pct(sw):>12} {pct(gpu):>9} {pct(link):>11} {f['noise_links']:>11} "
              f"{f['rounds'] / f['runs']:>9.2f}/{f['max_rounds']:<4} {rerun:>16} "
              f"{str(f['gpu_reruns']) + ' (' + format(f['gpu_reruns'] / max(f['node_total'], 1), '.1%') + ')':>12} "
              f"{pct(f['slow_drained'] / f['slow'] if f['slow'] else None):>12} "
              f"{str(f['open']) + ' (' + format(f['open'] / max(f['healthy'], 1), '.1%') + ')':>13} "
              f"{f['cpu'] / f['runs']:>8.2f}s  "
              f"{'MET' if met else 'MISSED'}")
    return ok


def noise_shape(rng: random.Random) -> str:
    return rng.choice(["gaussian", "student-t", "lognormal"])


def timing(n: int = 16384, rails: int = 8) -> tuple[float, float, int]:
    """(CPU s, wall s, measurements) of one analysis of `n` nodes x `rails`
    rails, whole-node and per-rail lines, with the fabric map, from the dicts
    a run's results hold (what the analysis job reads). A rail leaf is slow,
    1% of nodes have a NIC at 0.5."""
    rng = random.Random(n)
    f = rail_fabric(n, rails, 32)
    f.switch[f.leaf[(f.nodes[100], f.rails[2])]] = 0.8
    for x in rng.sample(f.nodes, n // 100):
        f.nic[(x, rng.choice(f.rails))] = 0.5
    tmp = tempfile.mkdtemp(prefix="sq-runsim-")
    try:
        map_path = os.path.join(tmp, "fabric.csv")
        with open(map_path, "w") as fh:
            fh.write(topology.write_csv(f.map_rows()))
        config = site_config(os.path.join(tmp, "runs"), f, map_path, True)
        topo = topology.from_config(map_path)
        sub = runner.submit(config, Jobs(), list(f.nodes), None, None, switch_of=topology.switch_of(topo))
        plan = rundir.read_plan(sub["run_dir"])
        # the tasks' lines from plan.json's groups and rounds (one read, not one per task)
        raw = [runner._measurement(d, "sim") for i, (g, rounds) in enumerate(zip(plan["groups"], plan["group_rounds"]))
               for d in task_lines(f, config["burnin"], str(i), g, rounds, rng)]
        best_cpu = best_wall = math.inf
        for _ in range(2):
            t0, c0 = time.perf_counter(), time.process_time()
            runner.judge(config, raw, plan["scope"], {}, topology.from_config(map_path))
            best_cpu, best_wall = min(best_cpu, time.process_time() - c0), min(best_wall, time.perf_counter() - t0)
        return best_cpu, best_wall, len(raw)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- families -------------------------------------------------------------------------

@dataclass
class Family:
    name: str
    build: object                   # (rng, i) -> (Fabric, rails measured, setup or None)
    links_target: bool = False      # links found >= 95% is a target here (5% noise)


def scenario(fam: Family, seed_base: int, seed: int) -> tuple[Fabric, bool, object]:
    """The scenario `seed` of a family's seed set starting at `seed_base`:
    its fleet size and rails follow its place in the set, the rest its seed."""
    return fam.build(random.Random(f"{fam.name}:{seed}"), seed - seed_base)


def replay(families: list[Family], name: str, seed_base: int, seed: int) -> tuple[Fabric, "RunResult"]:
    """One scenario of the named family played as the bench plays it (its
    fabric and run, every round from the run's own plan): what a test that
    pins a bench seed replays."""
    fam = next(f for f in families if f.name == name)
    fabric, rails, setup = scenario(fam, seed_base, seed)
    return fabric, play(fabric, seed, rails, setup)


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def run_families(families: list[Family], seeds: int, seed_base: int, title: str,
                 only: str | None = None, verbose: bool = False, pick: set[int] | None = None) -> bool:
    """`seeds` scenarios per family, seeds seed_base .. seed_base + seeds - 1
    (the same set in every family; `pick`: only those seeds of it, to replay
    a scenario the table listed). One process, no workers: the CPU per
    scenario is printed, and the load it ran under."""
    rows: dict[str, dict] = {}
    wrong: list[str] = []
    start, cpu0 = time.perf_counter(), time.process_time()
    chosen = [s for s in range(seed_base, seed_base + seeds) if pick is None or s in pick]
    print(f"{len(chosen)} scenario(s) per family, seeds {seed_base}..{seed_base + seeds - 1}"
          f"{' (picked ' + ', '.join(map(str, chosen)) + ')' if pick is not None else ''}; "
          f"load average {load_average()}", flush=True)
    for fam in families:
        if only and only not in fam.name:
            continue
        row = rows.setdefault(fam.name, new_row())
        for seed in chosen:
            c0 = time.process_time()
            fabric, rails, setup = scenario(fam, seed_base, seed)
            run = play(fabric, seed, rails, setup)
            t = truth(fabric, run.first)
            r = judge(t, run, rails)
            add(row, r, fam.links_target)
            row["cpu"] += time.process_time() - c0
            if not r["right"]:
                wrong.append(f"{fam.name}, seed {seed}, {len(fabric.nodes)} nodes x {len(fabric.rails)} rails "
                             f"({fabric.shape} {fabric.noise:.0%}, {fabric.combine}"
                             f"{'' if rails else ', whole-node only'}{'' if fabric.whole_node else ', per-rail only'}"
                             f"{'' if fabric.topo_kind == 'map' else ', topology ' + fabric.topo_kind}): "
                             f"{'; '.join(r['why'])}")
            if verbose:
                print(f"  {fam.name} seed {seed}: {'right' if r['right'] else 'WRONG'} "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)
        print(f"  ... {fam.name} done ({time.perf_counter() - start:.0f} s, {row['cpu']:.0f} s CPU; "
              f"load average {load_average()})", flush=True)
    ok = table(rows, title)
    print(f"{sum(r['runs'] for r in rows.values())} scenarios in {time.perf_counter() - start:.0f} s wall, "
          f"{time.process_time() - cpu0:.0f} s CPU; load average at the end {load_average()} "
          f"(replay one: --seed-base {seed_base} --scenarios {seeds} --pick SEED --family NAME)")
    for line in wrong:
        print("  wrong:", line)
    return ok


def add_family_options(ap) -> None:
    """The issue 22 families' options, the same in both benches."""
    ap.add_argument("--scenarios", "--new-seeds", dest="scenarios", type=int, default=10,
                    help="scenarios per issue 22 family (seeds --seed-base onwards; 100 for the documented sweep)")
    ap.add_argument("--pick", default=None,
                    help="comma-separated seeds of the set: replay only those scenarios (with the same "
                         "--seed-base and --scenarios, a listed failure is the same fleet)")


def picked(arg: str | None) -> set[int] | None:
    return None if arg is None else {int(x) for x in arg.split(",") if x.strip()}


def healthy_fleet(rng: random.Random, n: int, rails: int, noise: float = 0.02) -> Fabric:
    """A fleet as it comes: per-node spread, a noise shape, some transients
    and failed tests, NCCL rings or adaptive routing."""
    su = 8 if n <= 16 else 16 if n <= 128 else 32
    f = rail_fabric(n, rails, su)
    f.spread = {x: rng.uniform(0.985, 1.015) for x in f.nodes}
    f.shape = noise_shape(rng)
    f.noise = noise
    f.transient = rng.choice([0.0, 0.01, 0.02])
    f.failed = rng.choice([0.0, 0.005])
    f.combine = "min" if rng.random() < 0.8 else "mean"
    f.base_pair *= rng.uniform(0.9, 1.05)
    f.base_rail *= rng.uniform(0.95, 1.0)
    return f


def slow_nodes(f: Fabric, rng: random.Random, count: int, level: tuple[float, float],
               avoid: set[str] = frozenset()) -> list[str]:
    """`count` nodes slow on their GPU/host side or on every NIC (network side)."""
    chosen = rng.sample([x for x in f.nodes if x not in avoid], count)
    for x in chosen:
        (f.gpu if rng.random() < 0.5 else f.host)[x] = rng.uniform(*level)
    return chosen


def bad_nics(f: Fabric, rng: random.Random, count: int, level: tuple[float, float],
             avoid: set[str] = frozenset()) -> list[str]:
    chosen = rng.sample([x for x in f.nodes if x not in avoid], count)
    for x in chosen:
        f.nic[(x, rng.choice(f.rails))] = rng.uniform(*level)
    return chosen


def slow_routes(count: int, level: tuple[float, float], rails: bool = True):
    """A setup placing `count` slow routes on first-round pairs of healthy
    nodes under different scalable units (cross-spine), one rail each."""
    def setup(f: Fabric, group_rounds, rng: random.Random) -> None:
        pairs = [tuple(p) for g in group_rounds or [] for rnd in g for p in rnd]
        cross = [p for p in pairs if f.su[p[0]] != f.su[p[1]] and f.healthy(p[0]) and f.healthy(p[1])]
        used: set[str] = set()
        for a, b in rng.sample(cross, len(cross)):
            if len(f.route) == count:
                break
            if {a, b} & used:
                continue
            f.route[(frozenset((a, b)), rng.choice(f.rails))] = rng.uniform(*level)
            used |= {a, b}
        if not rails:
            f.combine = "min"  # whole-node tests only: a route shows on the pair when it gates the rings
    return setup
