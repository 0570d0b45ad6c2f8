"""The repair ladder without a cluster: plans from real check results, the
ownership of its reasons, the GPU reset guard on real `nvidia-smi -q -x`
outputs (tests/data/real/nvidia: with and without processes), and the hook
flow against a stub scontrol (tests/test_hooks_unit.py's)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from slurmqual import remediation
from slurmqual.checks import xid
from slurmqual.nodetree import add_kmsg, record_output
from slurmqual.slurm.adapter import NodeInfo
from test_hooks_unit import _fresh_logger, calls, run, setup  # noqa: F401 - the fixture is used by name

REAL = os.path.join(os.path.dirname(__file__), "data", "real", "nvidia")
CFG = {"enabled": True, "checks": {}, "xid": {}, "max_auto": 2, "window_s": 7 * 86400.0}
XID_CFG = {"window_s": 86400.0, "drain": [], "ignore": [], "unknown": "warn"}


def xid_result(*events):
    """A real xid check result (xid.judge) for (xid, pci, text) events a minute old."""
    now = time.time()
    return xid.judge([(now - 60, x, pci, text) for x, pci, text in events], now, XID_CFG)


def test_plan_maps_xid_classes_to_their_catalog_action():
    assert remediation.plan([xid_result((79, "0000:18:00", "GPU has fallen off the bus."))], [], CFG, time.time()) \
        .action == "reboot"
    p = remediation.plan([xid_result((48, "0000:2a:00", "An uncorrectable double bit error"))], [], CFG, time.time())
    assert (p.action, p.gpus) == ("reset", ("0000:2a:00",))
    assert p.reason.startswith("slurmqual: reset: xid: Xid 48 on GPU 0000:2a:00")
    rma = remediation.plan([xid_result((64, "0000:2a:00", "row remapper failure"))], [], CFG, time.time())
    assert rma.action == "rma" and rma.reason.startswith("slurmqual: rma: xid: Xid 64")
    # Several faults: the most severe action; the site's override wins over the catalog.
    both = xid_result((48, "0000:2a:00", "dbe"), (79, "0000:18:00", "off the bus"))
    assert remediation.plan([both], [], CFG, time.time()).action == "reboot"
    assert remediation.plan([both], [], dict(CFG, xid={"79": "drain"}), time.time()).action == "drain"


def test_cap_escalates_with_the_history_in_the_reason():
    now = time.time()
    history = [{"time": now - 3 * 86400, "action": "reboot"}, {"time": now - 86400, "action": "reboot"},
               {"time": now - 8 * 86400, "action": "reboot"}]   # the last one is outside the 7-day window
    p = remediation.plan([xid_result((79, "0000:18:00", "GPU has fallen off the bus."))], history, CFG, now)
    assert p.action == "drain" and p.escalated == "2 reboots in 7d"
    assert p.reason.startswith("slurmqual: xid: after 2 reboots in 7d; Xid 79 on GPU 0000:18:00")
    assert remediation.is_escalated(p.reason)
    mixed = [{"time": now - 10, "action": "reset"}, {"time": now - 5, "action": "reboot"}]
    assert remediation.plan([xid_result((79, "0000:18:00", "x"))], mixed, CFG, now).escalated == \
        "1 reset, 1 reboot in 7d"
    # max_auto = 0: no automatic action at all, a plain (not escalated) drain.
    plain = remediation.plan([xid_result((79, "0000:18:00", "x"))], [], dict(CFG, max_auto=0), now)
    assert plain.action == "drain" and not remediation.is_escalated(plain.reason)


def test_window_is_a_duration_string_from_the_config_file(tmp_path):
    from slurmqual.config import ConfigError, load

    def config(text: str):
        path = tmp_path / "c.toml"
        path.write_text("[remediation]\nenabled = true\nmax_auto = 1\n" + text)
        return load(str(path), use_cache=False)["remediation"]

    now = time.time()
    reboot_30h_ago = [{"time": now - 30 * 3600, "action": "reboot"}]
    fault = [xid_result((79, "0000:18:00", "GPU has fallen off the bus."))]
    cfg = config('window = "1d12h"\n')
    assert cfg["window_s"] == 36 * 3600
    p = remediation.plan(fault, reboot_30h_ago, cfg, now)
    assert p.action == "drain" and p.escalated == "1 reboot in 36h"     # within the window: capped
    assert remediation.plan(fault, reboot_30h_ago, config('window = "1d"\n'), now).action == "reboot"
    assert config("window_s = 86400\n")["window_s"] == 86400            # the seconds key still works
    assert config("")["window_s"] == 7 * 86400                          # default: 7 days
    for text, want in [('window = "7 days"', 'remediation.window: expected a duration such as "7d"'),
                       ('window = "0h"', "remediation.window: expected a duration"),
                       ("window = 7", 'remediation.window: a duration string such as "7d"'),
                       ('window = "7d"\nwindow_s = 86400', "set remediation.window or remediation.window_s, not both")]:
        with pytest.raises(ConfigError) as err:
            config(text + "\n")
        assert want in str(err.value) and str(tmp_path / "c.toml") in str(err.value), str(err.value)


def test_ownership_of_ladder_reasons():
    from slurmqual import policy

    after = "slurmqual: reboot: xid: Xid 79 on GPU 0000:18:00 (1x : reboot issued : reboot complete"  # as Slurm shows it
    assert policy.is_hook_reason(after) and policy.drained_for(after) == "xid"
    assert not policy.is_hook_reason("slurmqual: rma: xid: Xid 64") and policy.drained_for("slurmqual: rma: dcgm: x") == "dcgm"
    escalated = "slurmqual: xid: after 2 reboots in 7d; Xid 79 on GPU 0000:18:00"
    info = NodeInfo("n1", "idle", ("DRAIN",), escalated)
    assert not policy.may_resume(info, "hook") and policy.may_resume(info, "admin")
    assert not policy.may_drain(info, "slurmqual: xid: Xid 79 on GPU 0000:18:00", "hook")
    # The ladder's own reboot in flight: a hook may drain it (start-up check failed), never resume it.
    rebooting = NodeInfo("n1", "down", ("DRAIN", "REBOOT_ISSUED"), after)
    assert policy.may_drain(rebooting, escalated, "hook")
    assert not policy.may_resume(rebooting, "hook")
    someone = NodeInfo("n1", "down", ("DRAIN", "REBOOT_ISSUED"), "admin: firmware update")
    assert not policy.may_drain(someone, escalated, "hook")


def test_gpu_reset_guard_reads_processes_from_real_outputs():
    from slurmqual.probe.nvsmi import parse_xml

    t4 = parse_xml(open(os.path.join(REAL, "nvidia_smi_q_x_tesla-t4.xml")).read())
    assert [(pid, kind) for pid, kind, _name in t4.gpus[0].processes] == [(675, "G"), (5762, "C")]
    a100 = parse_xml(open(os.path.join(REAL, "nvidia_smi_q_x_a100-sxm4-v12.xml")).read())
    assert a100.gpus[0].processes == []


def _ladder(tmp_path, smi_xml: str, pci: str):
    """A node tree with Xid 48 (a reset-class fault) on `pci` whose `nvidia-smi -q -x` is a real output."""
    root, cfg, log = setup(tmp_path, extra='[checks]\nhealthcheck = ["xid"]\n[remediation]\nenabled = true\n')
    add_kmsg(root, f"NVRM: Xid (PCI:{pci}): 48, pid=2345, name=python, An uncorrectable double bit error", 86300)
    shutil.copy(os.path.join(REAL, smi_xml), os.path.join(root, "var/lib/slurmqual-recorded/nvidia-smi_-q_-x.out"))
    return root, cfg, log


def test_reset_waits_while_a_process_uses_the_gpu(tmp_path, monkeypatch):
    root, cfg, log = _ladder(tmp_path, "nvidia_smi_q_x_tesla-t4.xml", "0000:00:1e")
    record_output(root, ["nvidia-smi", "-r", "-i", "0000:00:1e.0"], "GPU 00000000:00:1E.0 was successfully reset.\n")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == [
        "update nodename=n1 state=drain reason=slurmqual: reset: xid: Xid 48 on GPU 0000:00:1e (1x"]
    from slurmqual import events

    waits = [ev["detail"] for _p, ev in events.pending(str(tmp_path / "state")) if ev["kind"] == "reset_wait"]
    assert len(waits) == 1 and waits[0].endswith("(busy: 0000:00:1e: pid 675,5762)")
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["remediation"] == []  # no reset happened


def test_reset_runs_on_an_idle_gpu_and_the_node_comes_back_when_all_pass(tmp_path, monkeypatch):
    root, cfg, log = _ladder(tmp_path, "nvidia_smi_q_x_a100-sxm4-v12.xml", "0000:01:00")
    record_output(root, ["nvidia-smi", "-r", "-i", "0000:01:00.0"], "GPU 00000000:01:00.0 was successfully reset.\n")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert [(h["action"], h["gpus"]) for h in state["remediation"]] == [("reset", ["0000:01:00"])]
    from slurmqual import events

    assert [ev["kind"] for _p, ev in events.pending(str(tmp_path / "state"))] == ["drain", "reset"]
    prom = (tmp_path / "metrics/slurmqual_node_n1.prom").read_text()
    assert 'slurmqual_remediation_actions{action="reset",node="n1"} 1.0' in prom
    # The reset forgot the GPU's Xid events: the next health check passes and resumes our reset drain.
    _root, cfg2, log2 = setup(tmp_path / "again", state="IDLE+DRAIN",
                              reason="slurmqual: reset: xid: Xid 48 on GPU 0000:01:00 (1x",
                              extra=f'[checks]\nhealthcheck = ["xid"]\n[remediation]\nenabled = true\n')
    text = cfg2.read_text().replace(str(tmp_path / "again" / "state"), str(tmp_path / "state"))
    cfg2.write_text(text.replace(str(tmp_path / "again" / "tree"), root))
    assert run(monkeypatch, cfg2, "healthcheck") == 0
    assert "update nodename=n1 state=resume" in calls(log2)


def test_reboot_goes_through_the_fleet_reboot_guard(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path, extra='[checks]\nhealthcheck = ["xid"]\n[remediation]\nenabled = true\n')
    add_kmsg(root, "NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.", 86300)
    guard = tmp_path / "state/guard/reboots"
    guard.mkdir(parents=True)
    (guard / "n9.json").write_text(json.dumps({"node": "n9", "time": time.time(), "reason": "x"}))
    assert run(monkeypatch, cfg, "healthcheck") == 0   # held: drained with the check's own reason
    assert [c for c in calls(log) if c.startswith(("update", "reboot"))] == [
        "update nodename=n1 state=drain reason=slurmqual: xid: Xid 79 on GPU 0000:18:00 (1x"]
    assert (tmp_path / "state/guard/reboots-held/n1.json").exists()
    (guard / "n9.json").unlink()                          # n9 is back
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("reboot")] == [
        "reboot ASAP nextstate=RESUME reason=slurmqual: reboot: xid: Xid 79 on GPU 0000:18:00 (1x n1"]
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert [h["action"] for h in state["remediation"]] == ["reboot"]


def test_rest_adapter_cannot_reboot_and_says_so():
    from slurmqual.slurm.adapter import SlurmError
    from slurmqual.slurm.rest.adapter import RestAdapter

    a = RestAdapter("unix:///run/slurmrestd/sock", None, "t")
    a._version = "v0.0.40"
    with pytest.raises(SlurmError, match="needs scontrol on this host: slurmrestd v0.0.40 cannot reboot nodes"):
        a.reboot(["n1"], "slurmqual: reboot: xid: x")


def _show(tmp_path, state: str, reason: str) -> None:
    """Make the stub scontrol show the node in this state (test_hooks_unit's stub)."""
    path = tmp_path / "bin" / "scontrol"
    line = f"NodeName=n1 Arch=x86_64 State={state} Weight=1 Reason={reason} [root@2026-11-22T10:00:00]"
    text = path.read_text().splitlines()
    path.write_text("\n".join([*text[:2], f'if [ "$1" = show ]; then echo "{line}"; fi']) + "\n")


def test_a_reboot_still_to_come_is_waited_for_and_a_fault_after_it_escalates(tmp_path, monkeypatch):
    """Newer slurmctld send an idle node's reboot a while after `scontrol reboot ASAP`:
    the checks still fail on the same boot, and the hook waits; after the reboot
    (a new boot id) the same fault is past the cap (max_auto = 1) and drains."""
    from slurmqual.nodetree import reboot as tree_reboot

    xid79 = "NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus."
    root, cfg, log = setup(tmp_path, extra='[checks]\nhealthcheck = ["xid"]\n[remediation]\nenabled = true\n'
                                           'max_auto = 1\n')
    add_kmsg(root, xid79, 86300)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    reboot_reason = "slurmqual: reboot: xid: Xid 79 on GPU 0000:18:00 (1x"
    assert [c for c in calls(log) if c.startswith("reboot")] == [f"reboot ASAP nextstate=RESUME reason={reboot_reason} n1"]
    _show(tmp_path, "IDLE+DRAIN+REBOOT_REQUESTED", reboot_reason)
    n = len(calls(log))
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log)[n:] if not c.startswith("show")] == []   # waits: same boot
    tree_reboot(root)
    add_kmsg(root, xid79, 86300)                      # the fault survived the reboot
    _show(tmp_path, "DOWN+DRAIN+REBOOT_ISSUED", reboot_reason)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log)[n:] if c.startswith("update")] == [
        "update nodename=n1 state=drain reason=slurmqual: xid: after 1 reboot in 7d; Xid 79 on GPU 0000:18:00 (1x"]
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert [h["action"] for h in state["remediation"]] == ["reboot", "escalate"]
    assert state["drain"]["enforce"] is True          # applied again once Slurm has resumed it
    # Slurm gave the node back as it registered (it clears drains when a reboot completes):
    # the next job's prolog, whose fast checks pass, drains it again and fails (the job is requeued).
    _show(tmp_path, "IDLE", "")
    n = len(calls(log))
    assert run(monkeypatch, cfg, "prolog") == 1
    assert [c for c in calls(log)[n:] if c.startswith("update")] == [
        "update nodename=n1 state=drain reason=slurmqual: xid: after 1 reboot in 7d; Xid 79 on GPU 0000:18:00 (1x"]
    assert "enforce" not in json.loads((tmp_path / "state/nodes/n1.json").read_text())["drain"]
    n = len(calls(log))
    assert run(monkeypatch, cfg, "prolog") == 0 and calls(log)[n:] == []   # done: the hot path again
