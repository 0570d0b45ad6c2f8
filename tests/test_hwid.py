"""Hardware-swap detection (hwid.py) on node trees: the hooks keep each
node's identity, a changed GPU serial holds the node drained as swapped
(the prolog too), the part's history starts fresh, and `requalify --swapped`
finds the node."""

from __future__ import annotations

import json
import os

import pytest

from slurmqual import hwid
from slurmqual.nodetree import add_kmsg, set_gpu_serial
from test_hooks_unit import _fresh_logger, calls, run, setup  # noqa: F401 - the fixture is used by name

HC = '[checks]\nhealthcheck = ["gpu_state", "xid"]\n'


def test_identity_changes_name_the_part_and_ignore_vanished_parts():
    old = {"gpu:0000:4b:00.0": {"serial": "1652323000003", "uuid": "GPU-a", "index": 3},
           "nic:mlx5_0": {"node_guid": "b83f:d203:0000:4c1e"}, "dmi:board_serial": {"serial": "OM1"}}
    new = {"gpu:0000:4b:00.0": {"serial": "1652399999999", "uuid": "GPU-b", "index": 3},
           "dmi:board_serial": {"serial": "OM1"}}   # mlx5_0 vanished: its check's finding, not a swap
    found = hwid.changes(old, new)
    assert [hwid.describe(c) for c in found] == ["GPU 3 serial 1652323000003 -> 1652399999999"]
    assert hwid.swap_reason({"changes": found}) == "slurmqual: swap: GPU 3 serial 1652323000003 -> 1652399999999: requalify"
    assert hwid.merge(old, new)["nic:mlx5_0"] == {"node_guid": "b83f:d203:0000:4c1e"}  # compared when it returns
    assert hwid._value("To be filled by O.E.M.") is None and hwid._value("0000000000000") is None


def test_gpu_serial_change_holds_the_node_drained_as_swapped(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path, extra=HC)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["hardware"]["gpu:0000:4b:00.0"]["serial"] == "1652323000003"
    assert state["hardware"]["dmi:board_serial"] == {"serial": "OM23BS012345"}
    assert state["swap"] is None and [c for c in calls(log) if c.startswith("update")] == []
    # An Xid kept for GPU 3 (0000:4b:00) before the swap: the new GPU starts without it.
    add_kmsg(root, "NVRM: Xid (PCI:0000:4b:00): 13, pid=1, Graphics Engine Exception", 86300)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    xid_file = next((tmp_path / "state/xid").iterdir())
    assert [e[2] for e in json.loads(xid_file.read_text())["events"]] == ["0000:4b:00"]
    evidence = next((tmp_path / "state/evidence").iterdir())   # its kernel line, for an RMA bundle
    assert [e["line"] for e in json.loads(evidence.read_text())["kernel_log"]] == [
        "NVRM: Xid (PCI:0000:4b:00): 13, pid=1, Graphics Engine Exception"]

    set_gpu_serial(root, 3, "1652399999999")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    reason = "slurmqual: swap: GPU 3 serial 1652323000003 -> 1652399999999: requalify"
    assert [c for c in calls(log) if c.startswith("update")] == [f"update nodename=n1 state=drain reason={reason}"]
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["swap"]["changes"][0]["new"] == "1652399999999"
    assert state["hardware"]["gpu:0000:4b:00.0"]["serial"] == "1652399999999"
    assert json.loads(xid_file.read_text())["events"] == []
    assert json.loads(evidence.read_text())["kernel_log"] == []     # the old GPU's lines went with it
    from slurmqual import events

    assert [ev["detail"] for _p, ev in events.pending(str(tmp_path / "state")) if ev["kind"] == "swap"] == [
        "healthcheck: GPU 3 serial 1652323000003 -> 1652399999999"]


def test_swapped_node_fails_the_prolog_until_requalified(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path, extra=HC)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    set_gpu_serial(root, 0, "1652300000777")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert run(monkeypatch, cfg, "prolog") == 1        # someone resumed it: still no job before requalify
    from slurmqual.nodestate import clear_swap

    clear_swap(str(tmp_path / "state"), "n1")          # what a passing requalify does
    n = len(calls(log))
    assert run(monkeypatch, cfg, "prolog") == 0 and calls(log)[n:] == []


def test_requalify_swapped_finds_only_nodes_that_are_ours_to_requalify(tmp_path):
    from slurmqual.commands.requalify import swapped_nodes
    from slurmqual.config import load
    from slurmqual.nodestate import record_hardware
    from slurmqual.slurm.adapter import NodeInfo
    from slurmqual.testing import FakeAdapter

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\n')
    config = load(str(cfg), use_cache=False)
    for node in ("n1", "n2", "n3"):
        record_hardware(config["hooks"]["state_dir"], node, {"gpu:0000:18:00.0": {"serial": "1", "index": 0}})
        if node != "n3":
            record_hardware(config["hooks"]["state_dir"], node, {"gpu:0000:18:00.0": {"serial": "2", "index": 0}})
    fake = FakeAdapter.with_nodes([
        NodeInfo("n1", "idle", ("DRAIN",), "slurmqual: swap: GPU 0 serial 1 -> 2: requalify"),
        NodeInfo("n2", "idle", ("DRAIN",), "admin: waiting for the vendor"),
        NodeInfo("n3", "idle")])
    assert swapped_nodes(config, fake) == ["n1"]


