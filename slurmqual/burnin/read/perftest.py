"""perftest (ib_write_bw, ib_read_bw, ib_send_bw) for the per-rail tests:
building the server and client commands, and reading their output.

One rail = one RDMA device (``mlx5_3``) on both nodes of a pair: the server
listens on node A, the client on node B connects to A and prints the
bandwidth. Each rail gets its own TCP port, so all rails of a pair (and all
pairs of a round) run at once. The number judged is "BW average" in Gb/s
(`--report_gbits`; MB/sec and MiB/sec outputs are converted: perftest's MB
is 2^20 bytes).

Reading is strict: output without a complete result table (a run killed
mid-row, a client that never connected, two tables that disagree) is a test
error, never a slow number.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

TITLES = {"RDMA_Write": "ib_write_bw", "RDMA_Read": "ib_read_bw", "Send": "ib_send_bw"}
_TITLE = re.compile(r"^\s*(RDMA_Write|RDMA_Read|Send)\b.*\bBW Test\s*$")
_DEVICE = re.compile(r"\bDevice\s*:\s*(\S+)")
_LINK = re.compile(r"^\s*Link type\s*:\s*(\S+)")
_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[([^\]]+)\]\s+BW average\[([^\]]+)\]")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s*$")
_RULE = re.compile(r"^\s*-{20,}\s*$")
_ERROR = re.compile(r"(Couldn't|Unable to|Failed to|failed to|ERROR|Error|error:|No such device|not found|"
                    r"Segmentation fault|Killed)")
# Gb/s per unit of the table
TO_GBPS = {"Gb/sec": 1.0, "MB/sec": 8 * 1048576 / 1e9, "MiB/sec": 8 * 1048576 / 1e9}
MAX_GBPS = 3200.0  # beyond any single NIC port (XDR is 800 Gb/s): an input error


@dataclass(frozen=True)
class Row:
    size: int
    iterations: int
    peak_gbps: float
    avg_gbps: float
    msg_rate_mpps: float


@dataclass
class PerftestResult:
    ok: bool
    test: str | None = None
    device: str | None = None
    link_type: str | None = None
    unit: str | None = None
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def gbps(self, size: int | None = None) -> tuple[int, float] | None:
        """(size, average Gb/s) at `size`, else at the largest size measured."""
        if not self.ok or not self.rows:
            return None
        row = next((r for r in self.rows if r.size == size), None) if size is not None else None
        row = row or max(self.rows, key=lambda r: r.size)
        return row.size, row.avg_gbps


def parse(text: str) -> PerftestResult:
    """One perftest log (server and client output may both be in it,
    one after the other or interleaved: identical rows count once)."""
    res = PerftestResult(ok=False)
    rows: dict[int, Row] = {}
    in_table = closed = False
    pending_partial: str | None = None
    errors: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"^\s*\d+:\s", "", line) if re.match(r"^\s*\d+: ", line) else line  # srun --label
        m = _TITLE.match(line)
        if m:
            res.test = res.test or TITLES[m.group(1)]
            continue
        m = _DEVICE.search(line)
        if m and res.device is None:
            res.device = m.group(1)
        m = _LINK.match(line)
        if m and res.link_type is None:
            res.link_type = m.group(1)
        m = _HEADER.match(line)
        if m:
            unit = m.group(2)
            if unit not in TO_GBPS:
                res.problems.append(f"unknown bandwidth unit {unit!r}")
                return res
            if res.unit and res.unit != unit:
                res.problems.append(f"two result tables in different units ({res.unit}, {unit})")
                return res
            res.unit, in_table, closed = unit, True, False
            continue
        if in_table:
            m = _ROW.match(line)
            if m:
                size, iters = int(m.group(1)), int(m.group(2))
                f = TO_GBPS[res.unit]
                row = Row(size, iters, float(m.group(3)) * f, float(m.group(4)) * f, float(m.group(5)))
                old = rows.get(size)
                if old is not None and abs(old.avg_gbps - row.avg_gbps) > 1e-6 * max(1.0, row.avg_gbps):
                    res.problems.append(f"two result tables disagree at {size} bytes "
                                        f"({old.avg_gbps:.2f} vs {row.avg_gbps:.2f} Gb/s)")
                    return res
                rows[size] = row
                pending_partial = None
                continue
            if _RULE.match(line):
                closed = bool(rows) or closed
                continue
            if re.match(r"^\s*\d+\s+\d+", line):
                pending_partial = line.strip()  # a row cut short (killed) unless a full one follows
                continue
        if _ERROR.search(line):
            errors.append(line.strip())
    res.rows = sorted(rows.values(), key=lambda r: r.size)
    if pending_partial is not None:
        res.problems.append(f"result row cut short: {pending_partial[:60]!r}")
    elif not res.rows:
        res.problems.append(errors[0][:200] if errors else "no result table (#bytes ... BW average)")
    elif not closed:
        res.problems.append("result table not closed (output cut short)")
    for r in res.rows:
        if r.avg_gbps > MAX_GBPS:
            res.problems.append(f"{r.avg_gbps:.0f} Gb/s at {r.size} bytes is beyond any NIC (> {MAX_GBPS:.0f})")
            break
    res.ok = not res.problems and bool(res.rows)
    return res


# -- commands ---------------------------------------------------------------------

def _base(cfg: dict, test: str, rail: str, index: int) -> list[str]:
    argv = [os.path.join(cfg["perftest_dir"], test), "-d", rail, "-p", str(cfg["rail_port"] + index),
            "--report_gbits", "-F", "-s", str(cfg["rail_bytes"]), "-D", str(cfg["rail_duration_s"]),
            "-q", str(cfg["rail_qps"])]
    if cfg.get("rail_use_cuda"):
        argv.append(f"--use_cuda={index}")
    return argv


def _step(cfg: dict, node: str, inner: list[str]) -> list[str]:
    """One process on `node` inside the job: an srun step that shares the
    node with the others (--overlap), or mpirun -np 1 -H node."""
    if cfg["launcher"] == "mpirun":
        return ["mpirun", "-np", "1", "-H", f"{node}:1", *inner]
    return ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
            f"--time={cfg['test_time_limit']}", *inner]


def server_argv(cfg: dict, rail: str, index: int, server: str, test: str = "ib_write_bw") -> list[str]:
    return _step(cfg, server, _base(cfg, test, rail, index))


def client_argv(cfg: dict, rail: str, index: int, server: str, client: str, test: str = "ib_write_bw") -> list[str]:
    return _step(cfg, client, [*_base(cfg, test, rail, index), server])
