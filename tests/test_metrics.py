"""Metrics files parse with prometheus_client's own parser, pass `promtool check
metrics` (Debian's prometheus package) and carry the values in base units."""

import os
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurmqual.metrics import write_burnin_metrics, write_node_metrics
from slurmqual.result import CheckResult, Status


def _samples(paths):
    out = {}
    for path in [paths] if isinstance(paths, str) else paths:
        with open(path) as fh:
            text = fh.read()
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _promtool(path):
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip("promtool not installed (apt-get install prometheus; scripts/test.sh does it)")
    with open(path, "rb") as fh:
        p = subprocess.run([tool, "check", "metrics"], stdin=fh, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), p.stdout + p.stderr


def test_node_metrics_encode_each_status_and_versions(tmp_path):
    results = [
        CheckResult("peermem", Status.FAIL, "nvidia_peermem not loaded"),
        CheckResult("nic_link", Status.PASS, "8 ports at 400 Gb/s"),
        CheckResult("dcqcn", Status.NA, "InfiniBand"),
        CheckResult("pcie_link", Status.WARN, "x8"),
        CheckResult("versions", Status.ERROR, "mlxconfig timed out"),
    ]
    path = write_node_metrics(str(tmp_path), 'gpu"01', results, 1700000000.0,
                              versions={"driver": "550.54.15", "nic_fw": "28.39.1002", "kernel": "6.1.0-18-amd64"})
    got = _samples(path)
    node = 'gpu"01'
    assert got[("slurmqual_check_status", (("check", "peermem"), ("node", node)))] == 3
    assert got[("slurmqual_check_status", (("check", "nic_link"), ("node", node)))] == 0
    assert got[("slurmqual_check_status", (("check", "dcqcn"), ("node", node)))] == 0
    assert got[("slurmqual_check_status", (("check", "pcie_link"), ("node", node)))] == 1
    assert got[("slurmqual_check_status", (("check", "versions"), ("node", node)))] == 2
    assert got[("slurmqual_check_last_run_timestamp_seconds", (("node", node),))] == 1700000000.0
    info = (("driver", "550.54.15"), ("kernel", "6.1.0-18-amd64"), ("nccl", ""), ("nic_fw", "28.39.1002"),
            ("node", node))
    assert got[("slurmqual_node_info", info)] == 1
    assert path.endswith(".prom") and '"' not in path.rsplit("/", 1)[1]
    _promtool(path)


ANALYSIS = {
    "median": {"all_reduce:pair": 180.0, "all_reduce:intra": 456.0},
    "threshold": 0.9,
    "nodes": {"n1": {"verdict": "pass", "score": 181.5}, "n2": {"verdict": "fail", "score": 120.0},
              "n3": {"verdict": "untested", "score": None}},
    "suspect_links": [], "drain": ["n2"], "guard_tripped": False,
}


def test_burnin_metrics_in_base_units_one_file_per_node(tmp_path):
    paths = write_burnin_metrics(str(tmp_path), ANALYSIS, 1700000100.0)
    got = _samples(paths)
    assert got[("slurmqual_busbw_bytes_per_second", (("node", "n1"), ("test", "all_reduce")))] == 181.5e9
    assert got[("slurmqual_qualified", (("node", "n2"),))] == 0
    assert got[("slurmqual_qualified", (("node", "n1"),))] == 1
    assert got[("slurmqual_qualified", (("node", "n3"),))] == 0
    assert ("slurmqual_busbw_bytes_per_second", (("node", "n3"), ("test", "all_reduce"))) not in got
    assert got[("slurmqual_fleet_median_busbw_bytes_per_second", (("kind", "pair"), ("test", "all_reduce")))] == 180e9
    assert got[("slurmqual_fleet_median_busbw_bytes_per_second", (("kind", "intra"), ("test", "all_reduce")))] == 456e9
    for p in paths:
        _promtool(p)


def test_requalify_of_one_node_keeps_the_fleets_metrics(tmp_path):
    write_burnin_metrics(str(tmp_path), ANALYSIS, 1700000100.0)
    requal = {"median": {"all_reduce:pair": 170.0}, "threshold": 0.9, "nodes": {"n2": {"verdict": "pass", "score": 179.0}},
              "suspect_links": [], "drain": [], "guard_tripped": False}
    write_burnin_metrics(str(tmp_path), requal, 1700000200.0, fleet=False)
    got = _samples([str(tmp_path / f) for f in sorted(os.listdir(tmp_path)) if f.endswith(".prom")])
    assert got[("slurmqual_qualified", (("node", "n1"),))] == 1  # the other nodes are still there
    assert got[("slurmqual_qualified", (("node", "n2"),))] == 1
    assert got[("slurmqual_fleet_median_busbw_bytes_per_second", (("kind", "pair"), ("test", "all_reduce")))] == 180e9
