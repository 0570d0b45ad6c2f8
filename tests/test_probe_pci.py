"""probe.pci: GPUs vs NVSwitch vs NICs by vendor/class, PCIe parent chain and switch, NUMA, link state."""

import shutil

import pytest

from nodes import tree
from slurmqual.fsroot import FsError, FsRoot
from slurmqual.probe import pci


def test_classification(tmp_path):
    fs = FsRoot(tree(tmp_path))
    devs = pci.list_devices(fs)
    gpus = [d for d in devs if d.is_gpu]
    assert len(gpus) == 8 and len([d for d in devs if d.is_nvswitch]) == 4
    assert not any(d.is_gpu for d in devs if d.is_nvswitch)
    assert pci.PciDevice("x", 0x10DE, 0x030000, "/").is_gpu and pci.PciDevice("x", 0x10DE, 0x030200, "/").is_gpu
    assert not pci.PciDevice("x", 0x10DE, 0x068000, "/").is_gpu
    assert not pci.PciDevice("x", 0x15B3, 0x030200, "/").is_gpu  # not NVIDIA


def test_parent_chain_and_switch(tmp_path):
    fs = FsRoot(tree(tmp_path))
    by = {d.bdf: d for d in pci.list_devices(fs)}
    gpu0, nic0, gpu4 = by["0000:18:00.0"], by["0000:19:00.0"], by["0000:9a:00.0"]
    assert gpu0.path == "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"
    assert gpu0.upstream == ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"]
    assert gpu0.switch == nic0.switch == "0000:16:00.0" and gpu4.switch != gpu0.switch
    assert by["0000:03:00.0"].switch is None  # onboard NIC straight under a root port


def test_numa_and_online_nodes(tmp_path):
    fs = FsRoot(tree(tmp_path))
    assert [pci.numa_node(fs, g.bdf) for g in pci.gpus(fs)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert pci.online_numa_nodes(fs) == 2
    assert pci.online_numa_nodes(FsRoot(tree(tmp_path, name="one", sockets=1))) == 1


def test_link_state(tmp_path):
    fs = FsRoot(tree(tmp_path, "pcie-degraded"))
    assert pci.link_state(fs, "0000:3a:00.0") == pci.LinkState(8, 16, 32.0, 32.0)
    assert pci.link_state(fs, "0000:9b:00.0") == pci.LinkState(16, 16, 16.0, 32.0)


def test_gpus_from_proc_when_no_pci(tmp_path):
    root = tree(tmp_path)
    shutil.rmtree(f"{root}/sys/bus/pci")
    gpus = pci.gpus(FsRoot(root))
    assert len(gpus) == 8 and gpus[0].bdf == "0000:18:00.0"


def test_garbage_vendor_is_error(tmp_path):
    root = tree(tmp_path)
    fs = FsRoot(root)
    with open(fs.host_path("/sys/bus/pci/devices/0000:18:00.0/vendor"), "w") as fh:
        fh.write("nvidia\n")
    with pytest.raises(FsError) as err:
        pci.list_devices(fs)
    assert err.value.path == "/sys/bus/pci/devices/0000:18:00.0/vendor"
