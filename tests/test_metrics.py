"""Metrics files parse with prometheus_client's own parser and carry the values."""

from prometheus_client.parser import text_string_to_metric_families

from slurmqual.metrics import write_burnin_metrics, write_node_metrics
from slurmqual.result import CheckResult, Status


def _samples(path):
    with open(path) as fh:
        text = fh.read()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_node_metrics_encode_each_status(tmp_path):
    results = [
        CheckResult("peermem", Status.FAIL, "nvidia_peermem not loaded"),
        CheckResult("nic_link", Status.PASS, "8 ports at 400 Gb/s"),
        CheckResult("dcqcn", Status.NA, "InfiniBand"),
        CheckResult("pcie_link", Status.WARN, "x8"),
        CheckResult("versions", Status.ERROR, "mlxconfig timed out"),
    ]
    path = write_node_metrics(str(tmp_path), 'gpu"01', results, 1700000000.0)
    got = _samples(path)
    node = 'gpu"01'
    assert got[("slurmqual_check_status", (("check", "peermem"), ("node", node)))] == 3
    assert got[("slurmqual_check_status", (("check", "nic_link"), ("node", node)))] == 0
    assert got[("slurmqual_check_status", (("check", "dcqcn"), ("node", node)))] == 0
    assert got[("slurmqual_check_status", (("check", "pcie_link"), ("node", node)))] == 1
    assert got[("slurmqual_check_status", (("check", "versions"), ("node", node)))] == 2
    assert got[("slurmqual_check_last_run_timestamp_seconds", (("node", node),))] == 1700000000.0
    assert path.endswith(".prom") and '"' not in path.rsplit("/", 1)[1]


def test_burnin_metrics(tmp_path):
    analysis = {
        "median": {"pair": 180.0},
        "threshold": 0.9,
        "nodes": {"n1": {"verdict": "pass", "score": 181.5}, "n2": {"verdict": "fail", "score": 120.0},
                  "n3": {"verdict": "untested", "score": None}},
        "suspect_links": [], "drain": ["n2"], "guard_tripped": False,
    }
    got = _samples(write_burnin_metrics(str(tmp_path), analysis, 1700000100.0))
    assert got[("slurmqual_busbw_gbps", (("node", "n1"), ("test", "all_reduce")))] == 181.5
    assert got[("slurmqual_qualified", (("node", "n2"),))] == 0
    assert got[("slurmqual_qualified", (("node", "n1"),))] == 1
    assert got[("slurmqual_qualified", (("node", "n3"),))] == 0
    assert ("slurmqual_busbw_gbps", (("node", "n3"), ("test", "all_reduce"))) not in got
    assert got[("slurmqual_fleet_median_busbw_gbps", (("test", "pair"),))] == 180.0
