"""Each check: pass on healthy trees, each failure mode, and bad input -> error."""

import os

import pytest

from nodes import check, config, tree
from slurmqual.nodetree import EXAMPLES, NodeSpec, remove_module, set_port_attr
from slurmqual.result import Status

FULL = config(node={"gpus": 8}, fabric={"nics": 8, "rate_gbps": 400})
FAST = ["peermem", "nic_link", "dcqcn", "gpu_nic_affinity", "gpu_count", "pcie_link", "ib_counters"]

# example -> the check it must fail (all others pass or are n/a)
BROKEN = {
    "no-peermem": "peermem", "nic-down": "nic_link", "nic-slow": "nic_link", "nic-missing": "nic_link",
    "dcqcn-off": "dcqcn", "numa-misaligned": "gpu_nic_affinity", "gpu-missing": "gpu_count",
    "pcie-degraded": "pcie_link", "ib-counters-high": "ib_counters",
}


@pytest.mark.parametrize("example", ["h100-roce-healthy", "h100-ib-healthy"])
def test_healthy_examples_pass_every_check(tmp_path, example):
    root = tree(tmp_path, example)
    for name in FAST + ["versions"]:
        r = check(root, name, FULL, level="standard")
        assert r.status in (Status.PASS, Status.NA), (name, r)
    assert check(root, "dcqcn", FULL).status is (Status.NA if "ib" in example else Status.PASS)


def test_every_example_is_tested():
    assert set(EXAMPLES) == set(BROKEN) | {"h100-roce-healthy", "h100-ib-healthy"}


@pytest.mark.parametrize("example,failing", sorted(BROKEN.items()))
def test_broken_example_fails_exactly_its_check(tmp_path, example, failing):
    root = tree(tmp_path, example)
    statuses = {name: check(root, name, FULL).status for name in FAST}
    assert statuses[failing] is Status.FAIL
    others = {n: s for n, s in statuses.items() if n != failing}
    assert all(s in (Status.PASS, Status.NA) for s in others.values()), others
    r = check(root, failing, FULL)
    assert r.hint and r.message


def test_nic_failures_name_device_and_seen_vs_expected(tmp_path):
    r = check(tree(tmp_path, "nic-slow"), "nic_link", FULL)
    assert r.devices == ["mlx5_5/1"] and "200 Gb/s (expected 400)" in r.message
    r = check(tree(tmp_path, "nic-down", name="down"), "nic_link", FULL)
    assert r.devices == ["mlx5_3/1"] and "state DOWN" in r.message and "phys_state Disabled" in r.message
    r = check(tree(tmp_path, "nic-missing", name="missing"), "nic_link", FULL)
    assert "7 fabric ports, expected 8" in r.message


def test_nic_rate_without_config_uses_fastest_port(tmp_path):
    root = tree(tmp_path, "nic-slow")
    r = check(root, "nic_link")  # defaults: no expected count or rate
    assert r.status is Status.FAIL and r.devices == ["mlx5_5/1"]
    # A uniformly 200G node is consistent: passes without config, fails against a 400G expectation.
    root = tree(tmp_path, name="all200", rate_gbps=200)
    assert check(root, "nic_link").status is Status.PASS
    assert check(root, "nic_link", FULL).status is Status.FAIL


def test_roce_netdev_speed_mismatch_alone_fails(tmp_path):
    root = tree(tmp_path, nic_netdev_speed={1: 100000})
    r = check(root, "nic_link", FULL)
    assert r.status is Status.FAIL and "ens2np0 at 100 Gb/s (expected 400)" in r.message


def test_onboard_ethernet_and_nvswitch_are_not_counted(tmp_path):
    root = tree(tmp_path)
    assert os.path.exists(f"{root}/sys/class/net/eno1")
    assert "8 ports" in check(root, "nic_link", FULL).message
    assert check(root, "gpu_count", FULL).message.startswith("8 GPUs")


def test_peermem_legacy_module_and_dmabuf(tmp_path):
    root = tree(tmp_path, modules=["nv_peer_mem", "nvidia", "mlx5_ib"])
    assert check(root, "peermem").status is Status.PASS
    dmabuf = config(node={"gpudirect": "dmabuf"})
    assert check(root, "peermem", dmabuf).status is Status.FAIL  # proprietary module
    ok = tree(tmp_path, name="open", open_kernel_module=True, modules=["nvidia"])
    assert check(ok, "peermem", dmabuf).status is Status.PASS
    old = tree(tmp_path, name="old", open_kernel_module=True, kernel="5.10.0-28-amd64")
    r = check(old, "peermem", dmabuf)
    assert r.status is Status.FAIL and "kernel 5.10.0-28-amd64 < 5.12" in r.message


def test_dcqcn_partial_priorities_and_config(tmp_path):
    root = tree(tmp_path, dcqcn_off={4: [3]})
    r = check(root, "dcqcn")
    assert r.status is Status.FAIL and r.devices == ["ens5np0"] and "rp off on prio 3" in r.message
    only_prio_5 = config(checks={"dcqcn": {"priorities": [5]}})
    assert check(root, "dcqcn", only_prio_5).status is Status.PASS


