"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
alltoall_perf, sendrecv_perf, ...), as text or as the JSON file of `-J`.

Text: every header generation seen in the wild: 2018 (`bytes N type op ...
res`), `error` columns, `#wrong` columns, with and without `redop`/`root`;
alltoall before nccl-tests 2.13 (an empty redop cell); `-C 1` (cputime),
`-S 1` (a two-word timestamp cell) and `-I 1` (per-iteration columns): the
header names the columns, rows are mapped through it, never by fixed
positions. Lines may carry a launcher prefix (`mpirun --tag-output`:
`[1,0]<stdout>:`, `srun --label`: ` 0: `), mixed with unprefixed ones. `N/A`
values, exponent numbers, NCCL/MPI chatter between lines, Rank lines with and
without Group/Pid (the device name after the PCI id is the GPU model).

JSON (nccl-tests 2.17.x on, late 2025): the document `-J FILE.json` writes
(format version 1-3, src/util.cu); the text log still judges crashes that
the JSON cannot show.

A run is `ok` only when it is complete and valid; anything else (truncated,
aborted, wrong results) is a test error, never a bandwidth measurement.

Work is bounded: lines are cut at MAX_LINE characters before any pattern
sees them, every pattern is anchored with bounded repeats, and files are read
line by line (bytes decoded with replacement), so a 1 MB line or a huge log
costs linear time.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import IO, Iterable, Iterator

from ..records import MAX_BUSBW_GBPS  # the input sanity bound on any busbw (records.py)

MAX_LINE = 4096            # characters of a line the parser looks at
MAX_FILE = 256 << 20       # bytes of a log the parser reads at most
MAX_JSON = 64 << 20        # bytes of a -J document
# What one GPU of a model can move at most, GB/s: its NVLink bandwidth, both
# directions summed (a rank's busbw never exceeds it, NVLS/SHARP included).
# A row above it is a broken number, never a fast node. Unknown models: MAX_BUSBW_GBPS.
_GPU_MAX_BUSBW_GBPS = (("GB300", 1800), ("GB200", 1800), ("B300", 1800), ("B200", 1800), ("B100", 1800),
                       ("GH200", 900), ("H200", 900), ("H100", 900), ("H800", 400), ("H20", 900),
                       ("A100", 600), ("A800", 400), ("V100", 300), ("P100", 160))
_MODEL_TOKEN = re.compile(r"[A-Z]{1,3}\d{2,4}")

# `[1,0]<stdout>:` (Open MPI --tag-output; jobid,rank) / ` 0: ` (srun --label).
_PREFIX = re.compile(r"^\[\d{1,9},\d{1,9}\]<(?:stdout|stderr)>: ?|^ {0,8}\d{1,7}: ")
_RANK = re.compile(r"^#\s{0,8}Rank\s{1,8}\d{1,9}\s{1,8}(?:Group\s{1,8}\d{1,9}\s{1,8})?(?:Pid\s{1,8}\d{1,12}\s{1,8})?"
                   r"on\s{1,16}(\S{1,255})\s{1,8}device\s{1,8}\d{1,4}(?:\s{1,8}\[[^\]]{0,64}\])?\s{0,8}(.{0,200})$")
_AVG = re.compile(r"^#?\s{0,8}Avg bus bandwidth\s{0,8}:\s{0,8}(\S{1,64})")
_OOB = re.compile(r"^#?\s{0,8}Out of bounds values\s{0,8}:\s{0,8}(\d{1,20})\s{1,8}(OK|FAILED)")
_NCCL_VERSION = re.compile(r"(?:^NCCL version|compiled with NCCL)\s{1,8}(\d{1,3}(?:\.\d{1,4}){0,3})")
_LIBRARY_CODE = re.compile(r"^#\s{0,8}nccl-tests version\s{1,8}\S{1,32}.{0,64}?\bnccl-library=(\d{4,6})\b")
_STARTING = re.compile(r"^#\s{0,8}Collective test starting:\s{0,8}(\S{1,255})")
_CONCLUDED = re.compile(r"^#\s{0,8}Collective test concluded:")
_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")
_TIME = re.compile(r"^\d\d:\d\d:\d\d$")
_FAILURES = ("Test NCCL failure", "NCCL failure", "Test CUDA failure", "Test failure", "CUDA failure",
             "Segmentation fault", "Aborted", "srun: error", "mpirun noticed that process")
