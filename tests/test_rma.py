"""`status --lemons` and `slurmqual rma` on what real hook runs left behind
(node trees, a stub scontrol: tests/test_hooks_unit.py) plus the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from slurmqual.nodetree import add_kmsg
from test_hooks_unit import _fresh_logger, run, setup  # noqa: F401 - the fixture is used by name


def _cli(cfg, *argv):
    env = dict(os.environ, SLURMQUAL_CONFIG=str(cfg))
    return subprocess.run([sys.executable, "-m", "slurmqual", *argv], env=env, capture_output=True, text=True,
                          timeout=120)


def _gpu_gone(root):
    os.unlink(os.path.join(root, "sys/bus/pci/devices/0000:18:00.0"))   # GPU 0 fell off the bus


def test_lemons_count_hardware_drains_not_setting_drains(tmp_path, monkeypatch):
    root, cfg, _log = setup(tmp_path, extra=f'[store]\npath = "{tmp_path}/sq.db"\n')
    add_kmsg(root, "NVRM: Xid (PCI:0000:18:00): 13, pid=77, Graphics Exception: ESR 0x404490=0x80000002", 86300)
    assert run(monkeypatch, cfg, "healthcheck") == 0      # identity, versions, the Xid kept
    _gpu_gone(root)
    for _ in range(3):                                    # Slurm (the stub) shows it idle: each run drains anew
        assert run(monkeypatch, cfg, "epilog") == 0
    p = _cli(cfg, "status", "--lemons", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [(r["node"], r["faults"], r["kinds"]) for r in out["lemons"]] == [("n1", 3, {"drain": 3})]
    assert out["lemons"][0]["last_detail"].startswith("epilog: slurmqual: gpu_count: ")
    text = _cli(cfg, "status", "--lemons").stdout
    assert text.startswith("lemons: 1 node(s) with 3 or more hardware faults within 30d") and "\nn1 " in text

    # A setting's drain (peermem) is no hardware fault; two hardware drains are not yet a lemon.
    root2, cfg2, _ = setup(tmp_path / "b")
    from slurmqual.nodetree import remove_module

    remove_module(root2, "nvidia_peermem")
    for _ in range(3):
        run(monkeypatch, cfg2, "epilog")
    assert json.loads(_cli(cfg2, "status", "--lemons", "--json").stdout)["lemons"] == []


def test_rma_bundle_has_serials_failures_xids_and_history(tmp_path, monkeypatch):
    root, cfg, _log = setup(tmp_path, extra=f'[store]\npath = "{tmp_path}/sq.db"\n')
    add_kmsg(root, "NVRM: Xid (PCI:0000:18:00): 13, pid=77, Graphics Exception: ESR 0x404490=0x80000002", 86300)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    _gpu_gone(root)
    assert run(monkeypatch, cfg, "epilog") == 0
    from slurmqual.burnin.store import open_store

    store = open_store(str(tmp_path / "sq.db"))
    store.add_event("n1", "drain", "admin: slurmqual: admin: reseated GPU 0", 1.0e9)
    store.close()
    out = tmp_path / "n1-rma.json"
    p = _cli(cfg, "rma", "n1", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"n1: RMA bundle written to {out} (1 failing checks, 1 Xid events, 2 events)")
    b = json.loads(out.read_text())
    assert b["format"] == "slurmqual-rma/1" and b["node"] == "n1"
    assert b["hardware"]["gpu:0000:18:00.0"]["serial"] == "1652323000000"
    assert b["hardware"]["dmi:board_serial"] == {"serial": "OM23BS012345"}
    gpu_count = json.loads((tmp_path / "state/nodes/n1.json").read_text())["checks"]
    assert [(c["name"], c["message"]) for c in b["failing_checks"]] == [
        (c["name"], c["message"]) for c in gpu_count if c["name"] == "gpu_count"]
    assert [(e["xid"], e["gpu"]) for e in b["xid_events"]] == [(13, "0000:18:00")]
    assert [e["detail"] for e in b["drain_history"]] == [
        "admin: slurmqual: admin: reseated GPU 0", f"epilog: slurmqual: gpu_count: {b['failing_checks'][0]['message']}"]
    assert b["versions"]["driver"] == "550.54.15" and b["burnin"]["baselines"] == {} and b["notes"] == []
    # the epilog's ib_counters window, per port (a node tree's files carry its root's hash: n1-<hash>)
    ib = next(v for k, v in b["counter_history"].items() if k.startswith("n1-") and k.endswith(".ib_counters.json"))
    assert "mlx5_0/1" in ib and ib["mlx5_0/1"][0][1]["symbol_error"] == 0

    p = _cli(cfg, "rma", "n9")
    assert p.returncode == 2 and "nothing kept about n9" in p.stderr
    p = _cli(cfg, "rma", "../n1")
    assert p.returncode == 2 and "slurmqual: rma:" in p.stderr
