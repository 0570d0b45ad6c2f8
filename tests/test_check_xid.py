"""xid: NVRM Xid events from the kernel log on node trees whose /dev/kmsg holds
real NVRM lines (tests/data/real/nvidia), the journal fallback, and the real
/dev/kmsg of this machine for the non-blocking read."""

import json
import os
import stat
import time

import pytest

from nodes import FULL, check, config, context, tree
from slurmqual.checks import REGISTRY, run_one
from slurmqual.checks.xid import CATALOG, RECOVERY, classify, stated_recovery
from slurmqual.fsroot import FsRoot
from slurmqual.nodetree import add_kmsg, record_output
from slurmqual.probe import kmsg
from slurmqual.result import Status
from test_probe_nvsmi import real

CFG = config()["checks"]["xid"]


def xid(root, cfg=FULL):
    return check(root, "xid", cfg, level="standard")


def test_healthy_boot_log_passes(tmp_path):
    r = xid(tree(tmp_path))
    assert r.status is Status.PASS and r.message == "no Xid hardware faults in the last 24 h [/dev/kmsg]"


def test_xid_79_fails_with_gpu_and_catalog_action(tmp_path):
    r = xid(tree(tmp_path, "xid-79"))
    assert r.status is Status.FAIL and r.devices == ["0000:3a:00"]
    assert r.message.startswith("Xid 79 on GPU 0000:3a:00 (1x, last 10 min ago): GPU has fallen off the bus")
    assert r.hint == "GPU 0000:3a:00: reboot; check PCIe seating, power and cooling; RMA if it recurs"


def test_real_application_xids_never_drain(tmp_path):
    root = tree(tmp_path)
    for n, line in enumerate(real("dmesg_ctime_xid13_xid109_H100_gpud_pr46.txt").splitlines()):
        add_kmsg(root, line.split("] ", 1)[1], 85000 + n)
    r = xid(root)
    assert r.status is Status.PASS
    assert "(application errors, not drained: Xid 13 on 0000:cb:00 x3, Xid 109 on 0000:cb:00 x1)" in r.message


def test_each_event_counted_once_and_new_ones_add_up(tmp_path):
    root = tree(tmp_path, "xid-79")
    assert "(1x," in xid(root).message
    assert "(1x," in xid(root).message                 # the same record read again: not counted twice
    add_kmsg(root, "NVRM: Xid (PCI:0000:3a:00): 79, pid=0, GPU has fallen off the bus.", 86000)
    assert "(2x, last 7 min ago)" in xid(root).message


def test_window_and_reboot_clear_old_events(tmp_path, monkeypatch):
    root = tree(tmp_path, "xid-79")
    assert xid(root).status is Status.FAIL
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 2 * 86400)          # two days later, same boot
    assert xid(root, config(checks={"xid": {"window_s": 86400}})).status is Status.PASS
    monkeypatch.undo()
    root2 = tree(tmp_path, "xid-79", name="n2")
    assert xid(root2).status is Status.FAIL
    with open(f"{root2}/proc/sys/kernel/random/boot_id", "w") as fh:      # rebooted: new boot, new log
        fh.write("0f0e0d0c-0000-4000-8000-000000000001\n")
    with open(f"{root2}/dev/kmsg", "w") as fh:
        fh.write("5,0,0,-;Linux version 6.1.0-18-amd64\n")
    assert xid(root2).status is Status.PASS


def test_real_nvlink_xids_fatal_fails_nonfatal_warns(tmp_path):
    lines = real("kmsg_messages_xid149_xid145_nvlink_gpud_pr1174.txt").splitlines()
    root = tree(tmp_path)
    add_kmsg(root, lines[2], 86000)                  # 145 RLW_RXPIPE Nonfatal
    r = xid(root)
    assert r.status is Status.WARN and "Xid 145 on GPU 0018:01:00" in r.message
    add_kmsg(root, lines[0], 86100)                  # 149 NETIR Fatal
    r = xid(root)
    assert r.status is Status.FAIL and "Xid 149 on GPU 0019:01:00" in r.message and "Xid 145" in r.message


def test_real_multiline_fallen_off_the_bus_without_xid_counts_as_79(tmp_path):
    text = real("dmesg_fallen_off_bus_multiline_no_xid_nvsentinel155.txt")
    first = text.split("\n[")[0]                     # the one record with its continuation lines
    message = "\n".join(part.split("] ", 1)[-1].strip() for part in first.splitlines())
    root = tree(tmp_path)
    add_kmsg(root, message, 86000)                   # written with \x0a as /dev/kmsg escapes newlines
    r = xid(root)
    assert r.status is Status.FAIL and "Xid 79 on GPU 0000:b3:00" in r.message and "no Xid line" in r.message


