"""Every bundled example: the healthy ones pass everything, each broken one
fails exactly the check it was built to break."""

import pytest

from nodes import FAST, FULL, check, tree
from slurmqual.checks import REGISTRY
from slurmqual.nodetree import EXAMPLES
from slurmqual.result import Status

# example -> the check it must fail (all others pass or are n/a)
BROKEN = {
    "no-peermem": "peermem", "nic-down": "nic_link", "nic-slow": "nic_link", "nic-missing": "nic_link",
    "dcqcn-off": "dcqcn", "numa-misaligned": "gpu_nic_affinity", "gpu-missing": "gpu_count",
    "pcie-degraded": "pcie_link", "ib-counters-high": "ib_counters", "pcie-aer-nonfatal": "pcie_aer",
    "gpu-remap-pending": "gpu_memory", "gpu-remap-failed": "gpu_memory", "gpu-mig-on": "gpu_state",
    "nvlink-down": "nvlink", "fabric-manager-down": "fabric_manager", "xid-79": "xid",
    "dcgm-memory-fail": "dcgm", "nvlink-errors": "nvlink", "roce-pfc-storm": "roce_qos",
    "roce-trust-pcp": "roce_qos",
}
STANDARD = [n for n, s in REGISTRY.items() if s.level in ("standard", "slow")]


HEALTHY = ["h100-roce-healthy", "h100-ib-healthy", "h100-pcie-bridged-healthy"]


@pytest.mark.parametrize("example", HEALTHY)
def test_healthy_examples_pass_every_check(tmp_path, example, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # standard level without mlxconfig
    root = tree(tmp_path, example)
    for name in FAST + STANDARD:
        r = check(root, name, FULL, level="slow")
        assert r.status in (Status.PASS, Status.NA), (name, r)
        assert not r.hint
    assert check(root, "dcqcn", FULL).status is (Status.NA if "ib" in example else Status.PASS)


def test_every_example_is_tested():
    assert set(EXAMPLES) == set(BROKEN) | set(HEALTHY)


@pytest.mark.parametrize("example,failing", sorted(BROKEN.items()))
def test_broken_example_fails_exactly_its_check(tmp_path, example, failing):
    root = tree(tmp_path, example)
    results = {name: check(root, name, FULL, level="slow") for name in FAST + STANDARD}
    assert results[failing].status is Status.FAIL
    others = {n: r.status for n, r in results.items() if n != failing}
    assert all(s in (Status.PASS, Status.NA, Status.SKIP) for s in others.values()), others
    r = results[failing]
    assert r.hint and r.message
    assert r.devices or example == "nic-missing"  # a vanished NIC has no name left to report