# `#wrong` counts wrong elements. The older `error`/`res` columns hold the
# largest deviation, not a count; their verdict is the "Out of bounds" line,
# which counts the cells whose deviation is beyond the type's bound
# (nccl-tests' DeltaMaxValue: reductions of half/bfloat16 5e-2, float 1e-5,
# double 1e-12; integers and every copy-only collective 1e-200, i.e. any).
# When that line says FAILED, those rows are the wrong ones.
_WRONG_COLS = ("#wrong",)
_DELTA_COLS = ("error", "res")
_DELTA_BOUND = {"half": 5e-2, "float16": 5e-2, "bfloat16": 5e-2, "float": 1e-5, "float32": 1e-5,
                "double": 1e-12, "float64": 1e-12}
_DELTA_INT = ("int8", "uint8", "char", "int", "int32", "uint32", "int64", "uint64")
_TIME_COLS = ("time", "cputime")


@dataclass
class Row:
    size: int
    busbw: float | None
    busbw_inplace: float | None
    wrong: int | None
    over: int = field(default=0, compare=False, repr=False)  # older `error` cells beyond the type's bound


def _delta_bound(dtype: str | None, op: str | None) -> float:
    """The deviation nccl-tests tolerates for a row (DeltaMaxValue)."""
    if op in (None, "", "none") or (dtype or "").lower() in _DELTA_INT:
        return 1e-200  # copies and integers: any deviation is wrong
    return _DELTA_BOUND.get((dtype or "").lower(), 5e-2)  # an unknown float type: the loosest bound


@dataclass
class Result:
    ok: bool
    problems: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    nccl_version: str | None = None
    test: str | None = None                                  # "all_reduce", "alltoall", ...
    gpu_models: list[str] = field(default_factory=list)      # device names from the Rank lines
    source: str = "text"                                     # "text" or "json"

    def to_dict(self) -> dict:
        return {"ok": self.ok, "problems": self.problems, "hosts": self.hosts,
                "rows": [{"size": r.size, "busbw": r.busbw, "busbw_inplace": r.busbw_inplace, "wrong": r.wrong}
                         for r in self.rows],
                "avg_busbw": self.avg_busbw, "nccl_version": self.nccl_version, "test": self.test,
                "gpu_models": self.gpu_models}

    def busbw_at(self, size: int) -> float | None:
        for r in self.rows:
            if r.size == size:
                return r.busbw
        return None


def max_busbw_gbps(gpu_models: Iterable[str]) -> float:
    """The most busbw the named GPUs could move (the largest over the models;
    MAX_BUSBW_GBPS when a model is unknown or none is named)."""
    bounds = []
    for model in gpu_models:
        tokens = set(_MODEL_TOKEN.findall(model.upper()))
        bound = next((gbps for name, gbps in _GPU_MAX_BUSBW_GBPS if name in tokens), None)
        if bound is None:
            return MAX_BUSBW_GBPS
        bounds.append(bound)
    return max(bounds, default=MAX_BUSBW_GBPS)


def _impossible_rows(res: Result) -> list[str]:
    """Rows whose busbw no hardware produces: negative, or over what the run's
    GPUs could move. (NaN and infinity are already unreadable numbers.)"""
    limit = max_busbw_gbps(res.gpu_models)
    out = []
    for r in res.rows:
        for v in (r.busbw, r.busbw_inplace):
            if v is not None and v < 0:
                out.append(f"negative busbw {v:g} GB/s at size {r.size}")
                break
            if v is not None and v > limit:
                models = ", ".join(res.gpu_models) or "any GPU"
                out.append(f"impossible busbw {v:g} GB/s at size {r.size} (over the {limit:g} GB/s {models} can move)")
                break
    return out[:5]