def test_journal_fallback_with_cursor(tmp_path, monkeypatch):
    now = 1_800_000_000.0
    monkeypatch.setattr(time, "time", lambda: now)
    root = tree(tmp_path)
    os.unlink(f"{root}/dev/kmsg")
    since = f"--since=@{int(now - 86400)}"
    argv = ["journalctl", "-k", "-o", "json", "--no-pager", since]
    entry = {"__CURSOR": "s=ab;i=1f2;b=5b1c;m=1;t=1;x=9", "__REALTIME_TIMESTAMP": str(int((now - 300) * 1e6)),
             "MESSAGE": "NVRM: Xid (PCI:0000:4b:00): 94, pid=3321, name=python, Contained ECC error."}
    record_output(root, argv, json.dumps(entry) + "\n")
    r = xid(root)
    assert r.status is Status.FAIL and "Xid 94 on GPU 0000:4b:00 (1x, last 5 min ago): Contained ECC error" in r.message
    # Next run asks only for what came after the saved cursor.
    record_output(root, argv + ["--after-cursor=s=ab;i=1f2;b=5b1c;m=1;t=1;x=9"], "")
    r = xid(root)
    assert r.status is Status.FAIL and "(1x," in r.message
    assert xid(root, config(checks={"xid": {"journal_fallback": False}})).status is Status.ERROR


def test_no_kernel_log_at_all_is_an_error(tmp_path, monkeypatch):
    # The host has a journalctl printing an Xid; a tree without a recorded kernel
    # log must not read the host's: an error for xid, the host tool never run.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    host_line = json.dumps({"MESSAGE": "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.",
                            "__REALTIME_TIMESTAMP": str(int(time.time() * 1e6))})
    (bindir / "journalctl").write_text(f"#!/bin/sh\ntouch {tmp_path}/host-tool-ran\necho '{host_line}'\n")
    (bindir / "journalctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    root = tree(tmp_path)
    os.unlink(f"{root}/dev/kmsg")
    r = xid(root)
    assert r.status is Status.ERROR and "journalctl fallback failed" in r.message, r
    assert "journalctl: command not found in node tree" in r.message
    assert not (tmp_path / "host-tool-ran").exists()


def test_corrupt_state_is_noted_and_rebuilt(tmp_path):
    root = tree(tmp_path, "xid-79")
    ctx = context(root, FULL, level="standard")
    path = ctx.state_path(f"xid/{ctx.node_key()}.json")
    os.makedirs(os.path.dirname(path))
    open(path, "w").write("{not json")
    r = run_one(REGISTRY["xid"], ctx)
    assert r.status is Status.FAIL and "started afresh" in r.message
    assert json.load(open(path))["seq"] >= 0


def test_catalog_classification():
    assert [classify(x, "", CFG) for x in (13, 31, 43)] == ["ok"] * 3
    assert all(classify(x, "", CFG) == "fail" for x in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 154))
    assert classify(999, "", CFG) == "warn"
    custom = dict(CFG, ignore=[79], drain=[13], unknown="ignore")
    assert (classify(79, "", custom), classify(13, "", custom), classify(999, "", custom)) == ("ok", "fail", "ok")
    assert all(CATALOG[x][2] for x in CATALOG)


def kernel_lines(name: str, after: str) -> list[str]:
    """The message part of each line of a real log excerpt (after its prefix)."""
    return [line.split(after, 1)[1] for line in real(name).splitlines() if "NVRM: Xid" in line]


def test_real_contained_xid94_saying_no_reset_warns_and_does_not_drain(tmp_path):
    lines = kernel_lines("dmesg_xid48_xid63_xid94_contained_RST_No_drv550.90.07_EXCERPT.txt", "] ")
    root = tree(tmp_path)
    add_kmsg(root, lines[2], 86000)                  # 94 'Contained: SM (0x1). RST: No, D-RST: No'
    r = xid(root)
    assert r.status is Status.WARN and r.devices == ["0000:52:00"]
    assert "Xid 94 on GPU 0000:52:00" in r.message and "[the driver states: no reset needed]" in r.message
    assert r.hint == "GPU 0000:52:00: no reset needed (the driver says so); watch for a repeat"
    add_kmsg(root, lines[0], 85990)                  # the same event's DBE and pending remap: these drain
    add_kmsg(root, lines[1], 85995)
    r = xid(root)
    assert r.status is Status.FAIL and "Xid 48 on GPU 0000:52:00" in r.message and "Xid 63" in r.message
    assert r.message.index("Xid 94") > r.message.index("Xid 63")   # listed with the warnings, after the failures


