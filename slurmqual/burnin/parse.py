"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf).

Handles every header generation seen in the wild: 2018 (`bytes N type op ...
res`), `error` columns, `#wrong` columns, with and without `redop`/`root`;
`N/A` values, exponent numbers, NCCL/MPI chatter between lines, Rank lines
with and without Group/Pid. A run is `ok` only when it is complete and valid;
anything else is a test error, never a bandwidth measurement.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_RANK = re.compile(r"^#\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+\d+")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_NCCL_VERSION = re.compile(r"(?:^NCCL version|compiled with NCCL)\s+([0-9][0-9.]*[0-9])")
_FAILURE = re.compile(r"(Test NCCL failure|NCCL failure|Test CUDA failure|Test failure|CUDA failure|"
                      r"NCCL WARN .*(?:failure|error)|Segmentation fault|Aborted|srun: error|"
                      r"mpirun noticed that process)", re.I)
_WRONG_COLS = ("#wrong", "error", "res")


@dataclass
class Row:
    size: int
    busbw: float | None
    busbw_inplace: float | None
    wrong: int | None


@dataclass
class Result:
    ok: bool
    problems: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    nccl_version: str | None = None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "problems": self.problems, "hosts": self.hosts,
                "rows": [{"size": r.size, "busbw": r.busbw, "busbw_inplace": r.busbw_inplace, "wrong": r.wrong}
                         for r in self.rows],
                "avg_busbw": self.avg_busbw}

    def busbw_at(self, size: int) -> float | None:
        for r in self.rows:
            if r.size == size:
                return r.busbw
        return None


def _num(tok: str) -> float | None:
    if tok.upper() == "N/A":
        return None
    v = float(tok)  # accepts 1.2e+03
    if math.isnan(v) or math.isinf(v):
        raise ValueError(tok)
    return v


class _Columns:
    """Where size, busbw (out/in place) and the wrong/error column sit."""

    def __init__(self, header: list[str]):
        self.n = len(header)
        self.size = 0
        busbw = [i for i, t in enumerate(header) if t == "busbw"]
        wrong = [i for i, t in enumerate(header) if t in _WRONG_COLS]
        if len(busbw) != 2:
            raise ValueError("header without out-of-place and in-place busbw")
        self.busbw, self.busbw_in = busbw
        self.wrong = wrong[:2]
        self.numeric = [i for i, t in enumerate(header) if t in ("time", "algbw", "busbw")]


def _header(line: str) -> list[str] | None:
    if not line.startswith("#"):
        return None
    toks = line[1:].split()
    if "busbw" in toks and "algbw" in toks and toks and toks[0] in ("size", "bytes"):
        return toks
    return None


def parse(text: str) -> Result:
    res = Result(ok=False)
    cols: _Columns | None = None
    oob = None
    failures: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        m = _RANK.match(stripped)
        if m:
            if m.group(1) not in res.hosts:
                res.hosts.append(m.group(1))
            continue
        m = _NCCL_VERSION.search(stripped)
        if m and res.nccl_version is None:
            res.nccl_version = m.group(1)
        hdr = _header(stripped)
        if hdr is not None:
            try:
                cols = _Columns(hdr)
            except ValueError as exc:
                res.problems.append(f"unrecognised table header: {exc}")
            continue
        m = _AVG.match(stripped)
        if m:
            try:
                res.avg_busbw = _num(m.group(1))
            except ValueError:
                res.problems.append(f"unreadable average bus bandwidth {m.group(1)!r}")
            continue
        m = _OOB.match(stripped)
        if m:
            oob = (int(m.group(1)), m.group(2))
            continue
        if stripped.startswith("#"):
            continue
        if _FAILURE.search(stripped):
            failures.append(stripped[:160])
            continue
        toks = stripped.split()
        if cols is None or not toks[0].isdigit():
            continue  # NCCL INFO / MPI chatter
        if len(toks) != cols.n:
            res.problems.append(f"truncated or malformed row: {stripped[:80]!r}")
            continue
        try:
            for i in cols.numeric:
                _num(toks[i])
            wrong_vals = [_num(toks[i]) for i in cols.wrong]
            known = [int(w) for w in wrong_vals if w is not None]
            res.rows.append(Row(int(toks[0]), _num(toks[cols.busbw]), _num(toks[cols.busbw_in]),
                                max(known) if known else None))
        except ValueError:
            res.problems.append(f"unreadable numbers in row: {stripped[:80]!r}")
    if cols is None:
        res.problems.append("no results table header")
    elif not res.rows:
        res.problems.append("no result rows")
    bad = [r.size for r in res.rows if r.wrong]
    if bad:
        res.problems.append(f"wrong results (#wrong > 0) at sizes {', '.join(map(str, bad[:5]))}")
    res.problems.extend(f"failure: {f}" for f in failures[:5])
    if oob is None:
        res.problems.append("incomplete run: no '# Out of bounds values' summary")
    elif oob[1] != "OK" or oob[0]:
        res.problems.append(f"out of bounds values: {oob[0]} {oob[1]}")
    if res.avg_busbw is None and not any("average" in p for p in res.problems):
        res.problems.append("incomplete run: no '# Avg bus bandwidth' summary")
    res.ok = not res.problems
    return res
