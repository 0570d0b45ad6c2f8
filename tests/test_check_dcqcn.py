"""dcqcn: sysfs ECN rp/np flags per priority; at standard level the firmware
mask from mlxconfig (real output), hung and missing tool; n/a on InfiniBand."""

import os
import time

from nodes import check, config, context, tree
from slurmqual.checks import REGISTRY, run_one
from slurmqual.checks.dcqcn import judge_sysfs, parse_mlxconfig
from slurmqual.nodetree import record_mlxconfig
from slurmqual.result import Status

SAMPLE = "mlx/mlxconfig_query_CX4Lx_dual_port_ROCE_CC_PRIO_MASK_P1_P2_DCQCN_full.txt"
ALL = list(range(8))


def test_judge_sysfs_pure():
    on = {k: {p: "1" for p in ALL} for k in ("roce_rp", "roce_np")}
    assert judge_sysfs({"ens1np0": on}, ALL) == ([], [])
    off = {"roce_rp": {**on["roce_rp"], 3: "0"}, "roce_np": {p: "0" for p in ALL}}
    problems, devices = judge_sysfs({"ens1np0": on, "ens2np0": off}, ALL)
    assert devices == ["ens2np0"] and problems == ["ens2np0: rp off on prio 3; np off on prio 0,1,2,3,4,5,6,7"]
    assert judge_sysfs({"ens2np0": off}, [5])[1] == ["ens2np0"]


def test_dcqcn_off_example_and_partial_priorities(tmp_path):
    r = check(tree(tmp_path, "dcqcn-off"), "dcqcn")
    assert r.status is Status.FAIL and r.devices == ["mlx5_2 (ens3np0)"] and "mlxconfig -d 0000:3b:00.0 set ROCE_CC_PRIO_MASK_P1=255" in r.hint
    assert "/sys/class/net/ens3np0/ecn/roce_rp/enable/$p" in r.hint
    root = tree(tmp_path, name="p", dcqcn_off={4: [3]})
    r = check(root, "dcqcn")
    assert r.status is Status.FAIL and r.devices == ["mlx5_4 (ens5np0)"] and "mlx5_4 (ens5np0): rp off on prio 3" in r.message
    assert check(root, "dcqcn", config(checks={"dcqcn": {"priorities": [5]}})).status is Status.PASS


def test_infiniband_is_not_applicable_not_pass(tmp_path):
    r = check(tree(tmp_path, "h100-ib-healthy"), "dcqcn", level="standard")
    assert r.status is Status.NA and "InfiniBand" in r.message


def test_missing_ecn_file_is_error_with_path(tmp_path):
    root = tree(tmp_path)
    os.unlink(os.path.realpath(f"{root}/sys/class/net/ens1np0/ecn/roce_np/enable/7"))
    r = check(root, "dcqcn")
    assert r.status is Status.ERROR and "/sys/class/net/ens1np0/ecn/roce_np/enable/7: missing" in r.message


def test_parse_real_mlxconfig_sample(samples):
    assert parse_mlxconfig((samples / SAMPLE).read_text()) == {"ROCE_CC_PRIO_MASK_P1": 255, "ROCE_CC_PRIO_MASK_P2": 255}
    assert parse_mlxconfig("garbage\n") == {}


def test_firmware_mask_from_real_output_passes(tmp_path, samples):
    r = check(record_mlxconfig(tree(tmp_path), (samples / SAMPLE).read_text()), "dcqcn", level="standard")
    assert r.status is Status.PASS and "mlxconfig" not in r.message, r


def test_firmware_mask_lost_after_reimage_fails(tmp_path, samples):
    text = (samples / SAMPLE).read_text().replace("ROCE_CC_PRIO_MASK_P1                        255",
                                                  "ROCE_CC_PRIO_MASK_P1                        0")
    r = check(record_mlxconfig(tree(tmp_path), text), "dcqcn", level="standard")
    assert r.status is Status.FAIL and "ROCE_CC_PRIO_MASK_P1=0 (expected 255)" in r.message
    assert len(r.devices) == 8 and r.devices[0] == "0000:19:00.0"  # NIC 0, beside GPU 0000:18:00.0


def test_garbage_mlxconfig_output_is_error(tmp_path):
    r = check(record_mlxconfig(tree(tmp_path), "-E- Failed to open device\n"), "dcqcn", level="standard")
    assert r.status is Status.ERROR and "no ROCE_CC_PRIO_MASK_P1 in output" in r.message


def test_hung_mlxconfig_is_error_within_timeout(tmp_path):
    ctx = context(record_mlxconfig(tree(tmp_path), "", hang=True), level="standard", command_timeout=0.5)
    start = time.monotonic()
    r = run_one(REGISTRY["dcqcn"], ctx)
    assert time.monotonic() - start < 5
    assert r.status is Status.ERROR and "timed out" in r.message


def test_missing_mlxconfig_auto_notes_it_required_errors(tmp_path, monkeypatch):
    # Not recorded on the tree: missing there, even with an mlxconfig on the host's PATH.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mlxconfig").write_text(f"#!/bin/sh\ntouch {tmp_path}/host-tool-ran\n")
    (bindir / "mlxconfig").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    root = tree(tmp_path)
    r = check(root, "dcqcn", level="standard")
    assert r.status is Status.PASS and "mlxconfig not installed" in r.message
    r = check(root, "dcqcn", config(checks={"dcqcn": {"mlxconfig": True}}), level="standard")
    assert r.status is Status.ERROR and "mlxconfig: command not found in node tree" in r.message
    assert not (tmp_path / "host-tool-ran").exists()


def test_fast_level_and_switched_off_never_run_mlxconfig(tmp_path):
    root = record_mlxconfig(tree(tmp_path), "-E- broken\n", rc=1)  # were it run, dcqcn would be an error
    assert check(root, "dcqcn", level="standard").status is Status.ERROR
    assert check(root, "dcqcn", level="fast").status is Status.PASS
    assert check(root, "dcqcn", config(checks={"dcqcn": {"mlxconfig": False}}), level="standard").status is Status.PASS


def test_roce_port_without_netdev_is_error(tmp_path):
    import shutil

    root = tree(tmp_path)
    os.unlink(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0"))
    shutil.rmtree(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_1/device/net"))
    r = check(root, "dcqcn")
    assert r.status is Status.ERROR and "mlx5_1/1 has no netdev" in r.message
