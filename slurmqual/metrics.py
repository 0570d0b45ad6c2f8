"""Prometheus metrics for node_exporter's textfile collector.

Written with prometheus_client's own exposition (`write_to_textfile` writes a
temp file and renames it, so node_exporter never reads half a file). The
library is imported lazily: the hooks call this only when a metrics dir is set.

Conventions (https://prometheus.io/docs/practices/naming/): base units
(`..._bytes_per_second`, `..._timestamp_seconds`), one label scheme: `test` is
the nccl-tests collective (`all_reduce`), `kind` says how a fleet median was
measured (`pair`, `intra`). One file per node (hooks: `slurmqual_node_<node>.prom`,
burn-in: `slurmqual_burnin_node_<node>.prom`), so a requalify of one node
rewrites only that node's file and never the fleet's; the fleet-wide median is
in `slurmqual_burnin.prom`, written by full runs only.

Encoding of `slurmqual_check_status`: 0 pass/na/skip, 1 warn, 2 error, 3 fail.
"""

from __future__ import annotations

import os
import re

from .result import CheckResult

STATUS_VALUE = {"pass": 0, "na": 0, "skip": 0, "warn": 1, "error": 2, "fail": 3}
GB = 1e9  # burn-in scores are GB/s (decimal, as nccl-tests prints them)
INFO_FIELDS = ("driver", "nic_fw", "kernel", "nccl")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _file_name(prefix: str, name: str) -> str:
    # node_exporter only reads *.prom; one file per node (or run) so writers never race.
    return f"slurmqual_{prefix}_{_SAFE.sub('_', name)}.prom"


def _write(directory: str, name: str, reg) -> str:
    from prometheus_client import write_to_textfile

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    write_to_textfile(path, reg)
    return path


def write_node_metrics(directory: str, node: str, results: list[CheckResult], now: float,
                       versions: dict | None = None, remediation: list[dict] | None = None) -> str:
    """Per-check status, the time of this run and the node's versions, for one
    node; with `remediation` (the node state's ladder history) the actions
    taken per kind and when the last one was."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    status = Gauge("slurmqual_check_status", "slurmqual check status: 0 pass/na/skip, 1 warn, 2 error, 3 fail",
                   ["node", "check"], registry=reg)
    for r in results:
        status.labels(node=node, check=r.name).set(STATUS_VALUE[r.status.value])
    last = Gauge("slurmqual_check_last_run_timestamp_seconds", "Unix time of the last slurmqual check run",
                 ["node"], registry=reg)
    last.labels(node=node).set(now)
    info = Gauge("slurmqual_node_info", "Versions a node runs (always 1; versions are labels, '' when unknown)",
                 ["node", *INFO_FIELDS], registry=reg)
    v = versions or {}
    info.labels(node=node, **{f: str(v.get(f) or "") for f in INFO_FIELDS}).set(1)
    if remediation is not None:
        actions = Gauge("slurmqual_remediation_actions", "Repair-ladder actions on the node in its kept history "
                        "(reset, reboot, escalate, rma, ...)", ["node", "action"], registry=reg)
        last = Gauge("slurmqual_remediation_last_action_timestamp_seconds",
                     "Unix time of the node's last repair-ladder action of this kind", ["node", "action"], registry=reg)
        counts: dict[str, int] = {}
        latest: dict[str, float] = {}
        for h in remediation:
            a = str(h.get("action", ""))
            counts[a] = counts.get(a, 0) + 1
            latest[a] = max(latest.get(a, 0.0), float(h.get("time", 0)))
        for a, n in counts.items():
            actions.labels(node=node, action=a).set(n)
            last.labels(node=node, action=a).set(latest[a])
    return _write(directory, _file_name("node", node), reg)


def _key_labels(key: str, default_test: str) -> dict[str, str]:
    """Labels of an analysis key: `<test>:<kind>[:<gpu model>]` (intra medians are
    per GPU model; pair keys have none); older runs' keys are just `<kind>`."""
    from .burnin.records import split_key

    if ":" not in key:
        return {"test": default_test, "kind": key, "gpu_model": ""}
    test, kind, model = split_key(key)
    return {"test": test, "kind": kind, "gpu_model": model or ""}


