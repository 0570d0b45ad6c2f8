"""The records every burn-in stage passes on, below all of them.

A measurement line (``Measurement``: a node pair, a group, one node's intra
test or a per-rail pair; ``GpuMeasurement``: one GPU's number), its
measurement key (``test:topology[:qualifier]``) and the judging parameters
(``Params``). The readers (read/) write them, the judge (judge/) reads them,
the run (run/) and the results (results/) pass them on: defined here, none of
those stages imports another upward for them (pairs.py and components.py
once took them from analyze.py, which imported those two).
"""

from __future__ import annotations

import gc
import math
import re
from dataclasses import dataclass

from ..names import _GOOD_NAMES, check_node_list

# Input sanity bound (not a judgement): 10 TB/s is beyond any NVLink or NIC generation.
MAX_BUSBW_GBPS = 10_000
# Input sanity bound (not a judgement):
# nccl-tests sizes are bytes per rank, 1 TiB is beyond any GPU.
MAX_SIZE_BYTES = 1 << 40
TOPOLOGIES = ("intra", "pair", "group")


def topology_of(count: int, rail: str | None = None) -> str:
    if rail is not None and count == 2:
        return "rail"
    return "intra" if count == 1 else "pair" if count == 2 else "group"


def make_key(test: str, topology: str, qualifier: str | None = None) -> str:
    """``all_reduce:pair``; intra keys carry the GPU model, rail keys the NIC
    (``ib_write_bw:rail:mlx5_3``: each rail its own fleet median)."""
    base = f"{test.removesuffix('_perf')}:{topology}"
    return f"{base}:{qualifier}" if topology in ("intra", "rail") and qualifier else base


def split_key(key: str) -> tuple[str, str, str | None]:
    """``test:topology[:qualifier]`` -> (test, topology, GPU model (intra) or NIC (rail) or None)."""
    test, _, rest = key.partition(":")
    topo, _, model = rest.partition(":")
    return test, topo, model or None


# Every field a measurement line may carry (task results add problems, log,
# error and the nccl alias; a retest round's tasks add retest: the round). Anything else is an error, not silently judged
# as something it is not (a per-rail line read as a node pair).
KNOWN_FIELDS = frozenset({"nodes", "busbw", "size", "test", "ok", "gpu_model", "nccl_version", "nccl", "task",
                          "round", "rail", "wrong", "problems", "log", "error", "retest"})
_RAIL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_GOOD_RAILS: set[str] = set()  # rail names seen valid (a run names its 8 NICs 200,000 times)


