"""Metrics files parse with prometheus_client's own parser, pass `promtool check
metrics` (Debian's prometheus package) and carry the values in base units."""

import os
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet import Fabric, run
from slurmqual.burnin.judge.analyze import analyze
from slurmqual.burnin.records import Params
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


NODES = [f"n{i}" for i in range(1, 13)]


def analysis_of(fabric: Fabric, tests=("all_reduce",), scope=NODES) -> dict:
    """What `burnin analyze` writes: analyze() on the fleet model's measurements."""
    return analyze(run(NODES, fabric, seed=5, tests=tests), scope, Params()).to_dict()


def test_burnin_metrics_in_base_units_one_file_per_node(tmp_path):
    a = analysis_of(Fabric(net={"n2": 0.6}, noise=0.005, pairless={"n3"}), tests=("all_reduce", "alltoall"))
    assert a["nodes"]["n2"]["verdict"] == "fail" and a["nodes"]["n3"]["verdict"] == "untested"
    paths = write_burnin_metrics(str(tmp_path), a, 1700000100.0)
    got = _samples(paths)
    n1 = a["nodes"]["n1"]
    assert got[("slurmqual_busbw_bytes_per_second", (("node", "n1"), ("test", n1["key"].split(":")[0])))] == \
        pytest.approx(n1["score"] * 1e9)
    assert got[("slurmqual_qualified", (("node", "n2"),))] == 0
    assert got[("slurmqual_qualified", (("node", "n1"),))] == 1
    assert got[("slurmqual_qualified", (("node", "n3"),))] == 0
    # n3 has intra scores but no pair evidence: no judged score, its per-key scores still shown
    assert not any(k[0] == "slurmqual_busbw_bytes_per_second" and ("node", "n3") in k[1] for k in got)
    h100 = "NVIDIA H100 80GB HBM3"
    for test in ("all_reduce", "alltoall"):
        for kind, model in (("pair", ""), ("intra", h100)):
            key = f"{test}:{kind}:{model}" if model else f"{test}:{kind}"
            labels = (("gpu_model", model), ("kind", kind))
            assert got[("slurmqual_fleet_median_busbw_bytes_per_second", labels + (("test", test),))] == \
                pytest.approx(a["median"][key] * 1e9)
            assert got[("slurmqual_busbw_key_bytes_per_second", labels + (("node", "n2"), ("test", test)))] \
                == pytest.approx(a["nodes"]["n2"]["keys"][key]["score"] * 1e9)
        intra_n3 = ("slurmqual_busbw_key_bytes_per_second", (("gpu_model", h100), ("kind", "intra"), ("node", "n3"),
                                                              ("test", test)))
        assert intra_n3 in got
    assert got[("slurmqual_burnin_guard_tripped", ())] == 0 and got[("slurmqual_burnin_fleet_slowdown", ())] == 0
    assert got[("slurmqual_burnin_would_drain_nodes", ())] == 1
    for p in paths:
        _promtool(p)


def test_guard_and_fleet_slowdown_are_metrics(tmp_path):
    """A third of the fleet slow: the guard holds every drain; the metric says so."""
    a = analysis_of(Fabric(net={n: 0.6 for n in NODES[:5]}, noise=0.005))
    assert a["guard_tripped"] and a["drain"] == []
    got = _samples(write_burnin_metrics(str(tmp_path), a, 1700000100.0))
    assert got[("slurmqual_burnin_guard_tripped", ())] == 1
    assert got[("slurmqual_burnin_would_drain_nodes", ())] == len(a["would_drain"]) > 2


def test_requalify_of_one_node_keeps_the_fleets_metrics(tmp_path):
    fleet = analysis_of(Fabric(net={"n2": 0.6}, noise=0.005))
    write_burnin_metrics(str(tmp_path), fleet, 1700000100.0)
    # The requalify of the repaired n2 against two references, judged at the fleet's level.
    few = ["n2", "n5", "n6"]
    requal = analyze(run(few, Fabric(noise=0.005), seed=6), few, Params(), fleet_level=fleet["median"],
                     trusted={"n5", "n6"}).to_dict()
    assert requal["nodes"]["n2"]["verdict"] == "pass"
    write_burnin_metrics(str(tmp_path), requal, 1700000200.0, fleet=False)
    got = _samples([str(tmp_path / f) for f in sorted(os.listdir(tmp_path)) if f.endswith(".prom")])
    assert got[("slurmqual_qualified", (("node", "n1"),))] == 1  # the other nodes are still there
    assert got[("slurmqual_qualified", (("node", "n2"),))] == 1
    pair = (("gpu_model", ""), ("kind", "pair"), ("test", "all_reduce"))
    assert got[("slurmqual_fleet_median_busbw_bytes_per_second", pair)] == \
        pytest.approx(fleet["median"]["all_reduce:pair"] * 1e9)


def test_suspect_switch_link_and_nic_are_metrics(tmp_path):
    """From analyze() on a per-rail run with a fabric map: a slow rail leaf,
    a bad cable on one rail and a NIC at half rate."""
    from fleet import rail_fleet

    probe = rail_fleet(128)
    a_, b_ = probe[3][0][2][0]  # a pair of the plan's third round: a cable between two healthy NICs
    nodes, topo, ms, _plan = rail_fleet(128, noise=0.01, switches={"su1-r2": 0.8},
                                        link={(frozenset((a_, b_)), "mlx5_5"): 0.4}, nic={("gpu0100", "mlx5_3"): 0.5})
    a = analyze(ms, nodes, topology=topo).to_dict()
    assert a["suspect_switches"] == ["su1-r2"] and a["drain"] == ["gpu0100"]
    assert a["suspect_links"] == [sorted([a_, b_]) + ["mlx5_5"]]
    paths = write_burnin_metrics(str(tmp_path), a, 1700000100.0)
    got = _samples(paths)
    finding = a["switch_findings"][0]
    assert got[("slurmqual_burnin_suspect_switch", (("kind", "switch"), ("switch", "su1-r2")))] == finding["factor"]
    assert got[("slurmqual_burnin_suspect_switch_nodes", (("kind", "switch"), ("switch", "su1-r2")))] == 32
    assert got[("slurmqual_burnin_suspect_switches", ())] == 1 and got[("slurmqual_burnin_suspect_links", ())] == 1
    a_, b_ = sorted([a_, b_])
    assert got[("slurmqual_burnin_suspect_link", (("a", a_), ("b", b_), ("rail", "mlx5_5")))] == 1
    assert got[("slurmqual_burnin_nic_failed", (("nic", "mlx5_3"), ("node", "gpu0100")))] == 1
    assert not any(k[0] == "slurmqual_burnin_nic_failed" and ("node", "gpu0100") not in k[1] for k in got)
    for p in paths:
        _promtool(p)