def test_a_failed_requalify_holds_the_swap_with_its_reason_and_the_timer_skips_it(tmp_path, capsys):
    from slurmqual.commands.requalify import swapped_nodes
    from slurmqual.config import load
    from slurmqual.nodestate import StateError, fail_swap, read, record_hardware
    from slurmqual.slurm.adapter import NodeInfo
    from slurmqual.testing import FakeAdapter

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\n')
    config = load(str(cfg), use_cache=False)
    state_dir = config["hooks"]["state_dir"]
    for serial in ("1", "2"):
        record_hardware(state_dir, "n1", {"gpu:0000:18:00.0": {"serial": serial, "index": 0}})
    failure = "slurmqual: peermem: nvidia_peermem not loaded"
    fail_swap(state_dir, "n1", failure)
    swap = read(state_dir, "n1").swap
    assert swap["failed"]["reason"] == failure
    assert hwid.held_reasons(swap) == {failure, "slurmqual: swap: GPU 0 serial 1 -> 2: requalify"}
    fake = FakeAdapter.with_nodes([NodeInfo("n1", "idle", ("DRAIN",), failure)])
    assert swapped_nodes(config, fake) == []
    assert f"n1: swapped, but its requalify failed ({failure}); skipped: fix it, then `slurmqual requalify n1`" \
        in capsys.readouterr().out
    # Another swap since: the timer picks it up again.
    record_hardware(state_dir, "n1", {"gpu:0000:18:00.0": {"serial": "3", "index": 0}})
    assert "failed" not in read(state_dir, "n1").swap and swapped_nodes(config, fake) == ["n1"]
    # A malformed record is a clear state error, not a crash of the timer.
    path = tmp_path / "state" / "nodes" / "n1.json"
    data = json.loads(path.read_text())
    data["swap"]["failed"] = "yes"
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match="'swap.failed' is not an object"):
        read(state_dir, "n1")


def test_hooks_keep_a_failed_requalifys_reason_on_a_swapped_node(tmp_path, monkeypatch):
    from slurmqual.nodestate import fail_swap

    failure = "slurmqual: peermem: nvidia_peermem not loaded"
    root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason=failure, extra=HC)   # how Slurm shows the node
    assert run(monkeypatch, cfg, "healthcheck") == 0
    set_gpu_serial(root, 0, "1652300000777")
    n = len(calls(log))
    assert run(monkeypatch, cfg, "healthcheck") == 0
    # Before any requalify the swap's own reason holds the node...
    assert any("reason=slurmqual: swap: GPU 0 serial" in c for c in calls(log)[n:]), calls(log)[n:]
    fail_swap(str(tmp_path / "state"), "n1", failure)   # ...after a failed one, the failure's reason does
    n = len(calls(log))
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log)[n:] if c.startswith("update")] == []   # not turned back into the swap reason
    assert run(monkeypatch, cfg, "prolog") == 1


def test_a_hook_that_sees_the_node_resumed_by_a_requalify_starting_meanwhile_does_not_drain_it(tmp_path, monkeypatch):
    """The race of CI run 29: a health check read no requalify marker, then
    requalify marked the node and resumed it, then the health check read the
    node from Slurm (resumed) and drained it as swapped under requalify, whose
    check step then could not run. Slurm is asked after the marker is written,
    so a hook that sees the node resumed sees the marker too."""
    from slurmqual.nodestate import fail_swap, requalify_dir

    failure = "slurmqual: peermem: nvidia_peermem not loaded"
    root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason=failure, extra=HC)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    set_gpu_serial(root, 0, "1652300000777")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    fail_swap(str(tmp_path / "state"), "n1", failure)
    # requalify starts while the next health check runs: its `scontrol show node`
    # answers after requalify wrote its marker and resumed the node.
    marker = os.path.join(requalify_dir(str(tmp_path / "state")), "n1.json")
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$*" >> {log}\n'
                        f'if [ "$1" = show ]; then mkdir -p {os.path.dirname(marker)}; '
                        f'echo \'{{"node": "n1", "id": "rq", "pid": 1, "time": 0}}\' > {marker}; '
                        f'echo "NodeName=n1 Arch=x86_64 State=IDLE+RESERVED Weight=1"; fi\n')
    n = len(calls(log))
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert os.path.exists(marker)
    assert [c for c in calls(log)[n:] if c.startswith("update")] == [], calls(log)[n:]
    # Without the requalify the same resumed node is drained again as swapped.
    os.unlink(marker)
    scontrol.write_text(f'#!/bin/sh\necho "$*" >> {log}\n'
                        f'if [ "$1" = show ]; then echo "NodeName=n1 Arch=x86_64 State=IDLE Weight=1"; fi\n')
    n = len(calls(log))
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert any(c.startswith("update") and "reason=slurmqual: swap: GPU 0 serial" in c for c in calls(log)[n:]), \
        calls(log)[n:]
