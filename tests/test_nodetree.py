"""The node-tree builder writes trees laid out like real sysfs/procfs:
relative symlinks where the kernel has them, real attribute formats, the
H100 topology of `nvidia-smi topo -m`, and break/repair helpers."""

import os
import re
import subprocess
import sys

import pytest

from slurmqual.fsroot import FsRoot
from slurmqual.nodetree import EXAMPLES, NodeSpec, add_module, build, remove_module, set_port_attr


@pytest.fixture(scope="module")
def roce(tmp_path_factory):
    return build("h100-roce-healthy", str(tmp_path_factory.mktemp("t") / "roce"))


def _links(root):
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                yield p


def test_every_symlink_is_relative_and_resolves_inside_the_root(roce):
    links = list(_links(roce))
    assert len(links) > 50
    for p in links:
        target = os.readlink(p)
        assert not target.startswith("/"), p
        real = os.path.realpath(p)
        assert real.startswith(roce + os.sep) and os.path.exists(real), (p, target)


def test_kernel_link_shapes(roce):
    ib = os.readlink(f"{roce}/sys/class/infiniband/mlx5_0")
    assert re.fullmatch(r"\.\./\.\./devices/pci0000:15/0000:15:01\.0/(0000:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]/)+"
                        r"0000:19:00\.0/infiniband/mlx5_0", ib), ib
    assert os.readlink(f"{roce}/sys/class/infiniband/mlx5_0/device") == "../../../0000:19:00.0"
    assert os.readlink(f"{roce}/sys/bus/pci/devices/0000:18:00.0").startswith("../../../devices/pci0000:15/")
    assert re.fullmatch(r"\.\./\.\./devices/pci0000:15/.*/0000:19:00\.0/net/ens1np0",
                        os.readlink(f"{roce}/sys/class/net/ens1np0"))
    assert os.listdir(f"{roce}/sys/class/infiniband/mlx5_0/device/net") == ["ens1np0"]


def test_attribute_formats(roce):
    fs = FsRoot(roce)
    port = "/sys/class/infiniband/mlx5_3/ports/1"
    assert fs.read(f"{port}/state") == "4: ACTIVE" and fs.read(f"{port}/phys_state") == "5: LinkUp"
    assert fs.read(f"{port}/rate") == "400 Gb/sec (4X NDR)" and fs.read(f"{port}/link_layer") == "Ethernet"
    assert fs.read(f"{port}/counters/symbol_error") == "0"
    dev = "/sys/class/infiniband/mlx5_3"
    assert re.fullmatch(r"\d+\.\d+\.\d+", fs.read(f"{dev}/fw_ver")) and fs.read(f"{dev}/hca_type") == "MT4129"
    assert fs.read(f"{dev}/node_desc")
    pci = "/sys/bus/pci/devices/0000:18:00.0"
    assert fs.read(f"{pci}/vendor") == "0x10de" and fs.read(f"{pci}/class") == "0x030200"
    assert fs.read(f"{pci}/current_link_speed") == "32.0 GT/s PCIe" and fs.read(f"{pci}/max_link_width") == "16"
    assert fs.read("/sys/class/net/ens4np0/speed") == "400000"
    assert fs.read("/sys/class/net/ens4np0/ecn/roce_rp/enable/7") == "1"
    assert fs.read("/sys/class/net/ens4np0/ecn/roce_np/enable/0") == "1"
    assert fs.read("/proc/sys/kernel/osrelease") == "6.1.0-18-amd64"
    assert fs.read("/proc/driver/nvidia/version").startswith("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ")
    info = fs.read("/proc/driver/nvidia/gpus/0000:18:00.0/information")
    assert "Bus Location: \t 0000:18:00.0" in info and "Model: \t\t NVIDIA H100" in info
    for line in fs.read("/proc/modules").splitlines():
        assert re.fullmatch(r"\w+ \d+ \d+ (-|(\w+,)+) Live 0x[0-9a-f]{16}( \(\w+\))?", line), line


def test_ecn_sample_lists_the_files_we_write(roce, samples):
    """The rdma-qos sample shows which ECN files exist per netdev; the tree has each of them."""
    text = (samples / "sysfs/ecn_roce_np_roce_rp_enable_per_prio_cnp_dscp_traffic_class_via_rdma-qos_q.txt").read_text()
    paths = set(re.findall(r"/sys/class/net/eth0/(ecn/\S+) = (\d+)", text))
    assert len(paths) == 17
    fs = FsRoot(roce)
    for rel, value in paths:
        assert fs.read(f"/sys/class/net/ens1np0/{rel}") == value


