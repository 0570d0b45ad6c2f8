"""Parse the per-GPU burn-in tools' outputs into per-GPU readings.

- gpu_burn (wilicc/gpu-burn): `GPU N: NAME (UUID: ...)` lines, progress
  records `NN.N%  proc'd: C (X Gflop/s) - ...   errors: E - ...   temps: ...`
  (separated by carriage returns, or run together on one line when a log
  lost them), and the final `Tested N GPUs:` block (`GPU i: OK|FAULTY`).
  A GPU's score is the median of its readings over the second half of the
  run (warm-up and not-yet-reported zeros left out); its compare errors are
  the largest count it showed (negative counts too: the tool's int
  overflows) or 1 when the summary says FAULTY.
- dcgmproftester (NVIDIA DCGM, -t 1004 tensor load): `[Worker G:S[ ][1004]: ]
  TensorEngineActive: generated ???, dcgm ... (X gflops)[.]` lines, 2.x to
  4.x; the score is the median of the second half of the readings, in TFLOPS.
- nvbandwidth (NVIDIA): text matrices (`Running NAME.`, a description, the
  matrix, `SUM NAME X`) or the `-j` JSON document (v0.5 on). Per GPU:
  device_local_copy -> `hbm`, host_to_device_memcpy_ce -> `h2d`,
  device_to_host_memcpy_ce -> `d2h` (the PCIe path), device-to-device
  CE copies -> `nvlink` (median of the GPU's row and column); the SM
  (copy-kernel) testcases of a default run are their own tests (`hbm_sm`,
  `h2d_sm`, `d2h_sm`, `nvlink_sm`: a kernel copy is not a copy-engine copy,
  never compared with one). A matrix is named by its `Running` line, else by
  its SUM line, else by its description (pasted and `-t` runs often lack the
  `Running` line); it is complete at its SUM line or when the next testcase
  starts. A testcase nvbandwidth waives (device to device on one GPU) is not
  an error.

A run that is incomplete, aborted or unreadable carries `problems`: it is a
test error, never a slow verdict. Work is bounded like parse.py: the file is
read up to a cap and every line is cut before a pattern sees it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from statistics import median

MAX_LINE = 8192
MAX_BYTES = 64 << 20

TOOLS = ("gpu_burn", "dcgmproftester", "nvbandwidth")
# nvbandwidth testcase -> our test name
NVBANDWIDTH_TESTS = {"device_local_copy": "hbm", "host_to_device_memcpy_ce": "h2d",
                     "device_to_host_memcpy_ce": "d2h", "device_to_device_memcpy_write_ce": "nvlink",
                     "device_to_device_memcpy_read_ce": "nvlink",
                     "device_local_copy_sm": "hbm_sm", "host_to_device_memcpy_sm": "h2d_sm",
                     "device_to_host_memcpy_sm": "d2h_sm", "device_to_device_memcpy_write_sm": "nvlink_sm",
                     "device_to_device_memcpy_read_sm": "nvlink_sm"}
# A matrix without a `Running` or SUM line that names it: its description
# (`memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)`) -> the testcase.
# all_to_host/host_to_all print the same descriptions as device_to_host/
# host_to_device; a named matrix is never read from its description.
_NV_DESCRIPTIONS = (("local GPU(column)", "device_local_copy"),
                    ("CPU(row) -> GPU(column)", "host_to_device_memcpy"),
                    ("CPU(row) <- GPU(column)", "device_to_host_memcpy"),
                    ("GPU(row) -> CPU(column)", "device_to_host_memcpy"),
                    ("GPU(row) -> GPU(column)", "device_to_device_memcpy_read"),
                    ("GPU(row) <- GPU(column)", "device_to_device_memcpy_write"))
# tool -> the tests its burn-in run yields and their unit (gputask runs
# nvbandwidth with the CE testcases only; the SM ones come from other runs)
TOOL_TESTS = {"gpu_burn": {"burn": "TFLOPS"}, "dcgmproftester": {"gemm": "TFLOPS"},
              "nvbandwidth": {"hbm": "GB/s", "h2d": "GB/s", "d2h": "GB/s", "nvlink": "GB/s"}}
# every test a tool's output can give -> the tool (retest rounds rerun it)
TOOL_OF_TEST = {**{test: tool for tool, tests in TOOL_TESTS.items() for test in tests},
                **{test: "nvbandwidth" for test in NVBANDWIDTH_TESTS.values()}}


@dataclass
class GpuReading:
    gpu: int
    test: str
    value: float | None          # None: the GPU gave no usable number (a test error for it)
    unit: str
    errors: int | None = None    # compare errors the tool counted (None: the tool has none)
    gpu_model: str | None = None
    pci: str | None = None
    serial: str | None = None    # serial number, else the GPU UUID

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class GpuResult:
    tool: str | None
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    readings: list[GpuReading] = field(default_factory=list)
    version: str | None = None
    waived: list[str] = field(default_factory=list)  # tests the tool waived here (n/a: device to device on one GPU)

    def to_dict(self) -> dict:
        return {"tool": self.tool, "ok": self.ok, "problems": self.problems, "version": self.version,
                "readings": [r.to_dict() for r in self.readings], **({"waived": self.waived} if self.waived else {})}


def _lines(text: str) -> list[str]:
    """Lines split at \\n and \\r (gpu_burn rewrites its progress line), each cut."""
    return [ln[:MAX_LINE] for ln in re.split(r"\r\n|\r|\n", text)]


def _finite(tok: str) -> float:
    v = float(tok)
    if math.isnan(v) or math.isinf(v):
        raise ValueError(tok)
    return v


def _second_half(values: list[float]) -> list[float]:
    return values[len(values) // 2:] if len(values) > 1 else values


def detect(text: str) -> str | None:
    """Which tool wrote this output (None: none of ours; nccl-tests is parse.py's)."""
    head = text[:1 << 20]
    if "proc'd:" in head or re.search(r"^\s*Tested \d+ GPUs:", head, re.M):
        return "gpu_burn"
    if re.search(r"EngineActive: (?:generated|target)", head) or "dcgmproftester" in head[:4096]:
        return "dcgmproftester"
    if "nvbandwidth" in head[:4096] or _NV_RUNNING.search(head) or _NV_HEADER.search(head) or '"nvbandwidth"' in head:
        return "nvbandwidth"
    return None


def parse(text: str, tool: str | None = None) -> GpuResult:
    tool = tool or detect(text)
    if tool == "gpu_burn":
        return parse_gpu_burn(text)
    if tool == "dcgmproftester":
        return parse_dcgmproftester(text)
    if tool == "nvbandwidth":
        return parse_nvbandwidth(text)
    return GpuResult(None, problems=["not the output of gpu_burn, dcgmproftester or nvbandwidth"])


def parse_file(path: str, tool: str | None = None) -> GpuResult:
    """Raises OSError when the file cannot be read or is not a regular file."""
    from ...fsroot import read_regular

    data = read_regular(path, MAX_BYTES + 1)
    res = parse(data[:MAX_BYTES].decode("utf-8", "replace"), tool)
    if len(data) > MAX_BYTES:
        res.problems.append(f"output larger than {MAX_BYTES >> 20} MiB: read only its start")
        res.ok = False
    return res


# -- gpu_burn --------------------------------------------------------------------

_GB_DEVICE = re.compile(r"^GPU (\d{1,4}): (.{1,200}?) \(UUID: (GPU-[0-9a-fA-F-]{8,64})\)\s*$")
_GB_RECORD = re.compile(r"(\d{1,3}(?:\.\d{1,3})?)%\s{1,8}proc'd: (.{0,4000}?)\s{1,8}errors: (.{0,4000}?)\s{1,8}temps:")
_GB_PROC = re.compile(r"(-?\d{1,20}) \((-?[\d.]{1,20}) Gflop/s\)")
_GB_ERR = re.compile(r"(-?\d{1,20})\s{0,4}(\((?:WARNING|DIED)!\))?")
_GB_TESTED = re.compile(r"^\s*Tested (\d{1,4}) GPUs:\s*$")
_GB_VERDICT = re.compile(r"^\s*GPU (\d{1,4}): (OK|FAULTY)\s*$")
_GB_FAILURES = ("Couldn't init a GPU test", "Couldn't init CUDA", "Failure during compute",
                "No clients are alive", "No CUDA devices")
# gpu_burn 2026 prints `cuInit returned 0 (no error)` per GPU on healthy runs;
# only a non-zero CUresult is a failure
_GB_CUINIT_FAILED = re.compile(r"cuInit returned (?!0\b)-?\d{1,6}")


def parse_gpu_burn(text: str) -> GpuResult:
    res = GpuResult("gpu_burn")
    models: dict[int, tuple[str, str]] = {}
    gflops: dict[int, list[float]] = {}
    errors: dict[int, int] = {}
    died: set[int] = set()
    tested: int | None = None
    verdicts: dict[int, str] = {}
    width = None
    for line in _lines(text):
        s = line.strip()
        m = _GB_DEVICE.match(s)
        if m:
            models[int(m.group(1))] = (m.group(2).strip(), m.group(3))
            continue
        if any(f in s for f in _GB_FAILURES) or _GB_CUINIT_FAILED.search(s):
            res.problems.append(f"failure: {s[:160]}")
            continue
        m = _GB_TESTED.match(s)
        if m:
            tested = int(m.group(1))
            continue
        m = _GB_VERDICT.match(s)
        if m and tested is not None:
            verdicts[int(m.group(1))] = m.group(2)
            continue
        for rec in _GB_RECORD.finditer(line):
            procs = _GB_PROC.findall(rec.group(2))
            errs = _GB_ERR.findall(rec.group(3))
            if not procs or len(errs) != len(procs) or (width is not None and len(procs) != width):
                res.problems.append(f"unreadable progress record: {rec.group(0)[:80]!r}")
                continue
            width = len(procs)
            for i, ((count, rate), (err, note)) in enumerate(zip(procs, errs)):
                if int(count) < 0 or note == "(DIED!)":
                    died.add(i)
                gflops.setdefault(i, []).append(float(rate))
                errors[i] = max(errors.get(i, 0), abs(int(err)))
    if tested is None:
        res.problems.append("incomplete run: no 'Tested N GPUs' summary")
    elif len(verdicts) != tested:
        res.problems.append(f"incomplete run: the summary names {len(verdicts)} of {tested} GPUs")
    if not gflops:
        res.problems.append("no progress records (Gflop/s) in the output")
    for i in sorted(set(gflops) | set(verdicts)):
        errs = errors.get(i, 0)
        if verdicts.get(i) == "FAULTY":
            errs = max(errs, 1)
        model, uuid = models.get(i, (None, None))
        rates = [r for r in _second_half(gflops.get(i, [])) if r > 0]
        value = round(median(rates) / 1000.0, 3) if rates else None
        if i in died:
            res.problems.append(f"GPU {i}: its worker died (the tool lost it)")
            value = None
        elif value is None and not errs:
            res.problems.append(f"GPU {i}: no Gflop/s reading above 0 (it never computed)")
        res.readings.append(GpuReading(i, "burn", value, "TFLOPS", errs, model, None, uuid))
    res.ok = not res.problems
    return res


# -- dcgmproftester ----------------------------------------------------------------

_DP_LINE = re.compile(r"^(?:Worker (\d{1,4}):(\d{1,4}) ?\[(\d{1,5})\]: )?(\w{1,64}EngineActive): "
                      r"(?:generated|target) .{0,200}?\(([-+.\deE]{1,24}) gflops\)\.?\s*$")
_DP_NOGFLOPS = re.compile(r"^(?:Worker \d{1,4}:\d{1,4} ?\[\d{1,5}\]: )?\w{1,64}EngineActive: (?:generated|target)")
_DP_FAILURES = ("Error", "error:", "failed", "Failed", "Aborted", "Segmentation fault")


def parse_dcgmproftester(text: str) -> GpuResult:
    res = GpuResult("dcgmproftester")
    per: dict[int, list[float]] = {}
    slices: dict[int, set[int]] = {}
    unreadable = 0
    for line in _lines(text):
        s = line.strip()
        m = _DP_LINE.match(s)
        if m:
            try:
                v = _finite(m.group(5))
            except ValueError:
                unreadable += 1
                continue
            gpu = int(m.group(1)) if m.group(1) is not None else 0
            slices.setdefault(gpu, set()).add(int(m.group(2) or 0))
            per.setdefault(gpu, []).append(v)
            continue
        if _DP_NOGFLOPS.match(s):
            unreadable += 1
            continue
        if s.startswith(("Worker ", "terminate called")) and any(f in s for f in _DP_FAILURES):
            res.problems.append(f"failure: {s[:160]}")
    if not per:
        res.problems.append("no gflops readings (this dcgmproftester build or test prints none)"
                            if unreadable else "no dcgmproftester readings in the output")
    for gpu in sorted(per):
        if len(slices[gpu]) > 1:
            res.problems.append(f"GPU {gpu}: {len(slices[gpu])} MIG slices: not a whole-GPU measurement")
            res.readings.append(GpuReading(gpu, "gemm", None, "TFLOPS"))
            continue
        vals = [v for v in _second_half(per[gpu]) if v > 0]
        value = round(median(vals) / 1000.0, 3) if vals else None
        if value is None:
            res.problems.append(f"GPU {gpu}: no gflops reading above 0")
        res.readings.append(GpuReading(gpu, "gemm", value, "TFLOPS"))
    res.ok = not res.problems
    return res


# -- nvbandwidth ------------------------------------------------------------------

_NV_VERSION = re.compile(r"^nvbandwidth Version: (\S{1,32})")
_NV_DEVICE = re.compile(r"^Device (\d{1,4}): (.{1,200}?)(?: \(([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\))?\s*$")
_NV_RUNNING = re.compile(r"^(?:> ?)?Running (\w{1,100})\.$", re.M)  # `> `: a run pasted as a quote
_NV_HEADER = re.compile(r"^(?:memcpy|memory latency) (?:CE |SM )?.{0,60}\((?:GB/s|ns)\)\s*$", re.M)
_NV_SUM = re.compile(r"^SUM (\w{1,100}) (\S{1,32})$")
_NV_FAILURES = ("ASSERT", "Invalid value when checking", "CUDA_ERROR", "CUDA error", "Segmentation fault",
                "terminate called", "Aborted")


def _pci(domain: str, bus: str, dev: str) -> str:
    return f"{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.0"


def _cell(tok: str) -> float | None:
    return None if tok.upper() == "N/A" else _finite(tok)


def _per_gpu(test: str, matrix: list[list[float | None]]) -> dict[int, float]:
    """One number per GPU from a testcase matrix."""
    if not matrix:
        return {}
    rows, cols = len(matrix), max(len(r) for r in matrix)
    out: dict[int, float] = {}
    if test.removesuffix("_sm") in ("hbm", "h2d", "d2h"):
        if rows > 1 and cols == 1:  # a GPU per row
            return {i: r[0] for i, r in enumerate(matrix) if r and r[0] is not None}
        for j in range(cols):  # a GPU per column (the best CPU path when several rows)
            vals = [r[j] for r in matrix if j < len(r) and r[j] is not None]
            if vals:
                out[j] = max(vals)
        return out
    for g in range(max(rows, cols)):  # device to device: the GPU's row and its column
        vals = [v for v in (matrix[g] if g < rows else []) if v is not None]
        vals += [r[g] for i, r in enumerate(matrix) if i != g and g < len(r) and r[g] is not None]
        if vals:
            out[g] = median(vals)
    return out


def _described(header: str) -> str | None:
    """The testcase a matrix description names (`memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)`)."""
    for words, name in _NV_DESCRIPTIONS:
        if words in header:
            sm = " SM " in f" {header} "
            if name == "device_local_copy":
                return name + ("_sm" if sm else "")
            return name + ("_sm" if sm else "_ce")
    return None


def parse_nvbandwidth(text: str) -> GpuResult:
    if text.lstrip().startswith("{"):
        return parse_nvbandwidth_json(text)
    res = GpuResult("nvbandwidth")
    devices: dict[int, tuple[str, str | None]] = {}
    cases: dict[str, list[list[float | None]]] = {}
    current: str | None = None    # the testcase its `Running NAME.` line started
    unsummed = False              # a testcase started and no SUM line yet
    described: str | None = None  # the testcase the matrix description names (no Running line)
    matrix: list[list[float | None]] | None = None
    waived = False                # a `Waived:` line (the text names no testcase)
    width = 0                     # the most GPUs a matrix row covered

    def keep(name: str | None) -> None:
        if matrix and name and name not in cases:
            cases[name] = matrix

    for line in _lines(text):
        s = line.strip()
        if not s:
            continue
        m = _NV_VERSION.match(s)
        if m:
            res.version = m.group(1)
            continue
        m = _NV_DEVICE.match(s)
        if m:
            devices[int(m.group(1))] = (m.group(2).strip(), _pci(*m.group(3, 4, 5)) if m.group(3) else None)
            continue
        m = _NV_RUNNING.match(s)
        if m:
            keep(current or described)  # the next testcase started: the one before finished
            current, described, matrix, unsummed = m.group(1), None, None, True
            continue
        m = _NV_SUM.match(s)
        if m:
            name = m.group(1)
            if current is None or name == current:
                keep(name)
            # `SUM NAME_read1`: one matrix of a testcase that prints several
            current = current if current and name.startswith(current + "_") else None
            described, matrix, unsummed = None, None, False
            continue
        if s.startswith("Waived"):
            waived = True
            continue
        if any(f in s for f in _NV_FAILURES):
            where = current or described
            res.problems.append(f"failure{' in ' + where if where else ''}: {s[:160]}")
            continue
        if s.endswith("(GB/s)") or s.endswith("(ns)"):
            if current is None:
                keep(described)  # an unnamed matrix ended where the next one starts
                described = _described(s)
            matrix = []
            continue
        toks = s.split()
        if matrix is None or not toks[0].isdigit():
            continue
        if not matrix and all(t.isdigit() for t in toks) and len(toks) > 1 or (not matrix and toks == ["0"]):
            continue  # the column header row
        try:
            matrix.append([_cell(t) for t in toks[1:]])
            width = max(width, len(toks) - 1, int(toks[0]) + 1)
        except ValueError:
            res.problems.append(f"unreadable row in {current or described}: {s[:80]!r}")
    if unsummed or matrix:
        res.problems.append(f"incomplete run: {current or described or 'a matrix'} has no SUM line")
    if waived and (len(devices) == 1 if devices else width <= 1):
        # one GPU (its `Device 0:` line, else one-column matrices): nvbandwidth
        # waives its device-to-device testcases (`Waived:`, no name in text)
        res.waived = ["nvlink", "nvlink_sm"]
    _nv_readings(res, cases, devices)
    return res


def _nv_readings(res: GpuResult, cases: dict, devices: dict[int, tuple[str, str | None]]) -> None:
    wanted = {name: t for name, t in NVBANDWIDTH_TESTS.items() if name in cases}
    if not wanted and not res.problems:
        res.problems.append("no per-GPU testcase (device_local_copy[_sm], host_to_device_memcpy_ce/_sm, "
                            "device_to_host_memcpy_ce/_sm, device_to_device_memcpy_*_ce/_sm) in the output")
    done: set[str] = set()
    for name, test in wanted.items():
        if test in done:
            continue  # write and read copies both measure NVLink: the first one judges
        done.add(test)
        for gpu, v in sorted(_per_gpu(test, cases[name]).items()):
            model, pci = devices.get(gpu, (None, None))
            res.readings.append(GpuReading(gpu, test, round(v, 3), "GB/s", None, model, pci))
    res.ok = not res.problems


_NV_JSON_DEVICE = re.compile(r"^(\d{1,4}): (.{1,200}?)(?: \(([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\))?(?:: \(.*\))?$")


def parse_nvbandwidth_json(text: str) -> GpuResult:
    """The document `nvbandwidth -j` prints (json_output.cpp: matrices of strings, "N/A")."""
    res = GpuResult("nvbandwidth")
    try:
        doc = json.loads(text)
        body = doc["nvbandwidth"]
        if not isinstance(body, dict):
            raise TypeError("not an object")
    except (ValueError, KeyError, TypeError) as exc:
        res.problems.append(f"incomplete or invalid nvbandwidth JSON ({str(exc)[:80]})")
        return res
    res.version = str(body.get("version"))[:32] if body.get("version") else None
    if body.get("error"):
        res.problems.append(f"failure: {str(body['error'])[:160]}")
    devices: dict[int, tuple[str, str | None]] = {}
    for entry in body.get("GPU Device list") or []:
        m = _NV_JSON_DEVICE.match(str(entry)[:400])
        if m:
            devices[int(m.group(1))] = (m.group(2).strip(), _pci(*m.group(3, 4, 5)) if m.group(3) else None)
    cases = {}
    for case in body.get("testcases") or []:
        if not isinstance(case, dict) or case.get("name") not in NVBANDWIDTH_TESTS:
            continue
        if case.get("status") == "Waived":
            # nvbandwidth waives what the system cannot run (device to device on one GPU)
            if NVBANDWIDTH_TESTS[case["name"]] not in res.waived:
                res.waived.append(NVBANDWIDTH_TESTS[case["name"]])
            continue
        if case.get("status") != "Passed":
            res.problems.append(f"{case.get('name')}: {case.get('status')} {case.get('error', '')}".strip()[:160])
            continue
        try:
            cases[case["name"]] = [[_cell(str(c)) for c in row] for row in case["bandwidth_matrix"]]
        except (KeyError, TypeError, ValueError):
            res.problems.append(f"{case.get('name')}: unreadable bandwidth_matrix")
    _nv_readings(res, cases, devices)
    return res