def _disagreeing_tables(tables: list[list[Row]]) -> str | None:
    """Several result tables in one log are one run printed twice (kept once)
    or several runs (which one measured the node? none: a test error)."""
    first = tables[0]
    for other in tables[1:]:
        if other == first:
            continue
        for a, b in zip(first, other):
            if a != b:
                return (f"{len(tables)} result tables in one log that disagree "
                        f"(size {a.size}: {a.busbw} vs {b.busbw} GB/s at size {b.size})")
        return f"{len(tables)} result tables in one log that disagree ({len(first)} vs {len(other)} rows)"
    return None


def collective_of(program: str) -> str | None:
    """`/opt/nccl-tests/build/all_reduce_perf_mpi` -> `all_reduce`."""
    base = os.path.basename(program.strip())
    for suffix in ("_mpi", ".exe"):
        base = base.removesuffix(suffix)
    if not base.endswith("_perf") or len(base) <= 5:
        return None
    return base.removesuffix("_perf")


def version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.27.3" (2.9 on: X*10000+Y*100+Z; before: X*1000+Y*100+Z)."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _num(tok: str) -> float | None:
    if tok.upper() == "N/A":
        return None
    v = float(tok)  # accepts 1.2e+03
    if math.isnan(v) or math.isinf(v):
        raise ValueError(tok)
    return v


def _int(tok: str) -> int:
    if not tok.lstrip("-").isdigit() or len(tok) > 21:
        raise ValueError(tok)
    return int(tok)


class _Columns:
    """The header's columns, and how a row's cells map onto them."""

    def __init__(self, header: list[str]):
        self.header = header
        busbw = [i for i, t in enumerate(header) if t == "busbw"]
        if len(busbw) != 2:
            raise ValueError("header without out-of-place and in-place busbw")
        self.has_redop = "redop" in header or "op" in header

    def cells(self, toks: list[str]) -> dict[int, str] | None:
        """Header index -> cell, or None when the row does not fit the header.
        A timestamp is two words; alltoall before 2.13 left its redop cell empty."""
        header = self.header
        width = len(header) + header.count("timestamp")
        skip = None
        if len(toks) == width - 1 and self.has_redop:
            skip = header.index("redop") if "redop" in header else header.index("op")
        elif len(toks) != width:
            return None
        out, j = {}, 0
        for i, name in enumerate(header):
            if i == skip:
                continue
            if name == "timestamp":
                if not (_DATE.match(toks[j]) and _TIME.match(toks[j + 1])):
                    return None
                out[i] = toks[j] + " " + toks[j + 1]
                j += 2
                continue
            out[i] = toks[j]
            j += 1
        return out

    def row(self, toks: list[str]) -> Row:
        cells = self.cells(toks)
        if cells is None:
            raise IndexError
        header = self.header
        size = _int(cells[0])
        nums: dict[str, list[float | None]] = {}
        dtype = op = None
        for i, name in enumerate(header):
            if i not in cells:
                continue
            if name in ("count", "N", "root"):
                _int(cells[i])
            elif name in ("type", "redop", "op"):
                if cells[i][:1].isdigit() or cells[i][:1] == "-":
                    raise ValueError(cells[i])  # a shifted row: a number where a word belongs
                if name == "type":
                    dtype = cells[i]
                else:
                    op = cells[i]
            elif name in _TIME_COLS or name in ("algbw", "busbw") or name in _WRONG_COLS or name in _DELTA_COLS:
                nums.setdefault("wrong" if name in _WRONG_COLS else name, []).append(_num(cells[i]))
        busbw = nums["busbw"]
        known = [int(w) for w in nums.get("wrong", []) if w is not None]
        bound = _delta_bound(dtype, op)
        over = sum(1 for name in _DELTA_COLS for d in nums.get(name, []) if d is not None and d > bound)
        return Row(size, busbw[0], busbw[1], max(known) if known else None, over)


