"""Prometheus metrics for node_exporter's textfile collector.

Written with prometheus_client's own exposition (`write_to_textfile` writes a
temp file and renames it, so node_exporter never reads half a file). The
library is imported lazily: the hooks call this only when a metrics dir is set.

Encoding of `slurmqual_check_status`: 0 pass/na/skip, 1 warn, 2 error, 3 fail.
"""

from __future__ import annotations

import os
import re

from .result import CheckResult

STATUS_VALUE = {"pass": 0, "na": 0, "skip": 0, "warn": 1, "error": 2, "fail": 3}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _file_name(prefix: str, name: str) -> str:
    # node_exporter only reads *.prom; one file per node (or run) so writers never race.
    return f"slurmqual_{prefix}_{_SAFE.sub('_', name)}.prom"


def write_node_metrics(directory: str, node: str, results: list[CheckResult], now: float) -> str:
    """Per-check status and the time of this run, for one node."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    reg = CollectorRegistry()
    status = Gauge("slurmqual_check_status", "slurmqual check status: 0 pass/na/skip, 1 warn, 2 error, 3 fail",
                   ["node", "check"], registry=reg)
    for r in results:
        status.labels(node=node, check=r.name).set(STATUS_VALUE[r.status.value])
    last = Gauge("slurmqual_check_last_run_timestamp_seconds", "Unix time of the last slurmqual check run",
                 ["node"], registry=reg)
    last.labels(node=node).set(now)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, _file_name("node", node))
    write_to_textfile(path, reg)
    return path


def write_burnin_metrics(directory: str, analysis: dict, now: float, test: str = "all_reduce") -> str:
    """Per-node busbw score and qualification from one burn-in analysis."""
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    reg = CollectorRegistry()
    busbw = Gauge("slurmqual_busbw_gbps", "Node's burn-in bus bandwidth score (GB/s)", ["node", "test"], registry=reg)
    qualified = Gauge("slurmqual_qualified", "1 if the node passed its last burn-in, else 0", ["node"], registry=reg)
    median = Gauge("slurmqual_fleet_median_busbw_gbps", "Fleet median bus bandwidth (GB/s)", ["test"], registry=reg)
    for node, v in sorted(analysis.get("nodes", {}).items()):
        if v.get("score") is not None:
            busbw.labels(node=node, test=test).set(v["score"])
        qualified.labels(node=node).set(1 if v.get("verdict") == "pass" else 0)
    for kind, value in sorted(analysis.get("median", {}).items()):
        if value is not None:
            median.labels(test=kind).set(value)
    last = Gauge("slurmqual_burnin_last_run_timestamp_seconds", "Unix time of the last burn-in analysis", registry=reg)
    last.set(now)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "slurmqual_burnin.prom")
    write_to_textfile(path, reg)
    return path