@dataclass(frozen=True)
class Measurement:
    nodes: tuple[str, ...]
    busbw: float
    size: int
    test: str
    ok: bool = True
    gpu_model: str | None = None
    nccl_version: str | None = None
    task: int | None = None
    round: int | None = None
    wrong: bool = False  # nccl-tests counted wrong results (#wrong): a test error that may be data corruption
    rail: str | None = None  # the NIC both ends used (per-rail perftest)

    @property
    def topology(self) -> str:
        return topology_of(len(self.nodes), self.rail)

    @property
    def kind(self) -> str:
        """``test:topology`` (without the GPU model or NIC)."""
        return make_key(self.test, self.topology)

    @property
    def key(self) -> str:
        """The measurement key that judges it (intra keys carry the GPU model, rail keys the NIC)."""
        return make_key(self.test, self.topology, self.rail if self.rail is not None else self.gpu_model)

    @classmethod
    def from_dict(cls, d: dict) -> "Measurement":
        """A measurement line, validated: bad input is a clear ValueError.
        (Plain type() checks and a cache of names already checked: 40,000
        lines are read in a fraction of a second.) A line with ``"gpu"`` is
        one GPU's number: a GpuMeasurement."""
        if "gpu" in d:
            return GpuMeasurement.from_dict(d)  # type: ignore[return-value]
        fast = _fast_pair(cls, d)
        if fast is not None:
            return fast
        if not KNOWN_FIELDS.issuperset(d):
            unknown = d.keys() - KNOWN_FIELDS
            raise ValueError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}: "
                             f"a measurement has {', '.join(sorted(KNOWN_FIELDS))}")
        nodes = d["nodes"]
        check_node_list(nodes)
        if len(nodes) > 1 and len(set(nodes)) != len(nodes):
            raise ValueError(f"'nodes' names a node twice: {nodes}")
        ok = d.get("ok", True)
        if ok is not True and ok is not False:
            raise ValueError("'ok' must be true or false")
        busbw = d.get("busbw")
        if ok:
            t = type(busbw)
            if (t is not float and t is not int) or not busbw >= 0 or math.isinf(busbw):
                raise ValueError("'busbw' must be a number >= 0")
            if busbw > MAX_BUSBW_GBPS:  # an absurd number is an input error, never a score or baseline
                raise ValueError(f"'busbw' {busbw:g} GB/s is beyond any real link (> {MAX_BUSBW_GBPS} GB/s)")
        size = d.get("size")
        if type(size) is not int or not 0 < size <= MAX_SIZE_BYTES:
            raise ValueError(f"'size' must be a positive integer of at most {MAX_SIZE_BYTES} bytes")
        test = d.get("test", "all_reduce")
        if type(test) is not str or not test or ":" in test:
            raise ValueError("'test' must be a test name (e.g. all_reduce)")
        model = d.get("gpu_model")
        if model is not None and type(model) is not str:
            raise ValueError("'gpu_model' must be a string or null")
        nccl = d.get("nccl_version", d.get("nccl"))
        if nccl is not None and type(nccl) is not str:
            raise ValueError("'nccl_version' must be a string or null")
        rail = d.get("rail")
        if rail is not None and (len(nodes) != 2 or type(rail) is not str or rail not in _GOOD_RAILS):
            if type(rail) is not str or not _RAIL_NAME.fullmatch(rail) or len(nodes) != 2:
                raise ValueError("'rail' must be an RDMA device name (mlx5_3) on a measurement of two nodes")
            _GOOD_RAILS.add(rail)
        task, rnd = d.get("task"), d.get("round")
        for name, v in (("task", task), ("round", rnd), ("retest", d.get("retest"))):  # retest: its retest round
            if v is not None and type(v) is not int and not (type(v) is str and v.isdigit()):
                raise ValueError(f"'{name}' must be an integer or null")
        wrong = d.get("wrong", False)
        if wrong is not True and wrong is not False:
            raise ValueError("'wrong' must be true or false")
        return cls(tuple(nodes), float(busbw) if ok else 0.0, size, test.removesuffix("_perf"), ok,
                   model.strip() or None if model else None, nccl,
                   int(task) if task is not None else None, int(rnd) if rnd is not None else None, wrong, rail)

    def to_dict(self) -> dict:
        out = {"nodes": list(self.nodes), "busbw": self.busbw if self.ok else None, "size": self.size,
               "test": self.test, "ok": self.ok}
        for name in ("gpu_model", "nccl_version", "task", "round", "rail"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.wrong:
            out["wrong"] = True
        return out


_new = object.__new__


def _fast_pair(cls, d: dict) -> "Measurement | None":
    """The common line (two nodes already seen valid, ok, a finite busbw, an
    int size, no task/round strings) with the same checks as from_dict, and
    without a frozen dataclass's per-field __setattr__: 237,568 lines of a
    16k x 8-rail run are most of them. Anything else (None) takes the full
    path, which raises the errors."""
    if cls is not Measurement or not KNOWN_FIELDS.issuperset(d):
        return None
    nodes = d.get("nodes")
    if type(nodes) is not list or len(nodes) != 2:
        return None
    a, b = nodes
    if type(a) is not str or type(b) is not str or a == b or a not in _GOOD_NAMES or b not in _GOOD_NAMES:
        return None
    busbw, size, test = d.get("busbw"), d.get("size"), d.get("test", "all_reduce")
    if d.get("ok", True) is not True or type(busbw) is not float or not 0 <= busbw <= MAX_BUSBW_GBPS \
            or type(size) is not int or not 0 < size <= MAX_SIZE_BYTES \
            or type(test) is not str or not test or ":" in test:
        return None  # (busbw <= MAX is False for nan and inf)
    model, rail, task, rnd = d.get("gpu_model"), d.get("rail"), d.get("task"), d.get("round")
    nccl = d.get("nccl_version", d.get("nccl"))
    retest, wrong = d.get("retest"), d.get("wrong", False)
    if (model is not None and type(model) is not str) or (nccl is not None and type(nccl) is not str) \
            or (rail is not None and (type(rail) is not str or rail not in _GOOD_RAILS)) \
            or (task is not None and type(task) is not int) or (rnd is not None and type(rnd) is not int) \
            or (retest is not None and type(retest) is not int) or (wrong is not True and wrong is not False):
        return None
    m = _new(cls)
    m.__dict__.update(nodes=(a, b), busbw=busbw, size=size, test=test.removesuffix("_perf"), ok=True,
                      gpu_model=model.strip() or None if model else None, nccl_version=nccl, task=task,
                      round=rnd, wrong=wrong, rail=rail)
    return m


def from_dicts(raw: list[dict]) -> list["Measurement | GpuMeasurement"]:
    """Every line of a run, validated (Measurement.from_dict), with the cyclic
    collector paused: 200,000 new objects beside the run's raw lines set off
    its full passes over both, which freed nothing and took as long as the
    checks (as in judge.analyze)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return [Measurement.from_dict(d) for d in raw]
    finally:
        if enabled:
            gc.enable()


@dataclass
class Params:
    threshold: float = 0.9
    reference_size: int = 8589934592
    guard_fraction: float = 0.1
    guard_min: int = 2
    baseline_drop: float = 0.1
    # Chance, per run and key, that noise alone drains a healthy node (or
    # reports a healthy link): sizes the margin below the line with the fleet.
    alpha: float = 0.01
    # Noise is never assumed smaller than this (tiny fleets, perfect stand-ins).
    noise_floor: float = 0.01
    # At most max(retest_min, retest_fraction x tested nodes) stay `retest`;
    # the least ambiguous others are decided by their best estimate.
    retest_fraction: float = 0.05
    retest_min: int = 2


MAX_VALUE = 1e7  # beyond any TFLOPS or GB/s a GPU reaches: an input error
GPU_FIELDS = ("nodes", "gpu", "test", "value", "unit", "errors", "ok", "gpu_model", "pci", "serial", "task",
              "round", "problems", "error", "log", "tool", "retest")


@dataclass(frozen=True)
class GpuMeasurement:
    """One GPU's number for one test (a line with ``"gpu": <index>``)."""
    nodes: tuple[str, ...]
    gpu: int
    test: str
    value: float | None
    unit: str
    errors: int | None = None
    ok: bool = True
    gpu_model: str | None = None
    pci: str | None = None
    serial: str | None = None
    task: int | None = None
    retest: int | None = None  # the retest round that measured it (None: the run's first round)

    @property
    def node(self) -> str:
        return self.nodes[0]

    @property
    def key(self) -> str:
        return f"{self.test}:gpu:{self.gpu_model}" if self.gpu_model else f"{self.test}:gpu"

    @classmethod
    def from_dict(cls, d: dict) -> "GpuMeasurement":
        fast = _fast_gpu(cls, d)
        if fast is not None:
            return fast
        nodes = d.get("nodes")
        if type(nodes) is not list or len(nodes) != 1:
            raise ValueError("a per-GPU measurement names exactly one node: 'nodes': [\"gpu001\"]")
        check_node_list(nodes)
        gpu = d.get("gpu")
        if type(gpu) is not int or not 0 <= gpu < 1024:
            raise ValueError("'gpu' must be the GPU's index (an integer 0-1023)")
        test = d.get("test")
        if type(test) is not str or not test or ":" in test:
            raise ValueError("'test' must be a test name (e.g. gemm)")
        ok = d.get("ok", True)
        if ok is not True and ok is not False:
            raise ValueError("'ok' must be true or false")
        value = d.get("value")
        if value is not None:
            if type(value) not in (int, float) or not 0 <= value <= MAX_VALUE or math.isinf(value):
                raise ValueError(f"'value' must be a number between 0 and {MAX_VALUE:g}")
            value = float(value)
        errors = d.get("errors")
        if errors is not None and (type(errors) is not int or errors < 0):
            raise ValueError("'errors' must be the tool's count of compare errors (an integer >= 0)")
        if ok and value is None and not errors:
            raise ValueError("'value' is required unless 'ok' is false or 'errors' > 0")
        unit = d.get("unit", "")
        strs = {}
        for name in ("unit", "gpu_model", "pci", "serial"):
            v = d.get(name)
            if v is not None and (type(v) is not str or len(v) > 200):
                raise ValueError(f"'{name}' must be a string")
            strs[name] = v.strip() or None if v else None
        task, retest = d.get("task"), d.get("retest")
        for name, v in (("task", task), ("retest", retest)):
            if v is not None and type(v) is not int and not (type(v) is str and v.isdigit()):
                raise ValueError(f"'{name}' must be an integer or null")
        return cls((nodes[0],), gpu, test, value, unit or "", errors, ok, strs["gpu_model"], strs["pci"],
                   strs["serial"], int(task) if task is not None else None, int(retest) if retest is not None else None)

    def to_dict(self) -> dict:
        out = {"nodes": list(self.nodes), "gpu": self.gpu, "test": self.test, "value": self.value,
               "unit": self.unit, "ok": self.ok}
        for name in ("errors", "gpu_model", "pci", "serial", "task", "retest"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    def label(self) -> str:
        """``GPU 3 (0000:9b:00.0)`` / ``GPU 3 (serial 1652...)``."""
        where = self.pci or (f"serial {self.serial}" if self.serial else None)
        return f"GPU {self.gpu}" + (f" ({where})" if where else "")


def _fast_gpu(cls, d: dict) -> "GpuMeasurement | None":
    """The common GPU line (one node already seen valid, ok, a finite value,
    int or absent task, retest and errors, short strings) with the same
    checks and the same record as GpuMeasurement.from_dict, without a
    frozen dataclass's per-field __setattr__: a 1,024-node run with 8 GPUs,
    two tools and several runs has 100,000-300,000 such lines, each read
    twice per analysis (runner.load_run, then judge). Anything else (None)
    takes the full path, which raises the errors."""
    if cls is not GpuMeasurement:
        return None
    nodes, gpu, test, value = d.get("nodes"), d.get("gpu"), d.get("test"), d.get("value")
    if type(nodes) is not list or len(nodes) != 1 or type(nodes[0]) is not str or nodes[0] not in _GOOD_NAMES \
            or type(gpu) is not int or not 0 <= gpu < 1024 or type(test) is not str or not test or ":" in test \
            or d.get("ok", True) is not True or type(value) is not float or not 0 <= value <= MAX_VALUE:
        return None  # (value <= MAX_VALUE is False for nan and inf)
    errors, unit, task, retest = d.get("errors"), d.get("unit", ""), d.get("task"), d.get("retest")
    if (errors is not None and (type(errors) is not int or errors < 0)) or type(unit) is not str or len(unit) > 200 \
            or (task is not None and type(task) is not int) or (retest is not None and type(retest) is not int):
        return None
    strs = []
    for name in ("gpu_model", "pci", "serial"):
        v = d.get(name)
        if v is None:
            strs.append(None)
        elif type(v) is not str or len(v) > 200:
            return None
        else:
            strs.append(v.strip() or None)
    m = _new(cls)
    m.__dict__.update(nodes=(nodes[0],), gpu=gpu, test=test, value=value, unit=unit, errors=errors, ok=True,
                      gpu_model=strs[0], pci=strs[1], serial=strs[2], task=task, retest=retest)
    return m
