"""Hook decisions without a cluster: a stub scontrol records what we ask of Slurm."""

from __future__ import annotations

import json
import os

import pytest

from slurmqual import hooks
from slurmqual.nodetree import build, remove_module


def setup(tmp_path, state="IDLE", reason="", example="h100-roce-healthy", extra=""):
    root = build(example, str(tmp_path / "tree"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls.log"
    line = f"NodeName=n1 Arch=x86_64 State={state} Weight=1" + (f" Reason={reason} [root@2026-11-22T10:00:00]" if reason else "")
    (bindir / "scontrol").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                                     f'if [ "$1" = show ]; then echo "{line}"; fi\n')
    (bindir / "scontrol").chmod(0o755)
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[node]\nroot = "{root}"\n[fabric]\nnics = 8\n[slurm]\nbin_dir = "{bindir}"\nretries = 1\n'
                   f'[hooks]\nsyslog = false\nlog_file = "{tmp_path}/sq.log"\nstate_dir = "{tmp_path}/state"\n'
                   f'metrics_dir = "{tmp_path}/metrics"\n{extra}')
    os.chmod(tmp_path, 0o755)
    return root, cfg, calls


@pytest.fixture(autouse=True)
def _fresh_logger():
    import logging

    log = logging.getLogger("slurmqual")

    def clear():
        for h in list(log.handlers):
            log.removeHandler(h)
            h.close()
        log.disabled = False

    clear()  # hooks log to the file named in each test's config
    yield
    clear()


def run(monkeypatch, cfg, hook):
    monkeypatch.setenv("SLURMQUAL_CONFIG", str(cfg))
    return hooks.run(hook, {"SLURMD_NODENAME": "n1"})


def calls(path):
    return path.read_text().splitlines() if path.exists() else []


def test_prolog_pass_makes_no_slurm_call_and_records_state_and_metrics(tmp_path, monkeypatch):
    _root, cfg, log = setup(tmp_path)
    assert run(monkeypatch, cfg, "prolog") == 0
    assert calls(log) == []
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["hook"] == "prolog" and state["status"] == "pass" and len(state["checks"]) == 6
    prom = (tmp_path / "metrics/slurmqual_node_n1.prom").read_text()
    assert 'slurmqual_check_status{check="peermem",node="n1"} 0.0' in prom


def test_prolog_failure_drains_with_reason_and_fails(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path)
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "prolog") == 1
    drain = [c for c in calls(log) if c.startswith("update")]
    assert drain == ["update nodename=n1 state=drain reason=slurmqual: peermem: nvidia_peermem not loaded: "
                     "GPUDirect RDMA off"]


def test_healthcheck_never_touches_admin_drain(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason="admin: RMA")
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []


def test_healthcheck_resumes_only_our_check_drains(tmp_path, monkeypatch):
    _root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason="slurmqual: peermem: nvidia_peermem not loaded")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == ["update nodename=n1 state=resume"]


def test_burnin_drain_is_not_resumed_by_healthcheck(tmp_path, monkeypatch):
    _root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason="slurmqual: burnin: busbw 200.0 GB/s < 90% of median 380.0")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []


def test_maintenance_node_left_alone(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path, state="IDLE+MAINTENANCE+RESERVED")
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "epilog") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []


def test_hook_leaves_no_alarm_behind(tmp_path, monkeypatch):
    import signal

    _root, cfg, _log = setup(tmp_path)
    assert run(monkeypatch, cfg, "prolog") == 0
    assert signal.alarm(0) == 0


def test_error_never_drains(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path)
    os.unlink(f"{root}/proc/modules")
    assert run(monkeypatch, cfg, "prolog") == 0
    assert calls(log) == []
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert [c["status"] for c in state["checks"] if c["name"] == "peermem"] == ["error"]


def test_broken_config_is_logged_never_drains(tmp_path, monkeypatch):
    _root, cfg, log = setup(tmp_path)
    cfg.write_text(cfg.read_text() + "\n[fabric]\nnics = 'x'\n")
    assert run(monkeypatch, cfg, "prolog") == 0 and calls(log) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the root-only-writable rule applies when running as root")
def test_world_writable_config_refused_as_root(tmp_path, monkeypatch, caplog):
    _root, cfg, log = setup(tmp_path)
    os.chmod(cfg, 0o666)
    assert run(monkeypatch, cfg, "prolog") == 0 and calls(log) == []
    logged = (tmp_path / "sq.log").read_text() if (tmp_path / "sq.log").exists() else caplog.text
    assert "writable by group/others (mode 0666)" in logged
