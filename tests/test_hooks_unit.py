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


def test_prolog_pass_makes_no_slurm_call_and_records_state_but_no_metrics(tmp_path, monkeypatch):
    _root, cfg, log = setup(tmp_path)
    assert run(monkeypatch, cfg, "prolog") == 0
    assert calls(log) == []
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["hook"] == "prolog" and state["status"] == "pass"
    assert {"peermem", "nic_link", "gpu_count", "pcie_link"} <= {c["name"] for c in state["checks"]}
    # prometheus_client costs ~70 ms: a passing prolog leaves metrics to the epilog and health check
    assert not (tmp_path / "metrics/slurmqual_node_n1.prom").exists()


def test_metrics_keep_every_checks_latest_status_across_hooks(tmp_path, monkeypatch):
    """The health check's checks stay in the node's metrics when a failing prolog,
    which runs only the fast ones, rewrites the file."""
    root, cfg, _log = setup(tmp_path)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    prom = tmp_path / "metrics/slurmqual_node_n1.prom"
    assert 'slurmqual_check_status{check="versions",node="n1"} 0.0' in prom.read_text()
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "prolog") == 1
    text = prom.read_text()
    assert 'slurmqual_check_status{check="peermem",node="n1"} 3.0' in text
    assert 'slurmqual_check_status{check="versions",node="n1"} 0.0' in text  # not run by the prolog, kept


def test_prolog_failure_drains_with_reason_and_fails(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path)
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "prolog") == 1
    drain = [c for c in calls(log) if c.startswith("update")]
    assert drain == ["update nodename=n1 state=drain reason=slurmqual: peermem: nvidia_peermem not loaded: "
                     "GPUDirect RDMA off"]


def _trip_guard(tmp_path, *nodes):
    """Other nodes' hook drains within the window, recorded by the guard itself."""
    from slurmqual.policy import HookGuard

    guard = HookGuard(str(tmp_path / "state"), 3600.0, 0.1, 2)
    for node in nodes:
        assert guard.request_drain(node, "slurmqual: peermem: nvidia_peermem not loaded").allowed


def test_prolog_held_by_the_fleet_guard_exits_0_so_slurm_does_not_drain_it(tmp_path, monkeypatch, caplog):
    # A non-zero prolog makes slurmd drain the node "Prolog error" (unless it is
    # drained already): failing the job here would drain what the guard holds.
    root, cfg, log = setup(tmp_path)
    _trip_guard(tmp_path, "n2", "n3")
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "prolog") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []
    assert "drain HELD by the fleet guard" in caplog.text
    assert os.path.exists(tmp_path / "state/guard/held/n1.json")


def test_prolog_on_a_node_slurm_or_an_admin_handles_exits_0(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path, state="IDLE+MAINTENANCE+RESERVED")
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "prolog") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []


def test_prolog_on_a_node_drained_by_someone_else_fails_the_job_and_keeps_the_reason(tmp_path, monkeypatch):
    # Drained already: slurmd's own drain changes nothing, the job is requeued.
    root, cfg, log = setup(tmp_path, state="MIXED+DRAIN", reason="admin: RMA")
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "prolog") == 1
    assert [c for c in calls(log) if c.startswith("update")] == []


def test_prolog_whose_drain_call_fails_still_fails_so_slurm_drains_it(tmp_path, monkeypatch, caplog):
    root, cfg, log = setup(tmp_path)
    scontrol = tmp_path / "bin/scontrol"
    scontrol.write_text(scontrol.read_text() + 'if [ "$1" = update ]; then echo "slurm_update error: Socket timed out '
                        'on send/recv operation" >&2; exit 1; fi\n')
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "prolog") == 1
    assert [c for c in calls(log) if c.startswith("update")]
    assert "could not drain" in caplog.text


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


def test_passing_epilog_asks_slurm_once_then_never_while_not_drained(tmp_path, monkeypatch):
    _root, cfg, log = setup(tmp_path)
    assert run(monkeypatch, cfg, "epilog") == 0
    assert calls(log) == ["show node n1 --oneliner"]  # a new state file does not know yet
    for hook in ("epilog", "healthcheck", "epilog"):
        assert run(monkeypatch, cfg, hook) == 0
    assert calls(log) == ["show node n1 --oneliner"]


def test_failing_hook_remembers_its_drain_and_the_passing_one_resumes(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path)
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["drain"]["reason"].startswith("slurmqual: peermem:")
    spooled = sorted((tmp_path / "state/events").iterdir())
    assert [json.loads(p.read_text())["kind"] for p in spooled] == ["drain"]
    # The stub still says IDLE (not drained): the passing run asks Slurm, finds no
    # drain of ours (an admin resumed it by hand) and forgets the drain.
    from slurmqual.nodetree import add_module

    add_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert json.loads((tmp_path / "state/nodes/n1.json").read_text())["drain"] is None


