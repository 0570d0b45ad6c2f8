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
    from slurmqual.burnin.results.store import open_store

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


def _real_xid_lines() -> list[str]:
    """The real DBE/row-remap lines (tests/data/real/nvidia), on this tree's GPU 2 (0000:3a:00) instead of 52:00."""
    path = os.path.join(os.path.dirname(__file__), "data", "real", "nvidia",
                        "dmesg_xid48_xid63_xid94_contained_RST_No_drv550.90.07_EXCERPT.txt")
    with open(path) as fh:
        return [ln.split("] ", 1)[1].replace("PCI:0000:52:00", "PCI:0000:3a:00") for ln in fh if "NVRM: Xid" in ln]


def test_rma_bundle_has_the_failing_gpus_nvidia_smi_section_and_the_raw_xid_lines(tmp_path, monkeypatch):
    root, cfg, _log = setup(tmp_path, extra=f'[store]\npath = "{tmp_path}/sq.db"\n')
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert not os.path.exists(tmp_path / "state" / "evidence")     # nothing failed: nothing kept
    lines = _real_xid_lines()
    for i, line in enumerate(lines):
        add_kmsg(root, line, 86000 + i)
    assert run(monkeypatch, cfg, "healthcheck") == 0                # Xid 48: drained (the stub scontrol)
    assert run(monkeypatch, cfg, "healthcheck") == 0                # again: the lines are kept, not lost or doubled
    b = json.loads(_cli(cfg, "rma", "n1").stdout)
    raw = b["raw_outputs"]
    assert list(raw["gpus"]) == ["0000:3a:00"]
    gpu = raw["gpus"]["0000:3a:00"]
    assert gpu["checks"] == ["xid"] and gpu["hook"] == "healthcheck"
    assert gpu["nvidia_smi_xml"].startswith('<gpu id="00000000:3A:00.0">') and gpu["nvidia_smi_xml"].endswith("</gpu>")
    assert "<serial>1652323000002</serial>" in gpu["nvidia_smi_xml"]       # the GPU the vendor gets back
    assert [e["line"] for e in raw["kernel_log"]] == lines                  # whole lines, as the kernel wrote them
    assert b["notes"] == []


def test_raw_evidence_is_bounded(tmp_path, monkeypatch):
    """A real report's GPU section over the limit is cut saying so; the kernel
    lines keep the newest KERNEL_LINES, each at most LINE_MAX characters."""
    from slurmqual import rawevidence
    from slurmqual.nodetree import RECORDED_DIR, build
    from slurmqual.result import CheckResult, Status

    root = build("h100-roce-healthy", str(tmp_path / "tree"))
    with open(f"{root}{RECORDED_DIR}/nvidia-smi_-q_-x.out") as fh:
        report = fh.read()
    monkeypatch.setattr(rawevidence, "GPU_XML_MAX", 1000)
    monkeypatch.setattr(rawevidence, "LINE_MAX", 100)
    failing = [CheckResult("gpu_memory", Status.FAIL, "retired pages", ["0000:18:00.0"])]
    line = _real_xid_lines()[0]
    kept = rawevidence.merge({}, "epilog", 1.0, failing, report, [(float(i), line) for i in range(150)])
    section = kept["gpus"]["0000:18:00"]["nvidia_smi_xml"]
    assert section.startswith('<gpu id="00000000:18:00.0">') and len(section) < 1100
    assert section.endswith("more characters cut by slurmqual]") and list(kept["gpus"]) == ["0000:18:00"]
    assert len(kept["kernel_log"]) == rawevidence.KERNEL_LINES and kept["kernel_log"][0]["time"] == 50.0
    assert all(e["line"].startswith(line[:100]) and e["line"].endswith("cut by slurmqual]") for e in kept["kernel_log"])
    # The next run's new lines are appended, the kept ones not doubled.
    again = rawevidence.merge(kept, "epilog", 2.0, [], None, [(149.0, line), (150.0, line)])
    assert len(again["kernel_log"]) == rawevidence.KERNEL_LINES and again["kernel_log"][-1]["time"] == 150.0
    assert again["kernel_log"][-2]["time"] == 149.0 and again["gpus"] == kept["gpus"]
