"""Counter windows against a real Slurm: a counter that rose once and then
stays flat drains the node through the health check, and the node comes back
by itself once the rise is older than the window (20 s here, an hour by
default), with no admin action. Covers ib_counters (link_downed), nvlink
(`nvidia-smi nvlink -e`) and roce_qos (`ethtool -S` pause storm)."""

from __future__ import annotations

import time

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from slurmqual.nodetree import set_nvlink_errors, set_pause_counters, set_port_attr

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_once]  # version-independent: conftest.once_version

WINDOW_S = 20


@pytest.fixture(scope="module")
def cluster():
    # Two nodes: the fleet guard (guard_min 2) never holds these drains.
    c = start_cluster("window", 2, sq_extra=f'''
[checks]
healthcheck = ["ib_counters", "roce_qos", "nvlink"]

[checks.ib_counters]
window_s = {WINDOW_S}

[checks.roce_qos]
window_s = {WINDOW_S}

[checks.nvlink]
window_s = {WINDOW_S}
''')
    yield c
    stop_cluster(c)


def reasons(cluster) -> dict[str, str]:
    return {n["name"]: n.get("reason", "") for n in cluster.nodes().values()
            if "DRAIN" in n.get("state_flags", [])}


def _drains_then_resumes(cluster, node: str, bump, reason_start: str) -> float:
    """Bump a counter once, leave it flat; returns how long the node stayed drained."""
    cluster.wait_for(lambda: not reasons(cluster), 30, "all nodes in service before the bump")
    time.sleep(cluster.health_interval + 1)          # a clean reading after the previous test
    bumped = time.monotonic()
    bump(cluster.tree(node))
    cluster.wait_for(lambda: node in reasons(cluster), 30, f"{node} drained by the health check")
    assert reasons(cluster)[node].startswith(reason_start), reasons(cluster)
    assert list(reasons(cluster)) == [node]
    cluster.wait_for(lambda: node not in reasons(cluster), WINDOW_S + 40, f"{node} resumed once out of the window")
    return time.monotonic() - bumped


def test_link_downed_once_drains_then_resumes_by_itself(cluster):
    drained = _drains_then_resumes(cluster, "n1", lambda root: set_port_attr(root, 1, "counters/link_downed", "1"),
                                   "slurmqual: ib_counters: mlx5_1/1: link_downed +1 (limit 0)")
    assert drained >= WINDOW_S - 1          # held for the window, not released by the next run


def test_nvlink_recovery_once_drains_then_resumes_by_itself(cluster):
    drained = _drains_then_resumes(cluster, "n2", lambda root: set_nvlink_errors(root, {(3, 7): {"recovery": 1}}),
                                   "slurmqual: nvlink: NVLink errors: GPU 3 link 7: recovery +1")
    assert drained >= WINDOW_S - 1


def test_pfc_storm_once_drains_then_resumes_by_itself(cluster):
    drained = _drains_then_resumes(cluster, "n1",
                                   lambda root: set_pause_counters(root, 2, {"tx_pause_storm_error_events": 1}),
                                   "slurmqual: roce_qos: mlx5_2 (ens3np0): PFC pause storm")
    assert drained >= WINDOW_S - 1
