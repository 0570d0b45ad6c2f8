"""gpu_nic_affinity: NUMA-local NIC per GPU, numa_node -1, same PCIe switch, pinned map."""

import os

from nodes import check, config, tree
from slurmqual.checks.gpu_nic_affinity import Dev, judge
from slurmqual.result import Status


def test_judge_pure():
    gpus = [Dev("g0", 0, "s0"), Dev("g1", 1, "s1")]
    nics = [Dev("mlx5_0", 0, "s0"), Dev("mlx5_1", 1, "s1")]
    assert judge(gpus, nics, True, True, {}).status is Status.PASS
    r = judge(gpus, [Dev("mlx5_0", 0, "s0"), Dev("mlx5_1", 0, "s1")], True, False, {})
    assert r.status is Status.FAIL and r.devices == ["g1"] and "GPU g1: no fabric NIC on NUMA 1" in r.message
    r = judge(gpus, [Dev("mlx5_0", 0, "sX"), Dev("mlx5_1", 1, "s1")], True, True, {})
    assert r.devices == ["g0"] and "PCIe switch s0" in r.message
    assert judge(gpus, nics, True, False, {"g0": "mlx5_9"}).message == "GPU g0: pinned NIC mlx5_9 not present"
    assert judge([], nics, True, False, {}).status is Status.NA
    assert judge([Dev("g0", -1, None)], nics, False, False, {}).status is Status.PASS


def test_numa_misaligned_example_lists_each_gpu_without_local_nic(tmp_path):
    r = check(tree(tmp_path, "numa-misaligned"), "gpu_nic_affinity")
    assert r.status is Status.FAIL and len(r.devices) == 4
    assert "GPU 0000:18:00.0: no fabric NIC on NUMA 0" in r.message


def test_numa_minus_one_on_multi_socket_fails_single_socket_passes(tmp_path):
    r = check(tree(tmp_path, gpu_numa={2: -1}), "gpu_nic_affinity")
    assert r.status is Status.FAIL and "numa_node -1" in r.message and r.devices == ["0000:3a:00.0"]
    single = tree(tmp_path, name="single", sockets=1, gpu_numa={0: -1})
    assert check(single, "gpu_nic_affinity").status is Status.PASS


def test_same_switch_and_pinning(tmp_path):
    root = tree(tmp_path)
    strict = config(checks={"gpu_nic_affinity": {"same_pcie_switch": True}})
    assert check(root, "gpu_nic_affinity", strict).status is Status.PASS
    good_pin = config(checks={"gpu_nic_affinity": {"gpu_nic_map": {"0000:18:00.0": "mlx5_0"}}})
    assert check(root, "gpu_nic_affinity", good_pin).status is Status.PASS
    wrong_pin = config(checks={"gpu_nic_affinity": {"gpu_nic_map": {"0000:18:00.0": "mlx5_7"}}})
    r = check(root, "gpu_nic_affinity", wrong_pin)
    assert r.status is Status.FAIL and "pinned NIC mlx5_7 on NUMA 1" in r.message and r.devices == ["0000:18:00.0"]
    # A NIC moved behind another switch but on the same socket: NUMA-local passes, strict fails.
    moved = tree(tmp_path, name="moved", missing_nics={1})
    assert check(moved, "gpu_nic_affinity").status is Status.PASS
    r = check(moved, "gpu_nic_affinity", strict)
    assert r.status is Status.FAIL and r.devices == ["0000:29:00.0"]


def test_broken_device_symlink_is_error_naming_it(tmp_path):
    root = tree(tmp_path)
    link = f"{root}/sys/bus/pci/devices/0000:18:00.0"
    os.unlink(link)
    os.symlink("../../../devices/pci0000:15/gone", link)
    r = check(root, "gpu_nic_affinity")
    assert r.status is Status.ERROR and "/sys/bus/pci/devices/0000:18:00.0" in r.message
    assert check(root, "peermem").status is Status.PASS


def test_garbage_numa_node_is_error(tmp_path):
    root = tree(tmp_path)
    with open(os.path.realpath(f"{root}/sys/bus/pci/devices/0000:18:00.0/numa_node"), "w") as fh:
        fh.write("zero\n")
    r = check(root, "gpu_nic_affinity")
    assert r.status is Status.ERROR and "numa_node" in r.message and "expected an integer" in r.message


def test_nic_with_numa_minus_one_is_named(tmp_path):
    r = check(tree(tmp_path, nic_numa={5: -1}), "gpu_nic_affinity")
    assert r.status is Status.FAIL and "NIC mlx5_5: numa_node -1" in r.message and r.devices == ["mlx5_5"]
