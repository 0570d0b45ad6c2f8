"""peermem: nvidia_peermem / nv_peer_mem in /proc/modules, or dma-buf prerequisites."""

import os

from nodes import check, config, tree
from slurmqual.checks.peermem import judge_dmabuf, judge_peermem
from slurmqual.nodetree import add_module, remove_module
from slurmqual.probe.nvidia import Driver
from slurmqual.result import Status


def test_judge_peermem_pure():
    assert judge_peermem({"nvidia", "nvidia_peermem"}).status is Status.PASS
    assert judge_peermem({"nvidia", "nv_peer_mem"}).status is Status.PASS
    r = judge_peermem({"nvidia", "mlx5_ib"})
    assert r.status is Status.FAIL and r.devices == ["nvidia_peermem"]


def test_judge_dmabuf_pure():
    assert judge_dmabuf(Driver("550.54.15", True), "6.1.0-18-amd64").status is Status.PASS
    r = judge_dmabuf(Driver("510.47.03", False), "5.4.0-150-generic")
    assert r.status is Status.FAIL
    assert "proprietary" in r.message and "510.47.03 < 515" in r.message and "kernel 5.4.0-150-generic < 5.12" in r.message


def test_no_peermem_tree_fails_with_modprobe_hint(tmp_path):
    r = check(tree(tmp_path, "no-peermem"), "peermem")
    assert r.status is Status.FAIL and "modprobe nvidia-peermem" in r.hint


def test_legacy_module_and_dmabuf_on_trees(tmp_path):
    root = tree(tmp_path, modules=["nv_peer_mem", "nvidia", "mlx5_ib"])
    assert check(root, "peermem").status is Status.PASS
    dmabuf = config(node={"gpudirect": "dmabuf"})
    assert check(root, "peermem", dmabuf).status is Status.FAIL  # proprietary module
    ok = tree(tmp_path, name="open", open_kernel_module=True, modules=["nvidia"])
    assert check(ok, "peermem", dmabuf).status is Status.PASS
    old = tree(tmp_path, name="old", open_kernel_module=True, kernel="5.10.0-28-amd64")
    r = check(old, "peermem", dmabuf)
    assert r.status is Status.FAIL and "kernel 5.10.0-28-amd64 < 5.12" in r.message


def test_break_and_repair_helpers(tmp_path):
    root = tree(tmp_path)
    remove_module(root, "nvidia_peermem")
    assert check(root, "peermem").status is Status.FAIL
    add_module(root, "nvidia_peermem")
    assert check(root, "peermem").status is Status.PASS


def test_proc_modules_bad_input(tmp_path):
    root = tree(tmp_path)
    with open(f"{root}/proc/modules", "w") as fh:
        fh.write("this is not proc modules\n")
    r = check(root, "peermem")
    assert r.status is Status.ERROR and "/proc/modules" in r.message and "not in /proc/modules format" in r.message
    os.unlink(f"{root}/proc/modules")
    r = check(root, "peermem")
    assert r.status is Status.ERROR and "cannot read /proc/modules: missing" in r.message
    os.makedirs(f"{root}/proc/modules")
    r = check(root, "peermem")
    assert r.status is Status.ERROR and "is a directory" in r.message
    assert check(root, "nic_link").status is Status.PASS  # the others still run


def test_dmabuf_without_driver_version_is_error(tmp_path):
    root = tree(tmp_path)
    os.unlink(f"{root}/proc/driver/nvidia/version")
    r = check(root, "peermem", config(node={"gpudirect": "dmabuf"}))
    assert r.status is Status.ERROR and "/proc/driver/nvidia/version" in r.message
