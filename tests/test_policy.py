"""The ownership rules and the hook-drain fleet guard (slurmqual/policy.py).
Node states come from scontrol's own one-line format, parsed by our adapter."""

from __future__ import annotations

import json
import os

import pytest

from slurmqual import nodestate, policy
from slurmqual.result import CheckResult, Status
from slurmqual.slurm.cli import parse_scontrol_node


def node(state: str, reason: str = ""):
    line = f"NodeName=n1 Arch=x86_64 CoresPerSocket=1 State={state} Weight=1"
    if reason:
        line += f" Reason={reason} [root@2026-11-22T10:00:00]"
    return parse_scontrol_node(line)[0]


CHECK = "slurmqual: peermem: nvidia_peermem not loaded"
BURNIN = "slurmqual: burnin: busbw 200.0 GB/s < 90% of median 380.0"
ADMIN_OURS = "slurmqual: admin: GPU swapped"


@pytest.mark.parametrize("actor", policy.ACTORS)
def test_nobody_touches_someone_elses_drain(actor):
    info = node("IDLE+DRAIN", "admin: RMA")
    assert not policy.may_drain(info, CHECK, actor)
    assert not policy.may_resume(info, actor)
    assert "someone else" in policy.may_drain(info, CHECK, actor).why


def test_admin_force_resumes_someone_elses_drain_only_with_force():
    info = node("IDLE+DRAIN", "admin: RMA")
    assert policy.may_resume(info, "admin", force=True)
    assert not policy.may_resume(info, "hook", force=True)


def test_hook_never_replaces_or_resumes_a_non_check_drain_of_ours():
    for reason in (BURNIN, ADMIN_OURS, "slurmqual: requalify: burn-in produced no analysis"):
        info = node("IDLE+DRAIN", reason)
        assert not policy.may_drain(info, CHECK, "hook"), reason
        assert not policy.may_resume(info, "hook"), reason
        assert policy.may_resume(info, "requalify") and policy.may_resume(info, "admin")
        assert policy.may_drain(info, "slurmqual: requalify: cancelled", "requalify")


def test_hook_re_reasons_and_resumes_its_own_check_drain():
    info = node("IDLE+DRAIN", CHECK)
    assert policy.may_drain(info, "slurmqual: nic_link: mlx5_3 down", "hook")
    d = policy.may_drain(info, CHECK, "hook")
    assert not d and d.noop
    assert policy.may_resume(info, "hook")


def test_hands_off_states_are_left_alone():
    for state in ("DOWN", "IDLE+MAINTENANCE+RESERVED", "IDLE+REBOOT_REQUESTED", "IDLE+DRAIN+MAINTENANCE"):
        info = node(state, CHECK if "DRAIN" in state else "")
        assert not policy.may_resume(info, "hook"), state
        if "DRAIN" not in state:
            assert not policy.may_drain(info, CHECK, "hook"), state


def test_not_drained_resume_is_a_noop_and_unknown_node_may_be_drained():
    d = policy.may_resume(node("IDLE"), "admin")
    assert not d and d.noop
    assert policy.may_drain(None, CHECK, "hook")


def test_stale_reason_on_an_idle_node_is_not_a_drain():
    """Slurm 24.11 keeps the reason after a resume (State=IDLE Reason=slurmqual: ...):
    the node is in service, a hook may drain it anew, and nothing is resumed."""
    info = node("IDLE", CHECK)
    assert not info.drained and info.reason == CHECK
    d = policy.may_resume(info, "hook")
    assert not d and d.noop
    assert policy.may_drain(info, "slurmqual: nic_link: mlx5_3 down", "hook")


def _fleet(state_dir, n):
    for i in range(1, n + 1):
        nodestate.record_run(str(state_dir), f"n{i}", "healthcheck", [CheckResult("peermem", Status.PASS, "ok")], {})


@pytest.mark.parametrize("fleet,limit", [(6, 2), (20, 2), (40, 4), (4096, 409)])
def test_guard_limit_is_max_2_or_10_percent(fleet, limit):
    assert policy.guard_limit(fleet, 0.1, 2) == limit


def test_guard_allows_limit_drains_then_holds_until_window_passes(tmp_path):
    _fleet(tmp_path, 30)  # limit max(2, 3) = 3
    g = policy.HookGuard(str(tmp_path), 600, 0.1, 2)
    got = [g.request_drain(f"n{i}", CHECK, now=1000.0 + i).allowed for i in range(1, 8)]
    assert got == [True, True, True, False, False, False, False]
    st = g.status(now=1010.0)
    assert st["tripped"] and st["limit"] == 3 and st["recent_drains"] == ["n1", "n2", "n3"]
    assert st["held"] == ["n4", "n5", "n6", "n7"]
    # Held records keep the guard tripped while nodes keep failing ...
    assert not g.request_drain("n20", CHECK, now=1500.0).allowed
    # ... and it clears by itself once nothing failed for a whole window.
    assert g.request_drain("n21", CHECK, now=1500.0 + 601).allowed
    assert not g.status(now=1500.0 + 601)["tripped"]


def test_guard_records_survive_garbage_and_count_other_nodes_only(tmp_path):
    _fleet(tmp_path, 6)
    g = policy.HookGuard(str(tmp_path), 600, 0.1, 2)
    os.makedirs(tmp_path / "guard" / "drains", exist_ok=True)
    (tmp_path / "guard" / "drains" / "junk.json").write_text("{oops")
    assert g.request_drain("n1", CHECK, now=10.0).allowed
    assert g.request_drain("n1", CHECK, now=11.0).allowed  # the same node again is not a second drain
    assert g.request_drain("n2", CHECK, now=12.0).allowed
    v = g.request_drain("n3", CHECK, now=13.0)
    assert not v.allowed and (v.recent, v.limit, v.fleet) == (2, 2, 6)
    rec = json.loads((tmp_path / "guard" / "held" / "n3.json").read_text())
    assert rec["reason"] == CHECK and rec["limit"] == 2


def test_requalify_reservation_is_not_hands_off_for_its_own_nodes():
    info = node("MIXED+MAINTENANCE+RESERVED")
    assert not policy.may_drain(info, CHECK, "hook")
    assert policy.may_drain(info, CHECK, "hook", own_maintenance=True)
    assert policy.may_drain(info, CHECK, "requalify")
    # Slurm's own "Prolog error" after a failed prolog: requalify may give the precise reason.
    slurm = node("IDLE+DRAIN", "Prolog error")
    assert policy.may_drain(slurm, CHECK, "requalify") and not policy.may_drain(slurm, CHECK, "hook")


def test_precise_drain_is_ours_naming_a_check_never_an_admins():
    from slurmqual.policy import precise_drain
    from slurmqual.slurm import NodeInfo, reason as reasons

    def drained(r):
        return NodeInfo("n1", "idle", ("DRAIN",), r)

    assert precise_drain(drained(reasons.make("peermem", "nvidia_peermem not loaded")))
    assert not precise_drain(drained(reasons.make("admin", "RMA ticket 42")))
    assert not precise_drain(drained("bad fan"))
    assert not precise_drain(NodeInfo("n1", "idle", (), reasons.make("peermem", "x")))
    assert not precise_drain(None)