def test_affinity_numa_minus_one_and_switch_and_pinning(tmp_path):
    root = tree(tmp_path, gpu_numa={2: -1})
    r = check(root, "gpu_nic_affinity")
    assert r.status is Status.FAIL and "numa_node -1" in r.message and r.devices == ["0000:3a:00.0"]
    root = tree(tmp_path, name="sw")
    strict = config(checks={"gpu_nic_affinity": {"same_pcie_switch": True}})
    assert check(root, "gpu_nic_affinity", strict).status is Status.PASS
    pinned_wrong = config(checks={"gpu_nic_affinity": {"gpu_nic_map": {"0000:18:00.0": "mlx5_7"}}})
    r = check(root, "gpu_nic_affinity", pinned_wrong)
    assert r.status is Status.FAIL and "pinned NIC mlx5_7 on NUMA 1" in r.message
    single = tree(tmp_path, name="single", sockets=1, gpu_numa={0: -1})
    assert check(single, "gpu_nic_affinity").status is Status.PASS  # -1 is normal on one socket


def test_pcie_gpu_idle_speed_is_not_degraded_but_width_is(tmp_path):
    root = tree(tmp_path, gpu_link={0: (16, "2.5 GT/s PCIe")})
    assert check(root, "pcie_link").status is Status.PASS
    warn = config(checks={"pcie_link": {"on_degraded": "warn"}})
    assert check(tree(tmp_path, "pcie-degraded", name="d"), "pcie_link", warn).status is Status.WARN


def test_versions_pins_and_memo(tmp_path):
    from slurmqual.checks import REGISTRY, Context, run_one
    from slurmqual.fsroot import FsRoot

    root = tree(tmp_path, nic_fw={3: "28.36.1010"})
    ctx = Context(FsRoot(root), config(checks={"versions": {"driver": "535.161.08"}}), level="standard")
    r = run_one(REGISTRY["versions"], ctx)
    assert r.status is Status.FAIL
    assert "driver 550.54.15 (pinned 535.161.08)" in r.message and "mixed firmware" in r.message
    assert ctx.memo["versions"]["driver"] == "550.54.15" and ctx.memo["versions"]["kernel"] == "6.1.0-18-amd64"


# -- bad input: the check errors with the path, the others still run -----------

def test_port_without_rate_errors_nic_link_only(tmp_path):
    root = tree(tmp_path)
    os.unlink(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_2/ports/1/rate"))
    r = check(root, "nic_link", FULL)
    assert r.status is Status.ERROR and "/sys/class/infiniband/mlx5_2/ports/1/rate: missing" in r.message
    assert check(root, "dcqcn", FULL).status is Status.PASS
    assert check(root, "peermem", FULL).status is Status.PASS


def test_garbage_rate_and_state_formats(tmp_path):
    root = tree(tmp_path)
    set_port_attr(root, 1, "rate", "fast")
    r = check(root, "nic_link", FULL)
    assert r.status is Status.ERROR and "expected e.g. '400 Gb/sec (4X NDR)'" in r.message


def test_directory_where_file_expected_and_broken_symlink(tmp_path):
    root = tree(tmp_path)
    os.unlink(f"{root}/proc/modules")
    os.makedirs(f"{root}/proc/modules")
    r = check(root, "peermem")
    assert r.status is Status.ERROR and "/proc/modules" in r.message and "is a directory" in r.message
    # A device symlink pointing nowhere: numa_node read fails, affinity errors.
    link = f"{root}/sys/bus/pci/devices/0000:18:00.0"
    os.unlink(link)
    os.symlink("../../../devices/pci0000:15/gone", link)
    r = check(root, "gpu_nic_affinity")
    assert r.status is Status.ERROR and "0000:18:00.0" in r.message


def test_malformed_proc_modules(tmp_path):
    root = tree(tmp_path)
    with open(f"{root}/proc/modules", "w") as fh:
        fh.write("this is not proc modules\n")
    r = check(root, "peermem")
    assert r.status is Status.ERROR and "not in /proc/modules format" in r.message


def test_missing_ecn_file_and_counters(tmp_path):
    root = tree(tmp_path)
    os.unlink(os.path.realpath(f"{root}/sys/class/net/ens1np0/ecn/roce_np/enable/7"))
    r = check(root, "dcqcn")
    assert r.status is Status.ERROR and "ecn/roce_np/enable/7" in r.message
    with open(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"), "w") as fh:
        fh.write("lots\n")
    r = check(root, "ib_counters")
    assert r.status is Status.ERROR and "expected an integer" in r.message


def test_break_and_repair_helpers(tmp_path):
    root = tree(tmp_path)
    remove_module(root, "nvidia_peermem")
    assert check(root, "peermem").status is Status.FAIL
    from slurmqual.nodetree import add_module

    add_module(root, "nvidia_peermem")
    assert check(root, "peermem").status is Status.PASS


def test_gpus_from_proc_when_no_pci(tmp_path):
    from slurmqual.fsroot import FsRoot
    from slurmqual.probe import pci

    root = tree(tmp_path)
    import shutil

    shutil.rmtree(f"{root}/sys/bus/pci")
    gpus = pci.gpus(FsRoot(root))
    assert len(gpus) == 8 and gpus[0].bdf == "0000:18:00.0"
    assert check(root, "gpu_count", FULL).status is Status.PASS
    assert NodeSpec().gpus == 8