def _header(line: str) -> list[str] | None:
    """The column header, with its `#` or without (pasted runs of 2020 lost it)."""
    toks = line.removeprefix("#").split()
    if toks and toks[0] in ("size", "bytes") and "busbw" in toks and "algbw" in toks:
        return toks
    return None


def _start_table(hdr: list[str], tables: list[list[Row]], res: Result) -> _Columns | None:
    """A table header, with or without its `#`: its columns, and a new table
    to fill; None, with the problem noted, when the columns are not ones we know
    (the rows that follow are then read by the previous header, if any)."""
    try:
        cols = _Columns(hdr)
    except ValueError as exc:
        res.problems.append(f"unrecognised table header: {exc}")
        return None
    tables.append([])
    return cols


def _average(token: str, res: Result) -> None:
    """'# Avg bus bandwidth : X' (or pasted without its `#`)."""
    try:
        res.avg_busbw = _num(token)
    except ValueError:
        res.problems.append(f"unreadable average bus bandwidth {token!r}")


def _strip_prefix(line: str) -> str:
    m = _PREFIX.match(line)
    return line[m.end():] if m else line


def _failure(line: str) -> bool:
    if any(f in line for f in _FAILURES):
        return True
    if "NCCL WARN" in line:
        low = line.lower()
        return "failure" in low or "error" in low
    return False


def parse_lines(lines: Iterable[str]) -> Result:
    """Judge nccl-tests text output given as lines (each cut at MAX_LINE)."""
    res = Result(ok=False)
    cols: _Columns | None = None
    oob = None
    started = concluded = False
    failures: list[str] = []
    tables: list[list[Row]] = []
    for raw in lines:
        stripped = _strip_prefix(raw[:MAX_LINE].strip()).strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            m = _RANK.match(stripped)
            if m:
                if m.group(1) not in res.hosts:
                    res.hosts.append(m.group(1))
                model = m.group(2).strip()
                if model and model != "..." and model not in res.gpu_models:
                    res.gpu_models.append(model)
                continue
            hdr = _header(stripped)
            if hdr is not None:
                cols = _start_table(hdr, tables, res) or cols
                continue
            m = _AVG.match(stripped)
            if m:
                _average(m.group(1), res)
                continue
            m = _OOB.match(stripped)
            if m:
                oob = (int(m.group(1)), m.group(2))
                continue
            m = _LIBRARY_CODE.match(stripped)
            if m:
                res.nccl_version = version_from_code(int(m.group(1)))
                continue
            m = _STARTING.match(stripped)
            if m:
                started = True
                res.test = res.test or collective_of(m.group(1))
                continue
            if _CONCLUDED.match(stripped):
                concluded = True
                continue
            m = _NCCL_VERSION.search(stripped)  # "# NCCL Tests compiled with NCCL 1.0"
            if m and res.nccl_version is None:
                res.nccl_version = m.group(1)
            continue
        m = _NCCL_VERSION.match(stripped)
        if m and res.nccl_version is None:  # "NCCL version 2.21.5+cuda12.4"
            res.nccl_version = m.group(1)
        hdr = _header(stripped)  # the table header and summary lines without their `#` (pasted runs)
        if hdr is not None:
            cols = _start_table(hdr, tables, res) or cols
            continue
        m = _OOB.match(stripped)
        if m:
            oob = (int(m.group(1)), m.group(2))
            continue
        m = _AVG.match(stripped)
        if m:
            _average(m.group(1), res)
            continue
        if _failure(stripped):
            failures.append(stripped[:160])
            continue
        toks = stripped.split()
        if cols is None or not toks[0].isdigit():
            continue  # NCCL INFO / MPI chatter
        try:
            tables[-1].append(cols.row(toks))
        except IndexError:
            res.problems.append(f"truncated or malformed row: {stripped[:80]!r}")
        except (ValueError, KeyError):
            res.problems.append(f"unreadable numbers in row: {stripped[:80]!r}")
    tables = [t for t in tables if t]
    res.rows = tables[0] if tables else []
    if cols is None:
        res.problems.append("no results table header")
    elif not res.rows:
        res.problems.append("no result rows")
    elif len(tables) > 1 and (clash := _disagreeing_tables(tables)):
        res.problems.append(clash)
    bad = [r.size for r in res.rows if r.wrong]
    if bad:
        res.problems.append(f"wrong results (#wrong > 0) at sizes {', '.join(map(str, bad[:5]))}")
    if oob is not None and (oob[1] != "OK" or oob[0]):
        over = [r for r in res.rows if r.wrong is None and r.over]
        for r in over:  # the older `error` column: the cells the Out of bounds count counted
            r.wrong = r.over
        if over:
            res.problems.append("wrong results (`error` beyond the type's bound, Out of bounds FAILED) at sizes "
                                + ", ".join(str(r.size) for r in over[:5]))
    res.problems.extend(_impossible_rows(res))
    res.problems.extend(f"failure: {f}" for f in failures[:5])
    if oob is None:
        res.problems.append("incomplete run: no '# Out of bounds values' summary")
    elif oob[1] != "OK" or oob[0]:
        res.problems.append(f"out of bounds values: {oob[0]} {oob[1]}")
    if res.avg_busbw is None and not any("average" in p for p in res.problems):
        res.problems.append("incomplete run: no '# Avg bus bandwidth' summary")
    if started and not concluded and oob is not None:
        res.problems.append("incomplete run: no '# Collective test concluded' line")
    res.ok = not res.problems
    return res


