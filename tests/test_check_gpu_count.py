"""gpu_count: GPUs on PCI (NVSwitch excluded) vs node.gpus, and seen by the driver."""

import os
import shutil

from nodes import FULL, check, tree
from slurmqual.checks.gpu_count import judge
from slurmqual.result import Status


def test_judge_pure():
    eight = [f"0000:{b:02x}:00.0" for b in range(8)]
    assert judge(eight, eight, 8).status is Status.PASS
    r = judge(eight[:7], eight[:7], 8)
    assert r.status is Status.FAIL and r.message == "7 GPUs on PCI, expected 8"
    r = judge(eight, eight[1:], 8)
    assert r.status is Status.FAIL and r.devices == [eight[0]] and "driver sees 7 of 8" in r.message
    assert "no expected count configured" in judge(eight, None, None).message


def test_gpu_missing_example(tmp_path):
    r = check(tree(tmp_path, "gpu-missing"), "gpu_count", FULL)
    assert r.status is Status.FAIL and "7 GPUs on PCI, expected 8" in r.message and "Xid 79" in r.hint


def test_nvswitch_is_not_a_gpu_and_vga_class_is(tmp_path):
    root = tree(tmp_path)
    nvsw = [d for d in os.listdir(f"{root}/sys/bus/pci/devices")
            if open(f"{root}/sys/bus/pci/devices/{d}/class").read().startswith("0x0680")]
    assert len(nvsw) == 4
    assert check(root, "gpu_count", FULL).message == "8 GPUs"
    # A GPU that enumerates as a VGA controller (0x0300xx) still counts.
    with open(os.path.realpath(f"{root}/sys/bus/pci/devices/0000:18:00.0/class"), "w") as fh:
        fh.write("0x030000\n")
    assert check(root, "gpu_count", FULL).status is Status.PASS


def test_gpu_on_pci_but_not_initialised_by_driver(tmp_path):
    root = tree(tmp_path)
    shutil.rmtree(f"{root}/proc/driver/nvidia/gpus/0000:4b:00.0")
    r = check(root, "gpu_count", FULL)
    assert r.status is Status.FAIL and r.devices == ["0000:4b:00.0"]


def test_driver_list_when_no_pci_view(tmp_path):
    root = tree(tmp_path)
    shutil.rmtree(f"{root}/sys/bus/pci")
    assert check(root, "gpu_count", FULL).status is Status.PASS


def test_garbage_class_file_is_error(tmp_path):
    root = tree(tmp_path)
    with open(os.path.realpath(f"{root}/sys/bus/pci/devices/0000:18:00.0/class"), "w") as fh:
        fh.write("display\n")
    r = check(root, "gpu_count", FULL)
    assert r.status is Status.ERROR and "/sys/bus/pci/devices/0000:18:00.0/class" in r.message
