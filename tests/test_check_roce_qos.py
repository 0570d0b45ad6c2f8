"""roce_qos: PFC pause storms and pause floods judged from `ethtool -S` as
increases within a window, and the priority trust from `mlnx_qos -i`, on real
outputs (tests/data/real/mlx, ../shared/samples/mlx) and the node trees'."""

import os

import pytest

from conftest import T0
from nodes import check, config, tree
from slurmqual.nodetree import record_output, set_pause_counters, set_qos_trust
from slurmqual.probe.netqos import (QosError, parse_ethtool_stats, parse_pfc_enabled, parse_trust, pause_counters,
                                    tx_pause_names)
from slurmqual.result import Status

HERE = os.path.dirname(__file__)
REAL = os.path.join(HERE, "data", "real", "mlx")
SHARED = os.path.join(HERE, "..", "..", "shared", "samples", "mlx")


def real(name: str) -> str:
    with open(os.path.join(REAL, name), encoding="utf-8") as fh:
        return fh.read()


def shared(name: str) -> str:
    path = os.path.join(SHARED, name)
    if not os.path.exists(path):
        pytest.skip(f"shared sample {name} not present (../shared/samples/mlx)")
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def std(root, cfg=None):
    return check(root, "roce_qos", cfg, level="standard")


# -- parsers on real outputs ---------------------------------------------------

def test_ethtool_real_global_pause_counters():
    stats = parse_ethtool_stats(real("ethtool_S_grep_pause_CX4Lx_tx_global_pause_1266552_EXCERPT.txt"))
    counters = pause_counters(stats)
    assert counters["tx_global_pause"] == 1266552 and counters["tx_global_pause_duration"] == 555665182
    assert counters["tx_pause_storm_error_events"] == 0
    assert "tx_pause_ctrl_phy" not in counters and "outbound_pci_stalled_rd" not in counters
    assert tx_pause_names(counters) == ["tx_global_pause"]


def test_ethtool_real_non_mlx5_has_no_pause_counters():
    stats = parse_ethtool_stats(real("ethtool_S_grep_pause_ice_E810_no_mlx5_counters_EXCERPT.txt"))
    assert len(stats) == 32 and pause_counters(stats) == {}


def test_mlnx_qos_real_trust_and_pfc():
    assert parse_trust(shared("mlnx_qos_trust_dscp_OS_controlled_tsa_vendor_CX4.txt")) == "dscp"
    assert parse_trust(shared("mlnx_qos_firmware_DCBX_ets_bw_receive_buffer_pfc3.txt")) == "dscp"
    assert parse_pfc_enabled(shared("mlnx_qos_firmware_DCBX_ets_bw_receive_buffer_pfc3.txt")) == [3]
    pcp = real("mlnx_qos_trust_pcp_ens6_OS_controlled_no_pfc.txt")
    assert parse_trust(pcp) == "pcp" and parse_pfc_enabled(pcp) == []
    with pytest.raises(QosError, match="no 'Priority trust state' line"):
        parse_trust("mlnx_qos: error: no such device ens9\n")


# -- the check on node trees -----------------------------------------------------

def test_healthy_roce_passes_ib_is_na(tmp_path, clock):
    r = std(tree(tmp_path, "h100-roce-healthy"))
    assert r.status is Status.PASS and r.message == "8 RoCE netdevs: no pause storm or flood, trust dscp"
    assert std(tree(tmp_path, "h100-ib-healthy", name="ib")).status is Status.NA


def test_storm_example_fails_naming_the_device(tmp_path, clock):
    r = std(tree(tmp_path, "roce-pfc-storm"))
    assert r.status is Status.FAIL and r.devices == ["mlx5_2 (ens3np0)", "mlx5_2 (ens3np0)"]
    assert "mlx5_2 (ens3np0): PFC pause storm, tx_pause_storm_error_events +2 (limit 0)" in r.message
    assert "tx_pause_storm_warning_events +4 (limit 0)" in r.message
    assert "ethtool -S ens3np0" in r.hint and "mlx5_2 (ens3np0)" in r.hint


def test_trust_example_fails_with_the_fix_for_that_netdev(tmp_path, clock):
    r = std(tree(tmp_path, "roce-trust-pcp"))
    assert r.status is Status.FAIL and r.devices == ["mlx5_4 (ens5np0)"]
    assert r.message == "mlx5_4 (ens5np0): priority trust pcp, expected dscp"
    assert r.hint.startswith("mlnx_qos -i ens5np0 --trust dscp")
    assert std(tree(tmp_path, "roce-trust-pcp", name="p2"), config(checks={"roce_qos": {"trust": "pcp"}})).status \
        is Status.FAIL          # the other seven are dscp
    assert std(tree(tmp_path, "roce-trust-pcp", name="p3"), config(checks={"roce_qos": {"trust": "any"}})).status \
        is Status.PASS