def test_topology_matches_real_h100_topo(roce, samples):
    """GPU i shares a PCIe switch (PIX) with NIC i; NUMA affinity as in nvidia-smi topo -m."""
    text = (samples / "nvidia/topo_m_8xH100_8xmlx5_NIC_legend_gpu_numa_id.txt").read_text()
    rows = {ln.split()[0]: ln.split() for ln in text.splitlines() if re.match(r"^GPU\d\s", ln)}
    fs = FsRoot(roce)
    from slurmqual.probe import pci, rdma

    gpus = pci.gpus(fs)
    nics = rdma.list_ports(fs)
    by = {d.bdf: d for d in pci.list_devices(fs)}
    for i, g in enumerate(gpus):
        row = rows[f"GPU{i}"]
        pix = [n for n in range(8) if row[1 + 8 + n] == "PIX"]
        assert pix == [i]
        assert by[nics[i].pci].switch == g.switch
        assert pci.numa_node(fs, g.bdf) == int(row[-2]) == pci.numa_node(fs, nics[i].pci)


def test_not_rdma_onboard_nic_and_nvswitch(roce):
    fs = FsRoot(roce)
    assert fs.isdir("/sys/class/net/eno1") and not fs.exists("/sys/class/net/eno1/device/infiniband")
    assert "eno1" not in os.listdir(f"{roce}/sys/class/infiniband")
    nvsw = [b for b in fs.listdir("/sys/bus/pci/devices") if fs.read(f"/sys/bus/pci/devices/{b}/class") == "0x068000"]
    assert len(nvsw) == 4 and all(fs.read(f"/sys/bus/pci/devices/{b}/vendor") == "0x10de" for b in nvsw)


def test_infiniband_tree(tmp_path):
    fs = FsRoot(build("h100-ib-healthy", str(tmp_path / "ib")))
    assert fs.read("/sys/class/infiniband/mlx5_0/ports/1/link_layer") == "InfiniBand"
    assert not fs.exists("/sys/class/infiniband/mlx5_0/device/net/ens1np0/ecn")
    assert fs.read("/sys/bus/pci/devices/0000:19:00.0/class") == "0x020700"


def test_spec_knobs(tmp_path):
    fs = FsRoot(build(NodeSpec(gpus=4, nics=2, sockets=1, rate_gbps=200, missing_gpus={3}), str(tmp_path / "s")))
    assert len(fs.listdir("/sys/class/infiniband")) == 2 and len(fs.listdir("/proc/driver/nvidia/gpus")) == 3
    assert fs.read("/sys/class/infiniband/mlx5_1/ports/1/rate") == "200 Gb/sec (4X HDR)"
    assert fs.read("/sys/devices/system/node/online") == "0"


def test_build_replaces_existing_tree_and_rejects_unknown_names(tmp_path):
    dest = str(tmp_path / "n")
    build("no-peermem", dest)
    build("h100-roce-healthy", dest)
    assert "nvidia_peermem" in open(f"{dest}/proc/modules").read()
    with pytest.raises(KeyError, match="unknown example 'nope'"):
        build("nope", dest)


def test_break_and_repair_helpers_are_idempotent(tmp_path):
    root = build("h100-roce-healthy", str(tmp_path / "n"))
    before = open(f"{root}/proc/modules").read()
    remove_module(root, "nvidia_peermem")
    remove_module(root, "nvidia_peermem")
    assert "nvidia_peermem " not in open(f"{root}/proc/modules").read()
    add_module(root, "nvidia_peermem")
    add_module(root, "nvidia_peermem")
    after = open(f"{root}/proc/modules").read()
    assert after.count("nvidia_peermem ") == 1 and len(after.splitlines()) == len(before.splitlines())
    set_port_attr(root, 2, "state", "1: DOWN")
    assert open(f"{root}/sys/class/infiniband/mlx5_2/ports/1/state").read() == "1: DOWN\n"
    assert os.path.islink(f"{root}/sys/class/infiniband/mlx5_2")  # the link itself is untouched


def test_examples_cli_lists_and_creates_every_example(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "slurmqual", "examples", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    listed = [ln.split()[0] for ln in run("list").stdout.splitlines()]
    assert listed == list(EXAMPLES) and len(listed) >= 11
    p = run("create", "nic-slow", str(tmp_path / "x"))
    assert p.returncode == 0 and p.stdout.strip() == str(tmp_path / "x")
    assert open(tmp_path / "x/sys/class/infiniband/mlx5_5/ports/1/rate").read() == "200 Gb/sec (4X HDR)\n"
    p = run("create", "nope", str(tmp_path / "y"))
    assert p.returncode == 2 and "unknown example" in p.stderr and not os.path.exists(tmp_path / "y")


def test_dcqcn_and_pci_helpers(tmp_path):
    from nodes import check

    from slurmqual.nodetree import set_dcqcn, set_pci_attr
    from slurmqual.result import Status

    root = build("h100-roce-healthy", str(tmp_path / "n"))
    set_dcqcn(root, 6, False, [3])
    r = check(root, "dcqcn")
    assert r.status is Status.FAIL and r.devices == ["mlx5_6 (ens7np0)"] and "prio 3" in r.message
    set_dcqcn(root, 6, True)
    assert check(root, "dcqcn").status is Status.PASS
    set_pci_attr(root, "0000:18:00.0", "current_link_width", "4")
    assert check(root, "pcie_link").devices == ["GPU 0000:18:00.0"]