def _gpu_gauges(reg, node: str, gpus: dict) -> None:
    """Per-GPU scores of one node (analysis nodes.NODE.gpus): the raw score in
    the test's own unit, and the score against its key's fleet median."""
    from prometheus_client import Gauge

    labels = ["node", "gpu", "test", "gpu_model", "serial"]
    score = Gauge("slurmqual_burnin_gpu_score", "GPU's burn-in score for a test, in the test's unit (label unit)",
                  [*labels, "unit"], registry=reg)
    rel = Gauge("slurmqual_burnin_gpu_vs_median_ratio", "GPU's burn-in score / the fleet median of its test and model",
                labels, registry=reg)
    for g, tests in sorted(gpus.items(), key=lambda item: int(item[0])):
        for test, e in sorted(tests.items()):
            if e.get("score") is None:
                continue
            lab = {"node": node, "gpu": str(g), "test": test, "gpu_model": e.get("gpu_model") or "",
                   "serial": e.get("serial") or ""}
            score.labels(**lab, unit=e.get("unit") or "").set(float(e["score"]))
            if e.get("median"):
                rel.labels(**lab).set(float(e["score"]) / float(e["median"]))


def write_burnin_metrics(directory: str, analysis: dict, now: float, test: str = "all_reduce",
                         fleet: bool = True) -> list[str]:
    """One file per judged node (score, qualified, time); with fleet=True also
    the fleet medians. Returns the paths written."""
    from prometheus_client import CollectorRegistry, Gauge

    paths = []
    for node, v in sorted(analysis.get("nodes", {}).items()):
        reg = CollectorRegistry()
        busbw = Gauge("slurmqual_busbw_bytes_per_second", "Node's burn-in bus bandwidth score (the key that judged it)",
                      ["node", "test"], registry=reg)
        per_key = Gauge("slurmqual_busbw_key_bytes_per_second",
                        "Node's burn-in bus bandwidth score per measurement key (labels as the fleet median's)",
                        ["node", "test", "kind", "gpu_model"], registry=reg)
        qualified = Gauge("slurmqual_qualified", "1 if the node passed its last burn-in, else 0", ["node"],
                          registry=reg)
        when = Gauge("slurmqual_burnin_node_last_run_timestamp_seconds", "Unix time of the node's last burn-in verdict",
                     ["node"], registry=reg)
        if v.get("score") is not None:
            from .burnin.judge.analyze import median_for

            key, _median = median_for(analysis, node)  # the key (test) that judged this node
            busbw.labels(node=node, test=key.partition(":")[0] if key else test).set(float(v["score"]) * GB)
        for key, kv in sorted((v.get("keys") or {}).items()):
            if kv.get("score") is not None:  # e.g. alltoall next to all_reduce, intra next to pair
                per_key.labels(node=node, **_key_labels(key, test)).set(float(kv["score"]) * GB)
        if v.get("gpus"):
            _gpu_gauges(reg, node, v["gpus"])
        if v.get("failed_nics"):  # the part to replace: one NIC (rail) of the node
            nic = Gauge("slurmqual_burnin_nic_failed", "1 for each NIC (rail) whose per-rail test failed its node",
                        ["node", "nic"], registry=reg)
            for name in v["failed_nics"]:
                nic.labels(node=node, nic=name).set(1)
        qualified.labels(node=node).set(1 if v.get("verdict") == "pass" else 0)
        when.labels(node=node).set(now)
        paths.append(_write(directory, _file_name("burnin_node", node), reg))
    if fleet:
        reg = CollectorRegistry()
        median = Gauge("slurmqual_fleet_median_busbw_bytes_per_second", "Fleet median bus bandwidth of the last burn-in",
                       ["test", "kind", "gpu_model"], registry=reg)
        for key, value in sorted(analysis.get("median", {}).items()):
            if value is not None:
                median.labels(**_key_labels(key, test)).set(float(value) * GB)
        last = Gauge("slurmqual_burnin_last_run_timestamp_seconds", "Unix time of the last fleet burn-in analysis",
                     registry=reg)
        last.set(now)
        # The analysis's own judgements, which no threshold on the medians can rebuild:
        # the guard held every drain; the fleet fell below its nodes' own baselines.
        Gauge("slurmqual_burnin_guard_tripped", "1 if the last burn-in's blast-radius guard held all drains",
              registry=reg).set(1 if analysis.get("guard_tripped") else 0)
        Gauge("slurmqual_burnin_fleet_slowdown", "1 if the last burn-in found the fleet below its own baselines",
              registry=reg).set(1 if analysis.get("fleet_slowdown") else 0)
        Gauge("slurmqual_burnin_would_drain_nodes", "Nodes the last burn-in judged below the line (drained or held)",
              registry=reg).set(len(analysis.get("would_drain") or []))
        _component_gauges(reg, analysis)
        paths.append(_write(directory, "slurmqual_burnin.prom", reg))
    return paths