def test_real_outputs_on_a_node(tmp_path, clock):
    """The real pcp output fails, the real dscp one passes; the real tx_global_pause
    reading warns on its first reading (1266552 pauses sent)."""
    root = tree(tmp_path)
    record_output(root, ["mlnx_qos", "-i", "ens1np0"], real("mlnx_qos_trust_pcp_ens6_OS_controlled_no_pfc.txt"))
    r = std(root)
    assert r.status is Status.FAIL and r.devices == ["mlx5_0 (ens1np0)"] and "mlnx_qos -i ens1np0 --trust dscp" in r.hint
    record_output(root, ["mlnx_qos", "-i", "ens1np0"], shared("mlnx_qos_trust_dscp_OS_controlled_tsa_vendor_CX4.txt"))
    assert std(root).status is Status.PASS
    record_output(root, ["ethtool", "-S", "ens2np0"], real("ethtool_S_grep_pause_CX4Lx_tx_global_pause_1266552_EXCERPT.txt"))
    clock[0] = T0 + 60
    r = std(root)
    assert r.status is Status.WARN and r.devices == ["mlx5_1 (ens2np0)"]
    assert "tx_global_pause +1266552 (limit 100000)" in r.message
    assert "mlx5_1 (ens2np0) sends many PFC pauses" in r.hint
    record_output(root, ["ethtool", "-S", "ens3np0"], real("ethtool_S_grep_pause_ice_E810_no_mlx5_counters_EXCERPT.txt"))
    r = std(root)
    assert "mlx5_2 (ens3np0): no pause counters in ethtool -S" in r.message


def test_storm_once_then_flat_recovers_after_the_window(tmp_path, clock):
    root = tree(tmp_path)
    assert std(root).status is Status.PASS
    clock[0] = T0 + 300
    set_pause_counters(root, 6, {"tx_pause_storm_error_events": 1})
    r = std(root)
    assert r.status is Status.FAIL and r.devices == ["mlx5_6 (ens7np0)"] and "in 5 min" in r.message
    clock[0] = T0 + 2000
    assert std(root).status is Status.FAIL
    clock[0] = T0 + 300 + 3601
    assert std(root).status is Status.PASS
    set_pause_counters(root, 6, {"tx_pause_storm_error_events": 1, "tx_prio3_pause": 200000})
    clock[0] = T0 + 4000
    r = std(root)
    assert r.status is Status.WARN and "tx_prio3_pause +200000 (limit 100000) in 1.0 h" in r.message


def test_mlnx_qos_missing_auto_notes_required_errors(tmp_path, clock, monkeypatch):
    root = tree(tmp_path)
    for f in os.listdir(f"{root}/var/lib/slurmqual-recorded"):
        if f.startswith("mlnx_qos"):
            os.unlink(f"{root}/var/lib/slurmqual-recorded/{f}")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    r = std(root)
    assert r.status is Status.PASS and "mlnx_qos not installed: trust mode not checked" in r.message
    r = std(root, config(checks={"roce_qos": {"mlnx_qos": True}}))
    assert r.status is Status.ERROR and "cannot read the trust mode" in r.message and r.devices == ["mlx5_0 (ens1np0)"]
    assert std(root, config(checks={"roce_qos": {"mlnx_qos": False}})).status is Status.PASS


def test_hung_ethtool_and_garbage_mlnx_qos_are_errors(tmp_path, clock):
    root = tree(tmp_path)
    set_qos_trust(root, 3, "dscp")
    record_output(root, ["mlnx_qos", "-i", "ens4np0"], "Traceback (most recent call last):\nImportError: dcb\n")
    r = std(root)
    assert r.status is Status.ERROR and r.devices == ["mlx5_3 (ens4np0)"] and "Priority trust state" in r.message
    open(f"{root}/var/lib/slurmqual-recorded/ethtool_-S_ens1np0.hang", "w").close()
    r = std(root)
    assert r.status is Status.ERROR and "mlx5_0 (ens1np0): cannot read pause counters" in r.message


def test_config_rejects_bad_values():
    with pytest.raises(Exception):
        config(checks={"roce_qos": {"trust": "vlan"}})
    with pytest.raises(Exception):
        config(checks={"roce_qos": {"tx_pause_limit": -1}})
