"""nic_link: ports present, ACTIVE/LinkUp, at the expected (or fastest) rate; RoCE netdev speed."""

import os

from nodes import FULL, check, config, tree
from slurmqual.checks.nic_link import PortView, judge
from slurmqual.nodetree import set_port_attr
from slurmqual.result import Status


def _p(name, rate=400.0, state="ACTIVE", phys="LinkUp", speeds=None):
    return PortView(name, state, phys, rate, "Ethernet" if speeds else "InfiniBand", speeds or {})


def test_judge_pure():
    ports = [_p(f"mlx5_{i}/1") for i in range(4)]
    assert judge(ports, 4, 400).status is Status.PASS
    assert judge(ports, None, None).status is Status.PASS
    r = judge(ports[:3] + [_p("mlx5_3/1", 200)], None, None)
    assert r.status is Status.FAIL and r.devices == ["mlx5_3/1"] and "200 Gb/s (expected 400)" in r.message
    r = judge(ports, 8, None)
    assert r.status is Status.FAIL and "4 fabric ports, expected 8" in r.message
    assert judge([], None, None).status is Status.NA
    assert judge([], 8, 400).status is Status.FAIL
    r = judge([_p("mlx5_0/1", speeds={"ens1np0": None})], None, 400)
    assert "ens1np0 link down" in r.message


def test_examples_name_device_and_seen_vs_expected(tmp_path):
    r = check(tree(tmp_path, "nic-slow"), "nic_link", FULL)
    assert r.devices == ["mlx5_5/1"] and "200 Gb/s (expected 400)" in r.message
    r = check(tree(tmp_path, "nic-down", name="down"), "nic_link", FULL)
    assert r.devices == ["mlx5_3/1"] and "state DOWN" in r.message and "phys_state Disabled" in r.message
    assert "ens4np0 link down" in r.message
    r = check(tree(tmp_path, "nic-missing", name="missing"), "nic_link", FULL)
    assert r.status is Status.FAIL and "7 fabric ports, expected 8" in r.message


def test_without_config_every_port_must_match_the_fastest(tmp_path):
    root = tree(tmp_path, "nic-slow")
    r = check(root, "nic_link")  # defaults: no expected count or rate
    assert r.status is Status.FAIL and r.devices == ["mlx5_5/1"]
    root = tree(tmp_path, name="all200", rate_gbps=200)
    assert check(root, "nic_link").status is Status.PASS
    r = check(root, "nic_link", FULL)
    assert r.status is Status.FAIL and len(r.devices) == 8


def test_infiniband_nodes_and_link_layer_filter(tmp_path):
    root = tree(tmp_path, "h100-ib-healthy")
    assert check(root, "nic_link", FULL).status is Status.PASS
    set_port_attr(root, 6, "state", "2: INIT")
    r = check(root, "nic_link", FULL)
    assert r.status is Status.FAIL and r.devices == ["mlx5_6/1"] and "state INIT" in r.message
    # A site that only counts Ethernet ports sees no fabric here.
    r = check(root, "nic_link", config(fabric={"link_layer": "ethernet", "nics": 8}))
    assert r.status is Status.FAIL and "expected 8" in r.message


def test_roce_netdev_speed_mismatch_alone_fails(tmp_path):
    root = tree(tmp_path, nic_netdev_speed={1: 100000})
    r = check(root, "nic_link", FULL)
    assert r.status is Status.FAIL and "ens2np0 at 100 Gb/s (expected 400)" in r.message
    assert check(root, "nic_link", config(fabric={"check_netdev_speed": False})).status is Status.PASS


def test_onboard_ethernet_and_ignored_devices_are_not_fabric(tmp_path):
    root = tree(tmp_path)
    assert os.path.exists(f"{root}/sys/class/net/eno1")
    assert "8 ports" in check(root, "nic_link", FULL).message
    set_port_attr(root, 7, "state", "1: DOWN")
    ignore7 = config(fabric={"ignore": ["mlx5_7"], "nics": 7})
    assert check(root, "nic_link", ignore7).status is Status.PASS


def test_bad_input_errors_name_the_path(tmp_path):
    root = tree(tmp_path)
    os.unlink(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_2/ports/1/rate"))
    r = check(root, "nic_link", FULL)
    assert r.status is Status.ERROR and "/sys/class/infiniband/mlx5_2/ports/1/rate: missing" in r.message
    assert check(root, "dcqcn", FULL).status is Status.PASS
    assert check(root, "peermem", FULL).status is Status.PASS
    root = tree(tmp_path, name="garbage")
    set_port_attr(root, 1, "rate", "fast")
    r = check(root, "nic_link", FULL)
    assert r.status is Status.ERROR and "mlx5_1/ports/1/rate" in r.message and "'400 Gb/sec (4X NDR)'" in r.message


def test_dangling_class_link_is_an_error_not_a_missing_nic(tmp_path):
    root = tree(tmp_path)
    link = f"{root}/sys/class/infiniband/mlx5_4"
    os.unlink(link)
    os.symlink("../../devices/pci0000:b9/gone/infiniband/mlx5_4", link)
    r = check(root, "nic_link")
    assert r.status is Status.ERROR and "/sys/class/infiniband/mlx5_4" in r.message and "dangling" in r.message
    assert check(root, "gpu_count").status is Status.PASS


def test_rdma_device_without_ports_dir(tmp_path):
    import shutil

    root = tree(tmp_path)
    shutil.rmtree(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_0/ports"))
    r = check(root, "nic_link")
    assert r.status is Status.ERROR and "/sys/class/infiniband/mlx5_0/ports: missing" in r.message


def test_short_count_names_nic_functions_without_rdma_device(tmp_path):
    root = tree(tmp_path, no_rdma_nics={2, 5})
    r = check(root, "nic_link", FULL)
    assert r.status is Status.FAIL and "6 fabric ports, expected 8" in r.message
    assert "NIC functions without an RDMA device: 0000:3b:00.0, 0000:ac:00.0" in r.message
    assert r.devices == ["0000:3b:00.0", "0000:ac:00.0"]
    assert check(root, "nic_link").status is Status.PASS  # no expected count: nothing to miss
    r = judge([], 2, None, ["0000:19:00.0"])
    assert r.status is Status.FAIL and r.devices == ["0000:19:00.0"] and "no fabric ports found" in r.message