def parse(text: str) -> Result:
    """Judge nccl-tests text output."""
    return parse_lines(text.splitlines())


def _capped_lines(fh: IO[bytes], limit: int) -> Iterator[str]:
    """Lines of a binary file, each cut at MAX_LINE characters (the rest of an
    over-long line is skipped without being kept), at most `limit` bytes."""
    read = 0
    while read < limit:
        chunk = fh.readline(MAX_LINE * 4)
        if not chunk:
            return
        read += len(chunk)
        if not chunk.endswith(b"\n"):
            while read < limit:  # drop the rest of an over-long line
                more = fh.readline(1 << 16)
                read += len(more)
                if not more or more.endswith(b"\n"):
                    break
        yield chunk.decode("utf-8", errors="replace")


def parse_file(path: str) -> Result:
    """Judge a log file; raises OSError when it cannot be read or is not a
    regular file (a FIFO planted as a task's log must not hang the analysis)."""
    from ...fsroot import open_regular_fd

    with os.fdopen(open_regular_fd(path), "rb") as fh:
        res = parse_lines(_capped_lines(fh, MAX_FILE))
        if fh.read(1):
            res.problems.append(f"log larger than {MAX_FILE >> 20} MiB: read only its start")
            res.ok = False
    return res


# -- JSON (-J) ------------------------------------------------------------------

def _bool(v) -> bool | None:
    """nccl-tests writes its booleans as the strings "true"/"false"."""
    if isinstance(v, bool):
        return v
    if v in ("true", "false"):
        return v == "true"
    return None