def _component_gauges(reg, analysis: dict) -> None:
    """The parts the last full run named besides nodes (components.suspect_parts):
    each suspect switch (its paths' factor against the fleet, the nodes behind
    it) and each suspect link or cable with its rail ('' on a pair key), and
    their counts (always present, 0 when none: what an alert watches)."""
    from prometheus_client import Gauge

    from .burnin.judge.components import suspect_parts

    parts = suspect_parts(analysis)
    Gauge("slurmqual_burnin_suspect_switches", "Switches the last burn-in found slow (none of their nodes drained)",
          registry=reg).set(len(parts["switches"]))
    Gauge("slurmqual_burnin_suspect_links", "Links/cables the last burn-in found slow between two good nodes",
          registry=reg).set(len(parts["links"]))
    sw = Gauge("slurmqual_burnin_suspect_switch", "Suspect switch of the last burn-in: its slow paths' bandwidth / "
               "the fleet's (kind: switch = every path, uplinks = paths leaving it)", ["switch", "kind"], registry=reg)
    behind = Gauge("slurmqual_burnin_suspect_switch_nodes", "Measured nodes behind a suspect switch",
                   ["switch", "kind"], registry=reg)
    for s in parts["switches"]:
        sw.labels(switch=s["switch"], kind=s["kind"]).set(float(s["factor"]))
        behind.labels(switch=s["switch"], kind=s["kind"]).set(len(s["nodes"]))
    link = Gauge("slurmqual_burnin_suspect_link", "1 for each suspect link or cable of the last burn-in "
                 "(rail: the NIC, '' for the route between two nodes)", ["a", "b", "rail"], registry=reg)
    for x in parts["links"]:
        link.labels(a=x["a"], b=x["b"], rail=x["rail"] or "").set(1)


def write_preflight_metrics(directory: str, job: str, outcomes: dict[str, dict], now: float) -> list[str]:
    """One file per node of a job's preflight (preflight/flow.py): passed,
    score against the median, drained, when. The next preflight on the node
    replaces it."""
    from prometheus_client import CollectorRegistry, Gauge

    paths = []
    for node, o in sorted(outcomes.items()):
        reg = CollectorRegistry()
        Gauge("slurmqual_preflight_passed", "1 if the node passed its last job preflight, else 0",
              ["node", "verdict", "job"], registry=reg).labels(node=node, verdict=o["verdict"], job=job).set(
                  1 if o["verdict"] == "pass" else 0)
        if o.get("score") is not None:
            Gauge("slurmqual_preflight_score_ratio", "Node's worst network key in its last preflight, "
                  "as a share of the key's median", ["node"], registry=reg).labels(node=node).set(float(o["score"]))
        Gauge("slurmqual_preflight_last_run_timestamp_seconds", "Unix time of the node's last job preflight",
              ["node"], registry=reg).labels(node=node).set(now)
        paths.append(_write(directory, _file_name("preflight_node", node), reg))
    return paths