def test_real_xid154_states_the_recovery_the_hint_follows(tmp_path):
    cases = [("journalctl_k_xid48_171_63_xid154_drain_and_reset_EXCERPT.txt", "kernel: ", "0000:55:00",
              "drain and reset", "drain the GPU, then reset it (nvidia-smi -r -i <gpu>) or reboot"),
             ("talos_kern_gsp_rpc_timeout_xid154_gpu_reset_required_issue446_EXCERPT.txt", "]: ", "0000:0b:00",
              "GPU reset required", "reset the GPU (nvidia-smi -r -i <gpu>) or reboot"),
             ("nvrm_xid79_xid154_os_reboot_EXCERPT.txt", "NVRM: Xid", "0000:01:00",
              "node reboot required", "reboot the node")]
    for n, (name, after, pci, said, action) in enumerate(cases):
        root = tree(tmp_path, name=f"n{n}")
        for i, message in enumerate(kernel_lines(name, after)):
            add_kmsg(root, message if message.startswith("NVRM") else "NVRM: Xid" + message, 86000 + i)
        r = xid(root)
        assert r.status is Status.FAIL, name
        assert f"Xid 154 on GPU {pci}" in r.message and f"[the driver states: {said}]" in r.message, r.message
        assert f"GPU {pci}: {action}" in r.hint.split("; "), r.hint


def test_real_mig_attributed_xid_is_read_and_uncontained_reset_fails(tmp_path):
    lines = real("nvrm_xid94_95_contained_uncontained_mig_driver_source_comment.txt").splitlines()
    root = tree(tmp_path)
    add_kmsg(root, lines[0], 86000)                  # '(PCI:0000:01:00 GPU-I:05): 94, ... RST: No, D-RST: No'
    r = xid(root)
    assert r.status is Status.WARN and "Xid 94 on GPU 0000:01:00" in r.message
    add_kmsg(root, lines[2], 86100)                  # 95 'Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No'
    r = xid(root)
    assert r.status is Status.FAIL and "Xid 95 on GPU 0000:01:00" in r.message and "GPU reset required" in r.message


def test_stated_recovery_of_every_real_line_and_its_precedence():
    said = {}
    for name, after in (("dmesg_xid48_xid63_xid94_contained_RST_No_drv550.90.07_EXCERPT.txt", "NVRM: "),
                        ("journalctl_k_xid48_171_63_xid154_drain_and_reset_EXCERPT.txt", "NVRM: "),
                        ("talos_kern_gsp_rpc_timeout_xid154_gpu_reset_required_issue446_EXCERPT.txt", "NVRM: "),
                        ("nvrm_xid79_xid154_os_reboot_EXCERPT.txt", "NVRM: "),
                        ("nvrm_xid94_95_contained_uncontained_mig_driver_source_comment.txt", "NVRM: "),
                        ("dmesg_ctime_xid13_xid109_H100_gpud_pr46.txt", "NVRM: ")):
        for message in kernel_lines(name, after):
            said[message.split("): ", 1)[1][:60]] = stated_recovery(message)
    stated = {k: v for k, v in said.items() if v}
    assert sorted(stated.values()) == ["drain_and_reset", "none", "none", "none", "reboot", "reset", "reset"]
    assert all(v is None for k, v in said.items() if not k.startswith(("94", "95", "154")))
    assert set(RECOVERY) >= set(stated.values())
    # What the message says beats the catalog both ways; an ignored Xid stays ignored.
    rst_yes = "pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No"
    assert classify(999, rst_yes, dict(CFG, unknown="ignore")) == "fail"
    assert classify(94, "pid=7062, Contained: CE User Channel (0x9). RST: No, D-RST: No", CFG) == "warn"
    assert classify(95, rst_yes, dict(CFG, ignore=[95])) == "ok"
    assert stated_recovery("GPU recovery action changed from 0x0 (None) to 0x3") == "drain_p2p"   # label left out
    assert stated_recovery("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)") == "none"


def test_this_machines_dev_kmsg_is_read_without_blocking():
    if not os.path.exists("/dev/kmsg") or not stat.S_ISCHR(os.stat("/dev/kmsg").st_mode):
        pytest.skip("no /dev/kmsg character device here")
    fs = FsRoot("/")
    try:
        start = time.monotonic()
        records = kmsg.read_kmsg(fs, -1, time.time())
    except kmsg.KmsgUnavailable as exc:
        pytest.skip(f"/dev/kmsg not readable here: {exc}")
    assert time.monotonic() - start < 10
    if records:
        assert all(b.seq > a.seq for a, b in zip(records, records[1:]))
        again = kmsg.read_kmsg(fs, records[-1].seq, time.time())
        assert all(r.seq > records[-1].seq for r in again)
