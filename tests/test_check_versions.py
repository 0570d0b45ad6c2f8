"""versions: driver / NIC firmware / kernel vs pins; recorded in ctx.memo["versions"]."""

import os

from nodes import config, context, tree
from slurmqual.checks import REGISTRY, run_one
from slurmqual.checks.versions import judge
from slurmqual.result import Status

FOUND = {"driver": "550.54.15", "nic_fw": "28.39.1002", "kernel": "6.1.0-18-amd64"}


def test_judge_pure():
    assert judge(FOUND, {}, {"28.39.1002"}).status is Status.PASS
    assert judge(FOUND, dict(FOUND), {"28.39.1002"}).status is Status.PASS
    r = judge(FOUND, {"kernel": "6.1.0-21-amd64"}, {"28.39.1002"})
    assert r.status is Status.FAIL and r.devices == ["kernel"] and "kernel 6.1.0-18-amd64 (pinned 6.1.0-21-amd64)" in r.message
    r = judge(dict(FOUND, driver=None), {"driver": "550.54.15"}, set())
    assert "driver unknown (pinned 550.54.15)" in r.message


def _run(root, cfg=None):
    ctx = context(root, cfg, level="standard")
    return run_one(REGISTRY["versions"], ctx), ctx


def test_pins_and_memo(tmp_path):
    root = tree(tmp_path, nic_fw={3: "28.36.1010"})
    r, ctx = _run(root, config(checks={"versions": {"driver": "535.161.08"}}))
    assert r.status is Status.FAIL
    assert "driver 550.54.15 (pinned 535.161.08)" in r.message and "mixed firmware 28.36.1010, 28.39.1002" in r.message
    assert ctx.memo["versions"] == {"driver": "550.54.15", "nic_fw": "28.36.1010,28.39.1002", "kernel": "6.1.0-18-amd64",
                                    "nccl": "2.21.5"}


def test_healthy_pinned_passes_and_fw_pin_fails(tmp_path):
    root = tree(tmp_path, "h100-ib-healthy")
    r, ctx = _run(root, config(checks={"versions": FOUND}))
    assert r.status is Status.PASS and ctx.memo["versions"] == dict(FOUND, nccl="2.21.5")
    r, _ = _run(root, config(checks={"versions": {"nic_fw": "28.40.1000"}}))
    assert r.status is Status.FAIL and "nic_fw 28.39.1002 (pinned 28.40.1000)" in r.message


def test_open_module_version_line_parses(tmp_path):
    root = tree(tmp_path, open_kernel_module=True, driver="560.35.03")
    r, ctx = _run(root)
    assert r.status is Status.PASS and ctx.memo["versions"]["driver"] == "560.35.03"


def test_no_driver_loaded_is_recorded_as_absent(tmp_path):
    root = tree(tmp_path)
    os.unlink(f"{root}/proc/driver/nvidia/version")
    r, ctx = _run(root)
    assert r.status is Status.PASS and "driver" not in ctx.memo["versions"]


def test_garbage_driver_version_and_missing_fw_are_errors(tmp_path):
    root = tree(tmp_path)
    with open(f"{root}/proc/driver/nvidia/version", "w") as fh:
        fh.write("hello\n")
    r, _ = _run(root)
    assert r.status is Status.ERROR and "/proc/driver/nvidia/version" in r.message
    root = tree(tmp_path, name="nofw")
    os.unlink(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_5/fw_ver"))
    r, _ = _run(root)
    assert r.status is Status.ERROR and "/sys/class/infiniband/mlx5_5/fw_ver: missing" in r.message


def test_host_nccl_from_library_name_and_pin(tmp_path):
    root = tree(tmp_path, nccl="2.23.4")
    r, ctx = _run(root, config(checks={"versions": {"nccl": "2.21.5"}}))
    assert r.status is Status.FAIL and "nccl 2.23.4 (pinned 2.21.5)" in r.message
    assert ctx.memo["versions"]["nccl"] == "2.23.4"
    assert os.path.islink(f"{root}/usr/lib/x86_64-linux-gnu/libnccl.so.2")
    none = tree(tmp_path, name="nonccl", nccl=None)
    r, ctx = _run(none, config(checks={"versions": {"nccl": "2.21.5"}}))
    assert r.status is Status.PASS and "nccl" not in ctx.memo["versions"]  # jobs bring their own NCCL
