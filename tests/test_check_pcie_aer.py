"""pcie_aer: AER statistics of GPUs, NICs and the bridges above them."""

import os

from nodes import FULL, check, config, tree
from slurmqual.fsroot import FsError
from slurmqual.nodetree import AER_CORRECTABLE, AER_UNCORRECTABLE, NodeSpec, set_aer
from slurmqual.probe import pci
from slurmqual.result import Status

REAL = os.path.join(os.path.dirname(__file__), "data", "real", "pci")
GPU3 = "0000:4b:00.0"     # nodetree: GPU 3 behind host bridge 0x48
BRIDGE3 = "0000:4a:00.0"  # the switch downstream port above it


def test_healthy_node_passes_and_reads_gpus_nics_and_bridges(tmp_path):
    r = check(tree(tmp_path), "pcie_aer", FULL)
    assert r.status is Status.PASS
    # 8 GPUs + 8 NICs + per rail: root port, switch upstream port, 2 downstream ports
    assert r.message.startswith("48 PCIe functions")


def test_nonfatal_on_a_gpu_fails_naming_gpu_and_error(tmp_path):
    root = tree(tmp_path, "pcie-aer-nonfatal")
    r = check(root, "pcie_aer", FULL)
    assert r.status is Status.FAIL
    assert f"GPU {GPU3}: 2 nonfatal (CmpltTO 2)" in r.message and r.devices == [f"GPU {GPU3}"]
    assert "reseat" in r.hint


def test_fatal_on_the_switch_port_above_a_gpu_names_the_bridge(tmp_path):
    root = tree(tmp_path, NodeSpec(aer={("gpu_bridge", 3, "fatal"): {"SDES": 1}}))
    r = check(root, "pcie_aer", FULL)
    assert r.status is Status.FAIL
    assert f"bridge {BRIDGE3} (above GPU {GPU3}): 1 fatal (SDES 1)" in r.message
    assert check(root, "pcie_aer", config(checks={"pcie_aer": {"bridges": False}})).status is Status.PASS


def test_uncorrectable_can_be_set_to_warn(tmp_path):
    root = tree(tmp_path, "pcie-aer-nonfatal")
    assert check(root, "pcie_aer", config(checks={"pcie_aer": {"on_uncorrectable": "warn"}})).status is Status.WARN


def test_correctable_errors_warn_by_rate_over_uptime(tmp_path):
    burst = {("nic", 4, "correctable"): {"BadTLP": 900, "RxErr": 100}}
    fresh = check(tree(tmp_path, NodeSpec(aer=burst, uptime_s=3600.0), name="a"), "pcie_aer", FULL)
    assert fresh.status is Status.WARN and "mlx5_4" in fresh.message and "BadTLP 900" in fresh.message
    old = check(tree(tmp_path, NodeSpec(aer=burst, uptime_s=30 * 86400.0), name="b"), "pcie_aer", FULL)
    assert old.status is Status.PASS  # 1000 in 30 days: 1.4/h


def test_repair_clears_the_failure(tmp_path):
    root = tree(tmp_path, "pcie-aer-nonfatal")
    assert check(root, "pcie_aer", FULL).status is Status.FAIL
    set_aer(root, GPU3, "nonfatal", {})  # what the reboot after the reseat leaves
    assert check(root, "pcie_aer", FULL).status is Status.PASS


def test_no_aer_files_is_not_applicable(tmp_path):
    root = tree(tmp_path)
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f.startswith("aer_dev_"):
                os.unlink(os.path.join(dirpath, f))
    r = check(root, "pcie_aer", FULL)
    assert r.status is Status.NA and "no AER statistics" in r.message


def test_malformed_file_is_an_error_never_a_failure(tmp_path):
    root = tree(tmp_path)
    path = os.path.realpath(f"{root}/sys/bus/pci/devices/{GPU3}/aer_dev_fatal")
    with open(path, "w") as fh:
        fh.write("Undefined 0\nDLP 0\n")  # truncated: no TOTAL line
    r = check(root, "pcie_aer", FULL)
    assert r.status is Status.ERROR and "TOTAL_ERR" in r.message and GPU3 in r.message
    with open(path, "w") as fh:
        fh.write("garbage here now\n")
    assert check(root, "pcie_aer", FULL).status is Status.ERROR