def _float(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(repr(v)[:40])
    if math.isnan(v) or math.isinf(v):
        raise ValueError(repr(v))
    return float(v)


def parse_json(text: str) -> Result:
    """Judge the JSON document nccl-tests writes with `-J FILE.json`."""
    res = Result(ok=False, source="json")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        res.problems.append(f"incomplete or invalid JSON output ({str(exc)[:80]}): the run did not finish")
        return res
    if not isinstance(doc, dict):
        res.problems.append("JSON output is not an object")
        return res
    args = doc.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str):
        res.test = collective_of(args[0])
    code = doc.get("nccl_version")
    if isinstance(code, int) and not isinstance(code, bool) and code > 0:
        res.nccl_version = version_from_code(code)
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    devices = config.get("devices", doc.get("devices"))
    for dev in devices if isinstance(devices, list) else []:
        if not isinstance(dev, dict):
            continue
        host, model = dev.get("hostname"), dev.get("device_info")
        if isinstance(host, str) and host and host not in res.hosts:
            res.hosts.append(host[:255])
        if isinstance(model, str) and model.strip() and model.strip() not in res.gpu_models:
            res.gpu_models.append(model.strip()[:200])
    results = doc.get("results")
    if not isinstance(results, list):
        res.problems.append("no results in JSON output")
        results = []
    for entry in results:
        try:
            size = entry["size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError(repr(size)[:40])
            oop, inp = entry.get("out_of_place"), entry.get("in_place")
            busbw = _float(oop["bus_bw"]) if isinstance(oop, dict) else None
            busbw_in = _float(inp["bus_bw"]) if isinstance(inp, dict) else None
            wrong = [w for w in ((oop or {}).get("nwrong"), (inp or {}).get("nwrong")) if w is not None]
            known = [int(_float(w)) for w in wrong]
            res.rows.append(Row(size, busbw, busbw_in, max(known) if known else None))
        except (TypeError, KeyError, ValueError, AttributeError):
            res.problems.append(f"unreadable result in JSON output: {json.dumps(entry)[:80]}")
    if results and not res.rows:
        res.problems.append("no result rows")
    elif not results and "no results in JSON output" not in res.problems:
        res.problems.append("no result rows")
    bad = [r.size for r in res.rows if r.wrong]
    if bad:
        res.problems.append(f"wrong results (#wrong > 0) at sizes {', '.join(map(str, bad[:5]))}")
    res.problems.extend(_impossible_rows(res))
    oob = doc.get("out_of_bounds")
    if not isinstance(oob, dict):
        res.problems.append("incomplete run: no out_of_bounds summary")
    elif _bool(oob.get("okay")) is not True or oob.get("count") not in (0, None):
        res.problems.append(f"out of bounds values: {oob.get('count')} FAILED")
    avg = doc.get("average_bus_bandwidth")
    try:
        res.avg_busbw = _float(avg["bandwidth"]) if isinstance(avg, dict) else None
    except (KeyError, ValueError):
        res.problems.append("unreadable average bus bandwidth in JSON output")
    if res.avg_busbw is None and not any("average" in p for p in res.problems):
        res.problems.append("incomplete run: no average_bus_bandwidth summary")
    if isinstance(avg, dict) and _bool(avg.get("okay")) is False:
        res.problems.append("average bus bandwidth below NCCL_TESTS_MIN_BW")
    errors = [e for e in doc.get("errors", []) if isinstance(e, str) and e.strip()] \
        if isinstance(doc.get("errors"), list) else []
    res.problems.extend(f"failure: {e[:160]}" for e in errors[:5])
    res.ok = not res.problems
    return res


def parse_json_file(path: str) -> Result:
    with open(path, "rb") as fh:
        data = fh.read(MAX_JSON + 1)
    if len(data) > MAX_JSON:
        res = Result(ok=False, source="json")
        res.problems.append(f"JSON output larger than {MAX_JSON >> 20} MiB")
        return res
    return parse_json(data.decode("utf-8", errors="replace"))


def parse_run(log_path: str, json_path: str | None = None) -> Result:
    """One test run: its JSON document when there is one (better than scraping
    text), with the text log's crash lines still counted; else the text log."""
    text = parse_file(log_path)
    if not json_path or not os.path.exists(json_path):
        return text
    res = parse_json_file(json_path)
    res.hosts = res.hosts or text.hosts
    res.gpu_models = res.gpu_models or text.gpu_models
    res.test = res.test or text.test
    res.nccl_version = text.nccl_version or res.nccl_version  # the text line keeps the +cuda-less full version
    crashes = [p for p in text.problems if p.startswith("failure:") and p not in res.problems]
    if crashes:
        res.problems.extend(crashes)
        res.ok = False
    return res