def test_hook_never_rereasons_a_slurmqual_admin_drain(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason="slurmqual: admin: GPU swapped")
    remove_module(root, "nvidia_peermem")
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []


def _error_setup(tmp_path, drained_for, hold):
    root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason=f"slurmqual: {drained_for}: was bad",
                           extra=f"error_hold_s = {hold}\n")
    os.unlink(f"{root}/proc/modules")  # peermem cannot judge
    return cfg, log


def test_error_holds_our_drain_within_the_bound(tmp_path, monkeypatch):
    cfg, log = _error_setup(tmp_path, "gpu_count", 3600)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []
    assert json.loads((tmp_path / "state/nodes/n1.json").read_text())["error_since"] is not None


def test_error_in_another_check_resumes_after_the_bound(tmp_path, monkeypatch):
    cfg, log = _error_setup(tmp_path, "gpu_count", 0)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == ["update nodename=n1 state=resume"]


def test_error_in_the_draining_check_rereasons_after_the_bound_and_stays_drained(tmp_path, monkeypatch):
    cfg, log = _error_setup(tmp_path, "peermem", 0)
    assert run(monkeypatch, cfg, "healthcheck") == 0
    upd = [c for c in calls(log) if c.startswith("update")]
    assert len(upd) == 1 and "state=drain reason=slurmqual: peermem: cannot judge since " in upd[0]
    assert "state=resume" not in " ".join(calls(log))


def test_multi_fault_reason_keeps_the_count_of_other_failures(tmp_path, monkeypatch):
    root, cfg, log = setup(tmp_path)
    remove_module(root, "nvidia_peermem")
    gpu = os.path.join(root, "sys/bus/pci/devices/0000:18:00.0")
    os.unlink(gpu)
    assert run(monkeypatch, cfg, "prolog") == 1
    drain = [c for c in calls(log) if c.startswith("update")][0]
    reason = drain.split("reason=", 1)[1]
    assert len(reason) <= 80 and "(+1 more" in reason, reason


def test_reason_keeps_the_count_of_other_failures_under_the_cap():
    from slurmqual.slurm.reason import MAX_LEN, make

    long = "mlx5_0 down, mlx5_1 down, mlx5_2 at 200 Gb/s expected 400, mlx5_3 down, mlx5_4 down"
    r = make("nic_link", long, others=["pcie_link", "gpu_count", "peermem", "ib_counters"])
    assert len(r) <= MAX_LEN and r.startswith("slurmqual: nic_link: mlx5_0 down") and "(+4 more" in r, r
    r = make("nic_link", "short", others=["peermem"])
    assert r == "slurmqual: nic_link: short (+1 more: peermem)"
    r = make("x" * 70, "y", others=["a", "b"])
    assert len(r) <= MAX_LEN and r.endswith("(+2 more)")


def test_hook_that_does_not_run_the_draining_check_never_resumes(tmp_path, monkeypatch):
    _root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason="slurmqual: gpu_count: 7 GPUs on PCI, expected 8",
                            extra='[checks]\nhealthcheck = ["peermem", "nic_link"]\n')
    assert run(monkeypatch, cfg, "healthcheck") == 0
    assert [c for c in calls(log) if c.startswith("update")] == []


def _cli(cfg, *args):
    import subprocess
    import sys

    env = dict(os.environ, SLURMQUAL_CONFIG=str(cfg))
    return subprocess.run([sys.executable, "-m", "slurmqual", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_drain_and_resume_commands_use_the_shared_policy(tmp_path):
    _root, cfg, log = setup(tmp_path, state="IDLE+DRAIN", reason="admin: RMA")
    p = _cli(cfg, "drain", "n1", "--reason", "GPU swapped")
    assert p.returncode == 1 and "already drained by someone else" in p.stdout, p.stdout + p.stderr
    p = _cli(cfg, "resume", "n1")
    assert p.returncode == 1 and "use --force" in p.stdout
    assert [c for c in calls(log) if c.startswith("update")] == []
    p = _cli(cfg, "resume", "n1", "--force")
    assert p.returncode == 0 and [c for c in calls(log) if c.startswith("update")] == ["update nodename=n1 state=resume"]


@pytest.mark.parametrize("broken", ['{"node": "n1", "checks": ["x"]}', '{"node": "n1", "versions": []}',
                                    '{"node": "n1", "time": "soon"}', '{"node": "n1", "chec'])
def test_malformed_node_state_is_replaced_and_logged_never_an_internal_error(tmp_path, monkeypatch, broken, caplog):
    _root, cfg, calls_log = setup(tmp_path)
    assert run(monkeypatch, cfg, "prolog") == 0
    (tmp_path / "state/nodes/n1.json").write_text(broken)
    assert run(monkeypatch, cfg, "epilog") == 0
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["node"] == "n1" and state["hook"] == "epilog" and state["status"] == "pass"
    assert "replacing unusable node state file" in caplog.text and "internal error" not in caplog.text
