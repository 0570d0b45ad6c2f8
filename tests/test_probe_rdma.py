"""probe.rdma: ports of /sys/class/infiniband through relative links, attribute formats."""

import os

import pytest

from nodes import tree
from slurmqual.fsroot import FsError, FsRoot
from slurmqual.nodetree import set_port_attr
from slurmqual.probe import rdma


def test_ports_and_pci_function_through_relative_links(tmp_path):
    fs = FsRoot(tree(tmp_path))
    ports = rdma.list_ports(fs)
    assert [p.name for p in ports] == [f"mlx5_{i}/1" for i in range(8)]
    assert ports[0].pci == "0000:19:00.0" and ports[7].pci == "0000:ce:00.0"
    assert rdma.list_ports(fs, ["mlx5_0"])[0].device == "mlx5_1"


def test_ibstatus_sample_values_parse(tmp_path, samples):
    """The raw sysfs values that ibstatus prints, written into a tree, read back the same."""
    text = (samples / "sysfs/ibstatus_RoCE_ports_sysfs_values_down_disabled_40G_QDR_and_active_100G_EDR.txt").read_text()
    blocks = {}
    for block in text.split("Infiniband device ")[1:]:
        dev = block.split("'")[1]
        fields = dict(line.strip().split(":", 1) for line in block.splitlines()[1:] if ":" in line)
        blocks[dev] = {k.strip(): v.strip() for k, v in fields.items()}
    root = tree(tmp_path, nics=2, gpus=2)
    fs = FsRoot(root)
    for i, dev in enumerate(sorted(blocks)):
        b = blocks[dev]
        for attr, key in (("state", "state"), ("phys_state", "phys state"), ("rate", "rate"), ("link_layer", "link_layer")):
            set_port_attr(root, i, attr, b[key])
    p0, p1 = rdma.list_ports(fs)
    assert rdma.state_name(p0.attr(fs, "state")) == "DOWN" and rdma.state_name(p0.attr(fs, "phys_state")) == "Disabled"
    assert rdma.rate_gbps(fs, p0) == 40.0 and rdma.rate_gbps(fs, p1) == 100.0
    assert rdma.state_name(p1.attr(fs, "state")) == "ACTIVE" and p1.attr(fs, "link_layer") == "Ethernet"


def test_rate_formats(tmp_path):
    root = tree(tmp_path, nics=1, gpus=1)
    fs = FsRoot(root)
    (port,) = rdma.list_ports(fs)
    for text, gbps in (("400 Gb/sec (4X NDR)", 400), ("2.5 Gb/sec (1X SDR)", 2.5), ("25 Gb/sec (1X EDR)", 25)):
        set_port_attr(root, 0, "rate", text)
        assert rdma.rate_gbps(fs, port) == gbps
    set_port_attr(root, 0, "rate", "invalid")
    with pytest.raises(FsError) as err:
        rdma.rate_gbps(fs, port)
    assert err.value.path == "/sys/class/infiniband/mlx5_0/ports/1/rate"


def test_netdev_mapping_via_device_net_and_gid_attrs(tmp_path):
    root = tree(tmp_path)
    fs = FsRoot(root)
    port = rdma.list_ports(fs)[2]
    assert rdma.netdevs(fs, port) == ["ens3np0"]
    os.unlink(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_2/ports/1/gid_attrs/ndevs/0"))
    assert rdma.netdevs(fs, port) == ["ens3np0"]  # from mlx5_2/device/net/*
    assert rdma.netdev_speed_gbps(fs, "ens3np0") == 400.0


def test_netdev_speed_down_and_missing(tmp_path):
    root = tree(tmp_path, "nic-down")
    fs = FsRoot(root)
    assert rdma.netdev_speed_gbps(fs, "ens4np0") is None          # -1 when down
    with open(os.path.realpath(f"{root}/sys/class/net/ens4np0/speed"), "w") as fh:
        fh.write("")                                                  # EINVAL-like empty read
    assert rdma.netdev_speed_gbps(fs, "ens4np0") is None
    with pytest.raises(FsError, match="missing"):
        rdma.netdev_speed_gbps(fs, "ens99")
