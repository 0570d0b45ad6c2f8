"""ib_counters: port error counters below the configured limits. Rising symbol
errors and link downs mark a bad cable or transceiver before it fails outright."""

from __future__ import annotations

from ..probe import rdma
from ..result import CheckResult, Status

NAME = "ib_counters"


def judge(counters: dict[str, dict[str, int]], limits: dict[str, int]) -> CheckResult:
    bad, devices = [], []
    for port, values in sorted(counters.items()):
        over = [f"{k}={v} (limit {limits[k]})" for k, v in sorted(values.items()) if v > limits[k]]
        if over:
            bad.append(f"{port}: {', '.join(over)}")
            devices.append(port)
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad), devices)
    if not counters:
        return CheckResult(NAME, Status.NA, "no fabric ports")
    return CheckResult(NAME, Status.PASS, f"{len(counters)} ports within error limits")


def run(ctx) -> CheckResult:
    fs, limits = ctx.fs, ctx.config["checks"]["ib_counters"]["limits"]
    counters = {}
    for p in ctx.probe("ports", lambda: rdma.list_ports(fs, ctx.config["fabric"]["ignore"])):
        counters[p.name] = {k: fs.read_int(f"{p.base}/counters/{k}", 10) for k in limits}
    return judge(counters, limits)