def test_parser_reads_the_kernel_format_and_unknown_newer_names():
    # Names as Linux 6.1 prints them (the same list the fwupd project's umockdev
    # record of a real AMD system shows), plus a name newer kernels added.
    text = "\n".join(f"{n} {i}" for i, n in enumerate(AER_UNCORRECTABLE)) + "\nDMWrReqBlocked 4\nTOTAL_ERR_FATAL 157\n"
    counts, total = pci.parse_aer(text, "x")
    assert total == 157 and counts["CmpltTO"] == 5 and counts["DMWrReqBlocked"] == 4
    counts, total = pci.parse_aer("\n".join(f"{n} 0" for n in AER_CORRECTABLE) + "\nTOTAL_ERR_COR 0\n", "y")
    assert total == 0 and set(counts) == set(AER_CORRECTABLE)
    try:
        pci.parse_aer("RxErr x\n", "z")
    except FsError as exc:
        assert "Name count" in exc.reason
    else:
        raise AssertionError("malformed line accepted")


def real_aer(kind: str) -> str:
    """The kernel ABI document's sample of one file (older kernels' long names)."""
    with open(os.path.join(REAL, f"aer_dev_{kind}_long_names_kernel_abi_doc.txt"), encoding="utf-8") as fh:
        return fh.read()


def write_aer(root: str, bdf: str, kind: str, text: str) -> None:
    with open(os.path.realpath(f"{root}/sys/bus/pci/devices/{bdf}/aer_dev_{kind}"), "w") as fh:
        fh.write(text)


def test_parser_reads_older_kernels_long_names_as_the_short_ones():
    counts, total = pci.parse_aer(real_aer("correctable"), "c")
    assert total == 2 and counts == {n: 2 if n == "RxErr" else 0 for n in AER_CORRECTABLE}
    for kind in ("fatal", "nonfatal"):
        counts, total = pci.parse_aer(real_aer(kind), kind)
        assert total == 0 and set(counts) <= set(AER_UNCORRECTABLE) and len(counts) == 17
    assert pci.parse_aer("Completion  Timeout 3\nTOTAL_ERR_NONFATAL 3\n", "x")[0] == {"CmpltTO": 3}


def test_real_long_name_files_are_judged_not_an_error(tmp_path):
    root = tree(tmp_path, NodeSpec(uptime_s=60.0))
    for kind in ("fatal", "nonfatal", "correctable"):
        write_aer(root, GPU3, kind, real_aer(kind))
    # 2 receiver errors within a minute of boot: above 60/h, named as a newer kernel names them.
    r = check(root, "pcie_aer", FULL)
    assert r.status is Status.WARN and f"GPU {GPU3}: 2 correctable in 0.0 h" in r.message and "RxErr 2)" in r.message
    assert check(root, "pcie_aer", config(checks={"pcie_aer": {"correctable_per_hour": 1000}})).status is Status.PASS


def test_long_name_uncorrectable_fails_like_the_short_name_one(tmp_path):
    # The document's all-zero nonfatal sample with a completion timeout counted in it.
    text = real_aer("nonfatal").replace("Completion Timeout 0", "Completion Timeout 2")
    root = tree(tmp_path)
    write_aer(root, GPU3, "nonfatal", text.replace("TOTAL_ERR_NONFATAL 0", "TOTAL_ERR_NONFATAL 2"))
    long_names = check(root, "pcie_aer", FULL)
    short_names = check(tree(tmp_path, "pcie-aer-nonfatal", name="short"), "pcie_aer", FULL)
    assert long_names.status is Status.FAIL and long_names.message == short_names.message
    assert f"GPU {GPU3}: 2 nonfatal (CmpltTO 2)" in long_names.message
