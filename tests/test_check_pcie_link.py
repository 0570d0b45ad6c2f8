"""pcie_link: GPU width and NIC width/speed vs max; GPU idle speed is not a failure."""

import os

from nodes import check, config, tree
from slurmqual.checks.pcie_link import judge
from slurmqual.probe.pci import LinkState
from slurmqual.result import Status

FULL16 = LinkState(16, 16, 32.0, 32.0)


def test_judge_pure():
    assert judge({"GPU a": ("gpu", FULL16)}, "fail").status is Status.PASS
    assert judge({"GPU a": ("gpu", LinkState(16, 16, 2.5, 32.0))}, "fail").status is Status.PASS
    r = judge({"GPU a": ("gpu", LinkState(8, 16, 32.0, 32.0)), "mlx5_0 b": ("nic", LinkState(16, 16, 16.0, 32.0))}, "fail")
    assert r.status is Status.FAIL and r.devices == ["GPU a", "mlx5_0 b"]
    assert "GPU a: x8 of x16" in r.message and "mlx5_0 b: 16 of 32 GT/s" in r.message
    assert judge({"GPU a": ("gpu", LinkState(8, 16, 32.0, 32.0))}, "warn").status is Status.WARN


def test_pcie_degraded_example(tmp_path):
    r = check(tree(tmp_path, "pcie-degraded"), "pcie_link")
    assert r.status is Status.FAIL
    assert r.devices == ["GPU 0000:3a:00.0", "mlx5_4 0000:9b:00.0"]
    warn = config(checks={"pcie_link": {"on_degraded": "warn"}})
    assert check(tree(tmp_path, "pcie-degraded", name="w"), "pcie_link", warn).status is Status.WARN


def test_idle_gpu_speed_passes(tmp_path):
    assert check(tree(tmp_path, gpu_link={0: (16, "2.5 GT/s PCIe")}), "pcie_link").status is Status.PASS


def test_garbage_speed_and_missing_width_are_errors(tmp_path):
    root = tree(tmp_path)
    dev = os.path.realpath(f"{root}/sys/bus/pci/devices/0000:19:00.0")
    with open(f"{dev}/current_link_speed", "w") as fh:
        fh.write("Unknown\n")
    r = check(root, "pcie_link")
    assert r.status is Status.ERROR and "0000:19:00.0/current_link_speed" in r.message and "GT/s" in r.message
    root = tree(tmp_path, name="nowidth")
    os.unlink(os.path.realpath(f"{root}/sys/bus/pci/devices/0000:18:00.0/max_link_width"))
    r = check(root, "pcie_link")
    assert r.status is Status.ERROR and "/sys/bus/pci/devices/0000:18:00.0/max_link_width: missing" in r.message
